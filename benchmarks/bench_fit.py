# SPDX-License-Identifier: GPL-3.0-or-later
"""Body fit speed against a plain baseline, measured in one run, and its ground-truth quality.

    .venv/bin/python benchmarks/bench_fit.py                 # speed: ours vs plain Adam
    .venv/bin/python benchmarks/bench_fit.py --quality       # + the ground-truth table

Speed: per person, on ray-cast anny scenes (320x240, exact maps), the default fit against the
baseline the issue defines: the same losses, plain Adam on the full model in float32 from the
rest pose (facing the camera at the silhouette's place), no staging, no warm start, run until
its keypoint reprojection error is as low as ours (checked every 5 steps, at most --max-steps).
Also the cost of one forward+backward of each pass. Ratios are what compare across machines.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT), str(ROOT / "tests" / "groundtruth"), str(ROOT / "tests" / "fit")]


def pass_costs(body, repeats: int = 20) -> dict:
    import torch

    b = len(body.bone_names)
    phen = torch.full((1, 6), 0.5, requires_grad=True)
    rot = torch.zeros((1, b, 3), requires_grad=True)
    rest = body.rest_state(phen.detach(), True)

    def timed(fn):
        fn()
        t = time.perf_counter()
        for _ in range(repeats):
            fn()
        return 1000 * (time.perf_counter() - t) / repeats

    return {
        "full_shape_pose_ms": timed(lambda: body.full(phen, rot)["vertices"].sum().backward()),
        "full_pose_only_ms": timed(lambda: body.full(rest, rot)["vertices"].sum().backward()),
        "skeleton_shape_pose_ms": timed(lambda: body.skeleton(phen, rot).joints.sum().backward()),
        "skeleton_pose_only_ms": timed(lambda: body.skeleton(rest, rot).joints.sum().backward()),
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", default="clean,turned_stepping_heavy", help="ground-truth cases for speed")
    ap.add_argument("--max-steps", type=int, default=1500, help="baseline step limit")
    ap.add_argument("--quality", action="store_true", help="also print the ground-truth table")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    args = ap.parse_args(argv)

    import torch

    import gt_cases
    from inference_server.fit.body_model import BodyModel
    from inference_server.fit.solver import FitSettings

    if args.threads:
        torch.set_num_threads(args.threads)
    body = BodyModel.load()
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads, device cpu")
    print("pass costs (fwd+bwd):", {k: round(v, 1) for k, v in pass_costs(body).items()})
    ratios = []
    for name in args.cases.split(","):
        ours, _maps, bodies, t_ours = gt_cases.fit_case(body, name)
        ours_px = max(json.loads(str(r))["reprojection_px"] for r in ours["reports"])
        plain = FitSettings(plain=True, plain_steps=args.max_steps, target_joint_px=ours_px)
        base, _m, _b, t_base = gt_cases.fit_case(body, name, plain)
        base_rep = [json.loads(str(r)) for r in base["reports"]]
        reached = all(r["reprojection_px"] <= ours_px + 1e-6 for r in base_rep)
        q_ours = gt_cases.score_case(body, ours, bodies, name)
        q_base = gt_cases.score_case(body, base, bodies, name)
        people = len(bodies)
        ratios.append(t_base / t_ours)
        print(f"{name}: {people} person(s); ours {t_ours / people:.2f} s/person "
              f"({ours_px:.2f} px, joints {statistics.mean(r['joint_mean_cm'] for r in q_ours):.2f} cm); "
              f"baseline {t_base / people:.2f} s/person, steps {[r['steps']['plain'] for r in base_rep]}, "
              f"{max(r['reprojection_px'] for r in base_rep):.2f} px"
              f"{'' if reached else ' (did NOT reach ours: ratio is a lower bound)'}, "
              f"joints {statistics.mean(r['joint_mean_cm'] for r in q_base):.2f} cm; "
              f"speed-up {t_base / t_ours:.1f}x")
    print(f"speed-up, geometric mean: {statistics.geometric_mean(ratios):.1f}x")
    if args.quality:
        print("\ncase | person | s | hidden cm | visible cm | Chamfer % | joints mean cm | joints max cm "
              "| height err cm | rest asym cm")
        for name in gt_cases.CASES:
            out, _maps, bodies, sec = gt_cases.fit_case(body, name)
            for i, r in enumerate(gt_cases.score_case(body, out, bodies, name)):
                print(f"{name} | {i + 1} | {sec / len(bodies):.2f} | " + " | ".join(f"{v:.2f}" for v in r.values()),
                      flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
