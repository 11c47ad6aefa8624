# SPDX-License-Identifier: GPL-3.0-or-later
"""The face's expressions: what they cost and how well they are recovered, in one run.

Ground truth: tests/support/face_cases.py (a fitted anny body, "standing"; 12 named expressions
and a 40-frame talking face; 31 face landmarks projected with 1 % landmark noise, a face ~140 px
high). Rows:
- photo: the expression fit per person (face_rig + fit_expression), target <= 0.2 s; and the 52
  shape keys made in bpy (add_expression_keys) for the record;
- clip: per frame (fit at every frame's pose + smoothing), target <= 10 ms;
- accuracy: MAE on the driven keys (target <= 0.1), the talking jaw, jitter cut (target >= 5x).

    .venv/bin/python benchmarks/bench_expressions.py [--repeats 5]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO), str(REPO / "tests" / "support")]

import body_scenes  # noqa: E402
import face_cases  # noqa: E402
from sapiens_blender.core.body import expression_fit  # noqa: E402
from sapiens_blender.core.motion import face  # noqa: E402


def timed(fn, repeats: int) -> tuple[float, object]:
    times, out = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5)
    args = ap.parse_args()
    scene = body_scenes.make("standing")
    t, f = scene.template, scene.fit
    driven = np.array([t.expression_names.index(n) for n in expression_fit.DRIVEN])
    k = face_cases.INTRINSICS

    # Photo: one person's fit, from the fitted body and the keypoints.
    truth = face_cases.values_of(t, face_cases.CASES["asymmetric"])
    kp = face_cases.keypoints(t, f, 0, truth, np.random.default_rng(0))
    person_s, _ = timed(lambda: expression_fit.fit_expression(
        expression_fit.face_rig(t, f.rest_vertices[0], f.rest_bone_matrices[0], f.bone_matrices[0],
                                f.placement[0], k), kp, 52), args.repeats)
    print(f"photo: expression fit per person {1000 * person_s:.2f} ms (target <= 200 ms)")
    try:
        import bpy

        from sapiens_blender.blender.body import build_body_mesh
        from sapiens_blender.blender.expressions import add_expression_keys

        def keys():
            obj = build_body_mesh(f.rest_vertices[0], t.faces, t.uv, t.face_uv, "bench", bpy.context.scene.collection)
            start = time.perf_counter()
            add_expression_keys(obj, t, f.rest_vertices[0], truth)
            took = time.perf_counter() - start
            bpy.data.meshes.remove(obj.data)
            return took

        keys_s = statistics.median(keys() for _ in range(args.repeats))
        print(f"photo: 52 shape keys in bpy {1000 * keys_s:.1f} ms")
    except ImportError:
        print("photo: bpy not installed, the shape keys are not timed")

    # Clip: the talking face, per frame.
    track, talk = face_cases.talking_track(scene)
    clip_s, smoothed = timed(lambda: face.track_expressions(track, k, 2), args.repeats)
    print(f"clip: {1000 * clip_s / len(talk):.2f} ms per frame over {len(talk)} frames (target <= 10 ms)")

    # Accuracy.
    errors = []
    for case in face_cases.CASES.values():
        v = face_cases.values_of(t, case)
        rig = expression_fit.face_rig(t, f.rest_vertices[0], f.rest_bone_matrices[0], f.bone_matrices[0],
                                      f.placement[0], k)
        for seed in range(5):
            kp = face_cases.keypoints(t, f, 0, v, np.random.default_rng(seed))
            got = expression_fit.fit_expression(rig, kp, 52)
            errors.append(np.abs(got[driven] - v[driven]))
    print(f"accuracy: photo MAE on the {len(driven)} driven keys {np.mean(errors):.3f} "
          f"({len(face_cases.CASES)} expressions x 5 noise draws; target <= 0.1)")
    raw = face.frame_expressions(t, f, 0, track.body.bone_matrices, track.keypoints, k)
    blinks = [t.expression_names.index(n) for n in face.BLINKS]
    others = [d for d in driven if d not in blinks]
    jitter = lambda x: np.abs(np.diff(x[:, others] - talk[:, others], 2, axis=0)).mean()  # noqa: E731
    jaw = t.expression_names.index("jawOpen")
    print(f"accuracy: clip MAE {np.abs(smoothed[:, driven] - talk[:, driven]).mean():.3f} (per frame "
          f"{np.nanmean(np.abs(raw[:, driven] - talk[:, driven])):.3f}), jaw {np.abs(smoothed[:, jaw] - talk[:, jaw]).mean():.3f}, "
          f"jitter cut {jitter(raw) / jitter(smoothed):.1f}x (target >= 5x), "
          f"blinks shut on frames {np.flatnonzero(smoothed[:, blinks].min(1) > 0.5).tolist()} (truth 13-14, 30-32)")


if __name__ == "__main__":
    main()
