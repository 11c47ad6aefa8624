# SPDX-License-Identifier: GPL-3.0-or-later
"""The body fit on a GPU: the graph solver (FitSettings.solver="graph": fixed-length steps, no
host reads, one CUDA graph replay per step) against torch's L-BFGS on the same device and on
the CPU, per person and batched.

    # here (the ray caster): the ground-truth scenes' maps and true joints
    .venv/bin/python benchmarks/bench_fit.py --save-cases cases/ --cases clean,dressed,...
    # on the GPU machine
    python3 benchmarks/bench_fit_gpu.py --cases-dir cases/ --json-out out.jsonl

Per case: the first fit (graphs captured on the way), then ``--repeats`` warm fits (a warm
server reuses the captured graphs for photos of the same group shape: people, kind of depth,
points and pixels padded to graph_solver.BUCKET): seconds per person (the device waited for),
the stages' split, and the 12 limb joints' mean / max error against the truth (cm), beside
torch's L-BFGS on the same device (one fit) and on the CPU (one fit, one thread, as the server
runs it). Batched: one photo's person repeated N times in one group (group_size N): fits per
second. Every result is a JSON line (``--json-out``) and a printed line. ``--device cpu`` runs
the same on the CPU in seconds with ``--quick`` (tests/fit/test_graph_solver.py does).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "benchmarks"), str(ROOT / "tests" / "support")]

from bench_fit import _limb_cm, load_case  # noqa: E402  (the saved cases and their scoring)
from gt_cases import observations as _observations  # noqa: E402


def _joint_cm(out: dict, truth: list, name: str) -> tuple[float, float]:
    """Mean and max over people of the limb joints' error (cm)."""
    import scoring
    from inference_server.fit.correspondences import JOINT_NAMES

    names = _limb_cm(out, truth, name)[0]
    e = np.concatenate([100 * scoring.joint_errors({n: out["joints"][i][JOINT_NAMES.index(n)] for n in names},
                                                   t.joints, names) for i, t in enumerate(truth)])
    return float(e.mean()), float(e.max())


def _fit(body, obs, settings):
    import torch

    from inference_server.fit.solver import fit_people

    if body.device.type == "cuda":
        torch.cuda.synchronize()
    t = time.perf_counter()
    out = fit_people(body, obs, settings)
    if body.device.type == "cuda":
        torch.cuda.synchronize()
    return out, time.perf_counter() - t


def _stages(out: dict) -> dict:
    reports = [json.loads(str(r)) for r in out["reports"]]
    keys = reports[0].get("stage_seconds", {}).keys()
    return {k: round(statistics.mean(r["stage_seconds"][k] for r in reports), 4) for k in keys}


def _batched(body, one, batch: str, quick: dict, name: str, grid: str, emit) -> None:
    from inference_server.fit.solver import FitSettings

    for n in (int(b) for b in batch.split(",") if b):
        settings = FitSettings(solver="graph", group_size=n, fold_tries=0, **quick)
        _fit(body, one * n, settings)  # captures this group shape's graphs
        out, sec = _fit(body, one * n, settings)
        emit("batched", case=name, grid=grid, people=n, seconds=round(sec, 3), people_per_s=round(n / sec, 1),
             stages=_stages(out))


