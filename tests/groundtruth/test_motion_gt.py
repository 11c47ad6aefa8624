# SPDX-License-Identifier: GPL-3.0-or-later
"""Animation from a clip against exact ground truth: an anny body moving for 48 frames, ray-cast
per frame into maps, with independent per-frame noise (keypoints 2 px, depth 5 mm per pixel and
5 mm per frame). Scores MPJPE and acceleration error (jitter) of the 12 limb joints against
lifting every frame alone. ``pytest -s`` prints the figures (docs/performance.md)."""

import numpy as np
import pytest
from motion_clip import make_clip, score

from sapiens_blender.core.motion.clip import AnimateOptions, ClipAnimator
from sapiens_blender.core.motion.smoothing import SmoothingOptions

pytestmark = [pytest.mark.groundtruth, pytest.mark.slow]


@pytest.fixture(scope="module")
def clip(body_model):
    return make_clip(frames=48)


def _animate(clip, options):
    animator = ClipAnimator(clip.fps, options=options)
    for i, maps in enumerate(clip.maps):
        animator.add(i, maps)
    animation = animator.finish()
    assert len(animation.tracks) == 1 and animation.tracks[0].seen.all()
    return animation


def test_smoothing_cuts_jitter_and_keeps_joints_accurate(clip):
    names = None
    results = {}
    for label, options in (("per frame", AnimateOptions(smooth=False, planting=None)),
                           ("lag 2 (default)", AnimateOptions()),
                           ("offline", AnimateOptions(smoothing=SmoothingOptions(lag=None)))):
        animation = _animate(clip, options)
        names = animation.joint_names
        track = animation.tracks[0]
        results[label] = (score(track.joints, names, clip.truth), score(track.posed.joints, names, clip.truth))
    base = results["per frame"][0]["accel_mm"]
    for label, (joints, rig) in results.items():
        print(f"{label:16s} joints: MPJPE {joints['mpjpe_mm']:5.1f} mm, accel {joints['accel_mm']:6.1f} mm/frame^2 "
              f"({base / joints['accel_mm']:5.1f}x lower); rig: MPJPE {rig['mpjpe_mm']:5.1f} mm, "
              f"accel {rig['accel_mm']:6.1f}")
    # Measured: lag 2 joints 17.7 mm, 13.1x; rig 24.0 mm, 11.7x. Offline joints 14.4 mm, 95x;
    # rig 16.7 mm, 72x (docs/performance.md). Goals: >= 10x, <= 20 mm. The limits below are a
    # little above the measures, so that a regression shows (other noise seeds: lag 2 joints
    # 20.1 and 21.0 mm, docs/performance.md).
    offline, rig_offline = results["offline"]
    assert base / offline["accel_mm"] >= 50 and offline["mpjpe_mm"] <= 16
    assert base / rig_offline["accel_mm"] >= 40 and rig_offline["mpjpe_mm"] <= 18.5
    online, rig_online = results["lag 2 (default)"]
    assert base / online["accel_mm"] >= 12 and online["mpjpe_mm"] <= 19
    assert base / rig_online["accel_mm"] >= 10 and rig_online["mpjpe_mm"] <= 25.5
    assert online["mpjpe_mm"] < results["per frame"][0]["mpjpe_mm"] / 2
    assert np.isfinite([v for r in results.values() for s in r for v in s.values()]).all()
