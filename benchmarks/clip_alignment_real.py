# SPDX-License-Identifier: GPL-3.0-or-later
"""How well an animated clip's bodies line up with the people in a real clip.

``api.animate`` on a clip (default backend, a local server started for the run), then per track
and frame: the 12 limb joints of the posed body and of the smoothed joints it was posed on,
projected by the clip's camera, against the backend's own keypoints of that frame (score >= 0.3),
as % of the person's size (the keypoints' box diagonal). No labels are needed: it measures what
the animation loses between the analysis and the baked body. Also prints the tracks kept and the
notes (tracks dropped, people not fitted).

    .venv/bin/python benchmarks/clip_alignment_real.py \\
        /work/realdata/posetrack18/videos/000001_mpiinew_test/000001_mpiinew_test.mp4 [--offline]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_real import LIMB_JOINTS, project  # noqa: E402  (the real-photo benchmark's 12 joints)

MIN_SCORE = 0.3


def track_errors(track, k: np.ndarray, joint_names) -> list[tuple[int, float, float]]:
    """(frame, body %, smoothed joints %) for each frame the track has keypoints in."""
    from inference_server.processing.goliath import KEYPOINT_NAMES
    from sapiens_blender.core.motion.rig import MOTION_JOINTS

    rows = []
    for t, kp in enumerate(track.keypoints):
        seen = kp[:, 2] >= MIN_SCORE
        if seen.sum() < 4:
            continue  # not seen in this frame (a gap the track held)
        size = float(np.hypot(*np.ptp(kp[seen, :2], 0)))
        names = [n for n in LIMB_JOINTS if kp[KEYPOINT_NAMES.index(n), 2] >= MIN_SCORE]
        if not names:
            continue
        xy = kp[[KEYPOINT_NAMES.index(n) for n in names], :2]
        body = project(track.body.joints[t, [joint_names.index(n) for n in names]], k)
        smoothed = project(track.joints[t, [MOTION_JOINTS.index(n) for n in names]], k)
        rows.append((int(track.frames[t]), 100 * float(np.linalg.norm(body - xy, axis=1).mean()) / size,
                     100 * float(np.linalg.norm(smoothed - xy, axis=1).mean()) / size))
    return rows


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("clip")
    ap.add_argument("--offline", action="store_true", help="smooth with the whole clip")
    args = ap.parse_args(argv)
    from sapiens_blender import api

    t0 = time.perf_counter()
    animation = api.animate(args.clip, outputs=None, background=False, offline=args.offline).animation
    seconds = time.perf_counter() - t0
    k = np.asarray(animation.intrinsics, np.float64)
    print(f"{args.clip}: {len(animation.tracks)} track(s) in {seconds:.1f} s")
    body_all, smooth_all = [], []
    for track in animation.tracks:
        if track.body is None or track.keypoints is None:
            print(f"  track {track.id}: no fitted body")
            continue
        rows = track_errors(track, k, list(track.body.template.joint_names))
        body_all += [r[1] for r in rows]
        smooth_all += [r[2] for r in rows]
        print(f"  track {track.id}: frames {[r[0] for r in rows]}  body {[round(r[1], 1) for r in rows]} %"
              f"  smoothed joints {[round(r[2], 1) for r in rows]} %")
    for note in animation.notes:
        print(f"  note: {note}")
    if body_all:
        print(f"mean over {len(body_all)} person-frames: body {np.mean(body_all):.1f} %, "
              f"the smoothed joints it follows {np.mean(smooth_all):.1f} % of the person's size from the keypoints")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
