# SPDX-License-Identifier: GPL-3.0-or-later
"""Body fit speed against a plain baseline, measured in one run, and its ground-truth quality.

    .venv/bin/python benchmarks/bench_fit.py                 # speed: ours vs plain Adam
    .venv/bin/python benchmarks/bench_fit.py --quality       # + the ground-truth table

Speed: per person, on ray-cast anny scenes (320x240, exact maps), the default fit against the
baseline the issue defines: the same losses and observations, plain Adam on the full model in
float32 from the rest pose (facing the camera at the silhouette's place), no staging, no warm
start. The baseline runs until it reaches the same joint error as ours, by two criteria checked
every 5 steps (at most --max-steps):
- 3D: the mean error of the 12 limb joints against the scene's truth (the ground-truth table's
  "joints mean"), the error the issue scores;
- 2D: the mean keypoint reprojection error.
Both sides are timed alike: the fit's own time per person (the report's), without the
observations, the final evaluation of the mesh, or the baseline's checks. Also the cost of one
forward+backward of each pass. Ratios are what compare across machines.

``--compile`` also times the fit with its evaluation compiled (FitSettings.compile), against
the default fit in the same run, after compiling once (the compiling time is printed).

On a GPU (``--device cuda``) the scenes can be rendered here and carried, as the GPU machine
may lack the ray caster: ``--save-cases DIR`` writes each case's maps and true joints, and
``--cases-dir DIR`` fits those instead of rendering (the speed race only).
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
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "support")]


def _sync(device) -> None:
    import torch

    if str(device).startswith("cuda"):
        torch.cuda.synchronize(device)


def pass_costs(body, repeats: int = 20) -> dict:
    import torch

    b = len(body.bone_names)
    phen = torch.full((1, 6), 0.5, requires_grad=True, device=body.device)
    rot = torch.zeros((1, b, 3), requires_grad=True, device=body.device)
    rest = body.rest_state(phen.detach(), True)

    def timed(fn):
        fn()
        _sync(body.device)
        t = time.perf_counter()
        for _ in range(repeats):
            fn()
        _sync(body.device)
        return 1000 * (time.perf_counter() - t) / repeats

    return {
        "full_shape_pose_ms": timed(lambda: body.full(phen, rot)["vertices"].sum().backward()),
        "full_pose_only_ms": timed(lambda: body.full(rest, rot)["vertices"].sum().backward()),
        "skeleton_shape_pose_ms": timed(lambda: body.skeleton(phen, rot).joints.sum().backward()),
        "skeleton_pose_only_ms": timed(lambda: body.skeleton(rest, rot).joints.sum().backward()),
    }


class _Race:
    """The baseline's monitor: per person, when (steps, fit seconds) it first reached our 3D
    limb-joint error and our reprojection error; it stops the run once both are reached."""

    def __init__(self, bodies, targets_cm, targets_px, names):
        from inference_server.fit.correspondences import JOINT_NAMES

        self.index = [JOINT_NAMES.index(n) for n in names]
        self.truth = [np.stack([b.joints[n] for n in names]) for b in bodies]
        self.targets_cm, self.targets_px = targets_cm, targets_px
        self.reached = {"3d": {}, "2d": {}}
        self.last = {}

    def __call__(self, pid, steps, seconds, joints, px):
        k = pid - 1
        cm = 100 * float(np.linalg.norm(joints[self.index] - self.truth[k], axis=1).mean())
        self.last[pid] = (steps, seconds, cm, px)
        if cm <= self.targets_cm[k] + 1e-9:
            self.reached["3d"].setdefault(pid, (steps, seconds))
        if px <= self.targets_px[k] + 1e-9:
            self.reached["2d"].setdefault(pid, (steps, seconds))
        return pid in self.reached["3d"] and pid in self.reached["2d"]

    def time_to(self, kind, pid):
        """(seconds, steps, reached): the time to reach the criterion, or the whole run's."""
        if pid in self.reached[kind]:
            steps, seconds = self.reached[kind][pid]
            return seconds, steps, True
        steps, seconds, _cm, _px = self.last[pid]
        return seconds, steps, False


class _Truth:
    """What the race reads of a true body: its joints."""

    def __init__(self, joints: dict):
        self.joints = {k: np.asarray(v, np.float64) for k, v in joints.items()}