def _profile(body, obs, settings, emit, top: int = 15) -> None:
    """One warm fit under torch.profiler: the ops taking the most host time (self) and device
    time, and the fit's wall time beside the device's busy time."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    _fit(body, obs, settings)  # warm: graphs captured
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if body.device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        _, sec = _fit(body, obs, settings)
    ev = prof.key_averages()
    dev = lambda e: getattr(e, "self_device_time_total", getattr(e, "self_cuda_time_total", 0))  # noqa: E731
    host = sorted(ev, key=lambda e: e.self_cpu_time_total, reverse=True)[:top]
    gpu = sorted(ev, key=dev, reverse=True)[:top]
    emit("profile", people=len(obs), wall_s=round(sec, 3),
         device_busy_s=round(sum(dev(e) for e in ev) / 1e6, 3),
         host_top=[(e.key[:60], e.count, round(e.self_cpu_time_total / 1e3, 1)) for e in host],
         device_top=[(e.key[:60], e.count, round(dev(e) / 1e3, 1)) for e in gpu])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases-dir", type=Path, required=True, help="cases saved by bench_fit.py --save-cases")
    ap.add_argument("--cases", default=None, help="comma-separated (default: every case in the folder)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--repeats", type=int, default=3, help="warm fits per case")
    ap.add_argument("--batch", default="1,2,4,8,16,32", help="people per group for the batched throughput")
    ap.add_argument("--reference", default="clean", help="case(s) also fitted with torch's L-BFGS (device, CPU)")
    ap.add_argument("--compile", action="store_true", help="also the graph solver with its evaluation "
                    "compiled (FitSettings.compile), on the first case")
    ap.add_argument("--eager", action="store_true", help="also the graph solver without CUDA graphs (the "
                    "same steps launched from Python), on the first case: what the graphs save")
    ap.add_argument("--quick", action="store_true", help="few steps (a smoke run of every code path)")
    ap.add_argument("--grid", default=None, help="another line-search grid, step lengths comma-separated "
                    "(graph_solver.STEPS; e.g. 2,1,0.25,0.03): every case and the batches again with it")
    ap.add_argument("--profile", default=None, help="people per group (comma-separated) of a warm fit "
                    "profiled: where its host and device time go (torch.profiler, top ops)")
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args(argv)

    import torch

    from inference_server.fit.body_model import BodyModel
    from inference_server.fit.solver import FitSettings

    sink = open(args.json_out, "a") if args.json_out else None

    def emit(kind: str, **row):
        row = {"kind": kind, **row}
        print(json.dumps(row), flush=True)
        if sink:
            sink.write(json.dumps(row) + "\n")
            sink.flush()

    names = args.cases.split(",") if args.cases else sorted(p.stem for p in args.cases_dir.glob("*.npz"))
    quick = dict(skeleton_steps=3, skeleton_steps_without_metric=3, surface_steps=2, surface_rounds=1,
                 surface_steps_without_metric=2, surface_rounds_without_metric=1, shape_steps=1) if args.quick else {}
    t = time.perf_counter()
    body = BodyModel.load(args.device)
    card = torch.cuda.get_device_name(body.device) if body.device.type == "cuda" else "cpu"
    emit("setup", device=args.device, card=card, torch=torch.__version__, load_s=round(time.perf_counter() - t, 1))
    graph = FitSettings(solver="graph", **quick)
    for name in names:
        maps, truth = load_case(name, args.cases_dir)
        obs = _observations(maps)
        try:
            out, first = _fit(body, obs, graph)
        except Exception as exc:  # noqa: BLE001 - a capture that fails: say why, go on without graphs
            import traceback

            from inference_server.fit import graph_solver

            if not graph_solver.CAPTURE:
                raise
            emit("capture_failed", case=name, error=f"{type(exc).__name__}: {exc}"[:2000],
                 where=traceback.format_exc()[-3000:])
            graph_solver.CAPTURE = False
            out, first = _fit(body, obs, graph)
        runs = []
        for _ in range(args.repeats):
            out, sec = _fit(body, obs, graph)
            runs.append(sec)
        mean_cm, max_cm = _joint_cm(out, truth, name)
        from inference_server.fit import graph_solver

        emit("graph", case=name, grid="default", people=len(obs), cuda_graphs=graph_solver.CAPTURE and body.device.type == "cuda", first_s=round(first / len(obs), 3),
             warm_s=round(statistics.median(runs) / len(obs), 3) if runs else None,
             stages=_stages(out), joints_mean_cm=round(mean_cm, 2), joints_max_cm=round(max_cm, 2))
    if args.eager:
        from inference_server.fit import graph_solver

        maps, truth = load_case(names[0], args.cases_dir)
        obs = _observations(maps)
        held, graph_solver.CAPTURE = graph_solver.CAPTURE, False
        try:
            out, sec = _fit(body, obs, graph)
        finally:
            graph_solver.CAPTURE = held
        mean_cm, max_cm = _joint_cm(out, truth, names[0])
        emit("graph_eager", case=names[0], seconds=round(sec / len(obs), 3), stages=_stages(out),
             joints_mean_cm=round(mean_cm, 2), joints_max_cm=round(max_cm, 2))
    if body.device.type == "cuda":  # one captured step's replay, per kind of step (the floor of a fit)
        from inference_server.fit import graph_solver

        for key, solver in list(graph_solver._SOLVERS.items())[-2:]:
            if "step" not in solver.graphs:
                continue
            saved = {k: v.clone() for k, v in vars(solver.state).items() if isinstance(v, torch.Tensor)}
            torch.cuda.synchronize()
            t = time.perf_counter()
            for _ in range(50):
                solver.graphs["step"].replay()
            torch.cuda.synchronize()
            emit("step_replay", dense=solver.dense, people=solver.people, rows=solver.people * len(graph_solver.STEPS),
                 ms=round(1000 * (time.perf_counter() - t) / 50, 3))
            for k, v in saved.items():
                getattr(solver.state, k).copy_(v)
    for name in (args.reference.split(",") if args.reference else []):
        maps, truth = load_case(name, args.cases_dir)
        obs = _observations(maps)
        for device in dict.fromkeys([args.device, "cpu"]):
            model = body if device == args.device else BodyModel.load(device)
            out, sec = _fit(model, obs, FitSettings(solver="lbfgs", **quick))
            mean_cm, max_cm = _joint_cm(out, truth, name)
            emit("lbfgs", case=name, device=device, seconds=round(sec / len(obs), 3), stages=_stages(out),
                 joints_mean_cm=round(mean_cm, 2), joints_max_cm=round(max_cm, 2))
    # Batched: one person repeated N times in one group (one photo: the terms need one grid).
    maps, truth = load_case(names[0], args.cases_dir)
    one = _observations(maps)[:1]
    _batched(body, one, args.batch, quick, names[0], "default", emit)
    if args.profile:
        for n in (int(b) for b in args.profile.split(",") if b):
            _profile(body, one * n, FitSettings(solver="graph", group_size=n, fold_tries=0, **quick), emit)
    if args.grid:  # the same cases and batches with another line-search grid
        from inference_server.fit import graph_solver

        held = graph_solver.STEPS
        graph_solver.STEPS = tuple(float(v) for v in args.grid.split(","))
        graph_solver._SOLVERS.clear()  # captured steps bake the grid in
        try:
            for name in names:
                maps, truth = load_case(name, args.cases_dir)
                obs = _observations(maps)
                _fit(body, obs, graph)
                out, sec = _fit(body, obs, graph)
                mean_cm, max_cm = _joint_cm(out, truth, name)
                emit("graph", case=name, grid=args.grid, people=len(obs), warm_s=round(sec / len(obs), 3),
                     stages=_stages(out), joints_mean_cm=round(mean_cm, 2), joints_max_cm=round(max_cm, 2))
            _batched(body, one, args.batch, quick, names[0], args.grid, emit)
        finally:
            graph_solver.STEPS = held
            graph_solver._SOLVERS.clear()
    if args.compile:  # the evaluation through torch.compile too (compiling first: minutes)
        maps, truth = load_case(names[0], args.cases_dir)
        obs = _observations(maps)
        settings = FitSettings(solver="graph", compile=True, **quick)
        t = time.perf_counter()
        _fit(body, obs, settings)
        compiling = time.perf_counter() - t
        out, sec = _fit(body, obs, settings)
        mean_cm, max_cm = _joint_cm(out, truth, names[0])
        emit("graph_compiled", case=names[0], first_s=round(compiling, 1), warm_s=round(sec / len(obs), 3),
             stages=_stages(out), joints_mean_cm=round(mean_cm, 2), joints_max_cm=round(max_cm, 2))
    if body.device.type == "cuda":
        emit("memory", peak_gib=round(torch.cuda.max_memory_allocated() / 2 ** 30, 2))
    if sink:
        sink.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
