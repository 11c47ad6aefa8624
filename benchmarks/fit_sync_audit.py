# SPDX-License-Identifier: GPL-3.0-or-later
"""Host reads in the graph solver's captured path, found on the GPU in one run.

A CUDA graph cannot hold an operation that makes the host wait for the device (``.item()``, a
data-dependent shape, a solver's error check, prod's backward...). The first H100 capture failed
on one such read deep in a backward formula. Here the graph solver runs eagerly (no capture) on
one saved case with few steps; its evaluation + step and its round-start refresh run under
``torch.cuda.set_sync_debug_mode``: first "error" with autograd's anomaly mode (the exception's
stack and, for a read inside a backward, the forward line that made the node), then "warn" to
count every synchronising call of one step. One JSON line per finding, then a verdict line:

    {"kind": "sync_audit", "verdict": "clean" | "syncs", "first": ..., "sites": [...]}

On the CPU (a dry run: no device, nothing to find) it runs the same path and says "cpu".

    python3 benchmarks/fit_sync_audit.py --cases-dir .gpu/cases --case clean --json-out audit.jsonl
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests" / "support")]

QUICK = dict(skeleton_steps=2, skeleton_steps_without_metric=2, surface_steps=2, surface_rounds=1,
             surface_steps_without_metric=2, surface_rounds_without_metric=1, shape_steps=1)


def _ours(stack) -> list[str]:
    """The frames of this repository (and anny) in a stack, innermost last, cut short."""
    keep = [f for f in stack if "inference_server" in f.filename or "/anny/" in f.filename]
    return [f"{Path(f.filename).name}:{f.lineno} {f.name}: {(f.line or '').strip()[:100]}" for f in keep[-8:]]


class Audit:
    """Wraps graph_solver._Solver._refresh/_step: each kind checked once (error, then warn)."""

    def __init__(self, cuda: bool):
        import torch

        self.cuda = cuda
        # On the CPU (the dry run) the same wrapping runs, with nothing to set or wait for.
        self.mode = torch.cuda.set_sync_debug_mode if cuda else (lambda mode: None)
        self.wait = torch.cuda.synchronize if cuda else (lambda: None)
        self.checked: set[str] = set()
        self.rows: list[dict] = []

    def wrap(self, name: str, fn):
        import torch

        def checked(solver):
            if name in self.checked:
                return fn(solver)
            self.checked.add(name)
            snapshot = {k: v.clone() for k, v in vars(solver.state).items() if isinstance(v, torch.Tensor)}
            self.wait()
            anomaly = []
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                self.mode("error")
                try:
                    with torch.autograd.detect_anomaly(check_nan=False):
                        fn(solver)
                    self.rows.append({"kind": "sync_check", "what": name, "mode": "error", "result": "clean"})
                except RuntimeError as exc:
                    anomaly = [str(w.message)[-1500:] for w in caught if "anomaly" in str(w.message).lower()
                               or "Traceback of forward call" in str(w.message)]
                    self.rows.append({"kind": "sync_check", "what": name, "mode": "error",
                                      "error": f"{type(exc).__name__}: {exc}"[:600],
                                      "stack": _ours(traceback.extract_tb(exc.__traceback__)),
                                      "forward_of_backward_node": anomaly[:1]})
                finally:
                    self.mode(0)
            for k, v in snapshot.items():
                getattr(solver.state, k).copy_(v)
            sites: dict[str, int] = {}
            original = warnings.showwarning

            def record(message, category, filename, lineno, file=None, line=None):
                if "synchroniz" in str(message):
                    where = " <- ".join(reversed(_ours(traceback.extract_stack()[:-1])[-3:])) or "(backward/C++)"
                    sites[where] = sites.get(where, 0) + 1

            warnings.showwarning = record
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("always")
                    warnings.showwarning = record
                    self.mode("warn")
                    try:
                        fn(solver)
                    finally:
                        self.mode(0)
            finally:
                warnings.showwarning = original
            self.rows.append({"kind": "sync_check", "what": name, "mode": "warn", "syncs": sum(sites.values()),
                              "sites": [[k, v] for k, v in sorted(sites.items(), key=lambda kv: -kv[1])][:12]})
            return None

        return checked


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases-dir", type=Path, required=True)
    ap.add_argument("--case", default="clean")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args(argv)

    import torch

    from bench_fit import load_case
    from gt_cases import observations
    from inference_server.fit import graph_solver
    from inference_server.fit.body_model import BodyModel
    from inference_server.fit.solver import FitSettings, fit_people

    body = BodyModel.load(args.device)
    cuda = body.device.type == "cuda"
    audit = Audit(cuda)
    saved_capture = graph_solver.CAPTURE
    graph_solver.CAPTURE = False  # eager: the very operations a capture would record
    originals = {n: getattr(graph_solver._Solver, n) for n in ("_refresh", "_step")}
    for n, fn in originals.items():
        setattr(graph_solver._Solver, n, audit.wrap(n, fn))
    try:
        maps, _ = load_case(args.case, args.cases_dir)
        fit_people(body, observations(maps)[:1], FitSettings(solver="graph", **QUICK))
    finally:
        for n, fn in originals.items():
            setattr(graph_solver._Solver, n, fn)
        graph_solver.CAPTURE = saved_capture
    errors = [r for r in audit.rows if r.get("error") or r.get("syncs")]
    verdict = "cpu" if not cuda else ("syncs" if errors else "clean")
    rows = audit.rows + [{"kind": "sync_audit", "verdict": verdict, "checked": sorted(audit.checked), "device": str(body.device),
                          "first": errors[0] if errors else None}]
    with open(args.json_out, "a") if args.json_out else open("/dev/null", "w") as sink:
        for r in rows:
            print(json.dumps(r), flush=True)
            sink.write(json.dumps(r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