def save_cases(names, folder: Path) -> None:
    """Each case's maps (docs/maps_format.md .npz) and true joints, for ``--cases-dir``."""
    import gt_cases

    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        maps, bodies = gt_cases.case(name)
        maps.save(folder / f"{name}.npz")
        truth = [{k: np.asarray(v).tolist() for k, v in b.joints.items()} for b in bodies]
        (folder / f"{name}.json").write_text(json.dumps(truth))


def load_case(name: str, folder: Path):
    from sapiens_blender.core.maps.canonical import Maps

    maps = Maps.load(folder / f"{name}.npz")
    return maps, [_Truth(j) for j in json.loads((folder / f"{name}.json").read_text())]


def _joints_of(out: dict, person: int) -> dict:
    from inference_server.fit.correspondences import JOINT_NAMES

    return {n: out["joints"][person][j] for j, n in enumerate(JOINT_NAMES)}


def race(body, name: str, max_steps: int, cases_dir: Path | None = None) -> dict:
    import gt_cases
    from inference_server.fit.solver import FitSettings

    given = load_case(name, cases_dir) if cases_dir else None
    ours, _maps, bodies, wall = gt_cases.fit_case(body, name, given=given)
    reports = [json.loads(str(r)) for r in ours["reports"]]
    names, ours_cm = _limb_cm(ours, bodies, name)
    monitor = _Race(bodies, ours_cm, [r["reprojection_px"] for r in reports], names)
    gt_cases.fit_case(body, name, FitSettings(plain=True, plain_steps=max_steps, plain_monitor=monitor),
                      given=given)
    pids = range(1, len(bodies) + 1)
    out = {"people": len(bodies), "ours_wall": wall / len(bodies),
           "ours": sum(r["seconds"] for r in reports) / len(bodies),
           "ours_cm": statistics.mean(ours_cm),
           "ours_px": statistics.mean(r["reprojection_px"] for r in reports)}
    for kind in ("3d", "2d"):
        runs = [monitor.time_to(kind, pid) for pid in pids]
        out[kind] = {"seconds": sum(r[0] for r in runs) / len(bodies), "steps": [r[1] for r in runs],
                     "reached": all(r[2] for r in runs)}
        out[kind]["speedup"] = out[kind]["seconds"] / out["ours"]
    out["base_last_cm"] = statistics.mean(monitor.last[pid][2] for pid in pids)
    out["base_last_px"] = statistics.mean(monitor.last[pid][3] for pid in pids)
    return out


def compiled_run(body, name: str, cases_dir: Path | None = None) -> dict:
    """The compiled fit's time per person (the report's, like ``race``) and joint error."""
    import gt_cases
    from inference_server.fit.solver import FitSettings

    given = load_case(name, cases_dir) if cases_dir else None
    out, _maps, bodies, _wall = gt_cases.fit_case(body, name, FitSettings(compile=True), given=given)
    reports = [json.loads(str(r)) for r in out["reports"]]
    return {"seconds": sum(r["seconds"] for r in reports) / len(bodies),
            "cm": statistics.mean(_limb_cm(out, bodies, name)[1])}


