# SPDX-License-Identifier: GPL-3.0-or-later
"""Motion accuracy over several noise seeds: the two proofs of issue #10, each re-drawn.

The tests check one draw of each clip (seed 0); this runs the same clips with other seeds, to
show how much the figures move with the noise:

- real clip (tests/support/astronaut_clip.py): the bundled astronaut panned along a known path,
  JPEG frames with brightness flicker (the seed draws the flicker), analysed once through a
  local server with the offline ``mediapipe`` backend; mean distance (px) of the projected joints
  from the known motion. Goal <= 3 px.
- ground truth (tests/support/motion_clip.py): an anny body moving for 48 frames with
  per-frame keypoint and depth noise (the seed draws the noise); MPJPE (mm) of the 12 limb
  joints and the acceleration error against lifting each frame alone. Goals <= 20 mm, >= 10x.

Each clip is animated three ways: every frame as lifted, the default (2 frames of look-ahead)
and offline (the whole clip). ``--causal``: the still-joint step's per-track statistics (joint
weights, noise levels) taken, for each frame, from the frames up to t + lag only, as a live
stream would (brute force: the step re-run on every prefix; slow, for checking only).

    .venv/bin/python benchmarks/bench_motion_accuracy.py [--seeds 0 1 2] [--skip-real] [--skip-gt] [--causal]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))

MODES = ("per frame", "lag 2", "offline")


def animate(maps: list, fps: float, mode: str):
    from sapiens_blender.core.motion.clip import AnimateOptions, ClipAnimator
    from sapiens_blender.core.motion.smoothing import SmoothingOptions

    options = {"per frame": AnimateOptions(smooth=False, planting=None), "lag 2": AnimateOptions(),
               "offline": AnimateOptions(smoothing=SmoothingOptions(lag=None))}[mode]
    animator = ClipAnimator(fps, options=options)
    for i, m in enumerate(maps):
        animator.add(i, m)
    return animator.finish()


def use_causal_statistics() -> None:
    """Swap the still-joint step for one that sees, at frame t, only the frames up to t + lag."""
    from sapiens_blender.core.motion import clip, stillness

    whole = stillness.tie_still_joints

    def causal(raw, smoothed, smoothing, options=stillness.StillnessOptions(), estimated=None, confidence=None):
        if smoothing.lag is None:
            return whole(raw, smoothed, smoothing, options, estimated, confidence)
        out = smoothed.copy()
        for t in range(len(raw)):
            hi = min(len(raw), t + smoothing.lag + 1)
            out[t] = whole(raw[:hi], smoothed[:hi], smoothing, options,
                           None if estimated is None else estimated[:hi],
                           None if confidence is None else confidence[:hi])[t]
        return out

    clip.tie_still_joints = causal


def real_clip(seeds: list[int]) -> dict:
    from astronaut_clip import follow_error_px, write_clip

    from sapiens_blender.core.motion.sources import ImageFolder
    from sapiens_blender.core.motion.stream import server_analyzer
    from sapiens_blender.core.local_server.process import ServerProcess

    out = {}
    with tempfile.TemporaryDirectory() as tmp, ServerProcess() as server:
        analyze = server_analyzer(server.ensure_running(), "mediapipe")
        for seed in seeds:
            folder = Path(tmp) / f"seed{seed}"
            shifts = write_clip(folder, frames=40, seed=seed)
            maps = [analyze(frame) for frame in ImageFolder(folder)]
            out[seed] = {mode: follow_error_px(animate(maps, 25.0, mode), shifts)[0] for mode in MODES}
    return out


def ground_truth(seeds: list[int]) -> dict:
    import scenes
    from motion_clip import make_clip, score

    scenes.load_body_model()
    out = {}
    for seed in seeds:
        clip = make_clip(frames=48, seed=seed)
        out[seed] = {}
        for mode in MODES:
            animation = animate(clip.maps, clip.fps, mode)
            track = animation.tracks[0]
            out[seed][mode] = (score(track.joints, animation.joint_names, clip.truth),
                               score(track.posed.joints, animation.joint_names, clip.truth))
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--skip-real", action="store_true", help="no server run (the real clip)")
    ap.add_argument("--skip-gt", action="store_true", help="no anny run (the ground truth)")
    ap.add_argument("--causal", action="store_true", help="still-joint statistics from the frames so far")
    args = ap.parse_args(argv)
    if args.causal:
        use_causal_statistics()
    if not args.skip_real:
        real = real_clip(args.seeds)
        print("Real clip: mean distance from the known motion (px), goal <= 3")
        print("| seed | per frame | default (lag 2) | offline |\n|---|---|---|---|")
        for seed, r in real.items():
            print(f"| {seed} | {r['per frame']:.2f} | {r['lag 2']:.2f} | {r['offline']:.2f} |")
        print("| mean | " + " | ".join(f"{np.mean([r[m] for r in real.values()]):.2f}" for m in MODES) + " |")
    if not args.skip_gt:
        gt = ground_truth(args.seeds)
        print("\nGround truth: joints MPJPE (mm) / acceleration error vs per frame (x lower); rig MPJPE (mm)")
        print("| seed | per frame | default (lag 2) | offline |\n|---|---|---|---|")
        for seed, r in gt.items():
            base = r["per frame"][0]["accel_mm"]
            cells = [f"{j['mpjpe_mm']:.1f} / {base / j['accel_mm']:.1f}x; rig {rig['mpjpe_mm']:.1f}"
                     for j, rig in (r[m] for m in MODES)]
            print(f"| {seed} | " + " | ".join(cells) + " |")
        cells = []
        for m in MODES:
            joints = np.mean([r[m][0]["mpjpe_mm"] for r in gt.values()])
            ratio = np.mean([r["per frame"][0]["accel_mm"] / r[m][0]["accel_mm"] for r in gt.values()])
            cells.append(f"{joints:.1f} / {ratio:.1f}x; rig {np.mean([r[m][1]['mpjpe_mm'] for r in gt.values()]):.1f}")
        print("| mean | " + " | ".join(cells) + " |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