def _limb_cm(out: dict, bodies, name: str) -> tuple[tuple, list[float]]:
    """(the limb joints scored, each person's mean error over them in cm); a half-body crop or
    a bust scores its arms only."""
    import gt_cases
    import scoring

    names = scoring.LIMB_JOINTS[:6] if name in gt_cases.UPPER_BODY_ONLY else scoring.LIMB_JOINTS
    return names, [100 * float(scoring.joint_errors(_joints_of(out, i), b.joints, names).mean())
                   for i, b in enumerate(bodies)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="clean,turned_stepping_heavy", help="ground-truth cases for speed "
                    "(docs/performance.md: clean,dressed,turned_stepping_heavy,across_slim,two_people)")
    ap.add_argument("--max-steps", type=int, default=1500, help="baseline step limit")
    ap.add_argument("--quality", action="store_true", help="also print the ground-truth table (the "
                    "test cases, then the held-out scenes)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    ap.add_argument("--device", default="cpu", help="torch device of the fit: cpu, cuda, cuda:N")
    ap.add_argument("--compile", action="store_true", help="also time the compiled fit (FitSettings.compile) "
                    "against the default one, after compiling once")
    ap.add_argument("--save-cases", type=Path, metavar="DIR", help="write the cases' maps and true joints "
                    "to DIR and exit")
    ap.add_argument("--cases-dir", type=Path, metavar="DIR", help="race on the cases saved in DIR "
                    "(no rendering: for a machine without the ray caster)")
    args = ap.parse_args(argv)
    cases = args.cases.split(",")
    if args.save_cases:
        save_cases(cases, args.save_cases)
        print(f"saved {len(cases)} cases to {args.save_cases}")
        return 0

    import torch

    import gt_cases
    from inference_server.fit.body_model import BodyModel

    if args.threads:
        torch.set_num_threads(args.threads)
    t = time.perf_counter()
    body = BodyModel.load(args.device)
    name = torch.cuda.get_device_name(body.device) if body.device.type == "cuda" else "cpu"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device {args.device} ({name}); "
          f"body model loaded in {time.perf_counter() - t:.1f} s", flush=True)
    print("pass costs (fwd+bwd):", {k: round(v, 1) for k, v in pass_costs(body).items()}, flush=True)
    if body.device.type == "cuda":  # kernels, cuBLAS and the allocator warm, as in a running server
        given = load_case(cases[0], args.cases_dir) if args.cases_dir else None
        gt_cases.fit_case(body, cases[0], given=given)
    ratios = {"3d": [], "2d": [], "compiled": []}
    if args.compile:  # compile for every group size the cases hold, then race
        from inference_server.fit.solver import FitSettings

        for name in cases:
            given = load_case(name, args.cases_dir) if args.cases_dir else None
            t = time.perf_counter()
            gt_cases.fit_case(body, name, FitSettings(compile=True), given=given)
            print(f"compiled fit, first run on {name} (compiling included): {time.perf_counter() - t:.1f} s",
                  flush=True)
    for name in cases:
        r = race(body, name, args.max_steps, args.cases_dir)
        if args.compile:
            c = compiled_run(body, name, args.cases_dir)
            ratios["compiled"].append(r["ours"] / c["seconds"])
            print(f"{name}: compiled {c['seconds']:.2f} s/person against {r['ours']:.2f} eager "
                  f"({r['ours'] / c['seconds']:.2f}x), joints {c['cm']:.2f} cm", flush=True)
        text = []
        for kind, what in (("3d", "3D limb joints"), ("2d", "2D reprojection")):
            k = r[kind]
            ratios[kind].append(k["speedup"])
            bound = "" if k["reached"] else " (NOT reached: a lower bound)"
            text.append(f"to our {what}: {k['seconds']:.2f} s, steps {k['steps']}{bound}, "
                        f"speed-up {'>' if not k['reached'] else ''}{k['speedup']:.1f}x")
        print(f"{name}: {r['people']} person(s); ours {r['ours']:.2f} s/person fitting "
              f"({r['ours_wall']:.2f} s wall), joints {r['ours_cm']:.2f} cm, {r['ours_px']:.2f} px; "
              f"baseline at its end: joints {r['base_last_cm']:.2f} cm, {r['base_last_px']:.2f} px", flush=True)
        for t in text:
            print("   baseline " + t, flush=True)
    for kind in ("3d", "2d"):
        print(f"speed-up ({kind} criterion), geometric mean: {statistics.geometric_mean(ratios[kind]):.1f}x")
    if ratios["compiled"]:
        print(f"compiled against eager, geometric mean: {statistics.geometric_mean(ratios['compiled']):.2f}x")
    if args.quality:
        print("\ncase | person | s | hidden cm | visible cm | Chamfer % | joints mean cm | joints max cm "
              "| height err cm | rest asym cm")
        for name in gt_cases.CASES + tuple(gt_cases.HELD_OUT):
            out, _maps, bodies, sec = gt_cases.fit_case(body, name)
            for i, row in enumerate(gt_cases.score_case(body, out, bodies, name)):
                print(f"{name} | {i + 1} | {sec / len(bodies):.2f} | " + " | ".join(f"{v:.2f}" for v in row.values()),
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
