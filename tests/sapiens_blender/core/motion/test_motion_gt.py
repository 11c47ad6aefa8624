# SPDX-License-Identifier: GPL-3.0-or-later
"""Animation from a clip against exact ground truth: an anny body moving for 48 frames, ray-cast
per frame into maps, with independent per-frame noise (keypoints 2 px, depth 5 mm per pixel and
5 mm per frame). Scores MPJPE and acceleration error (jitter) of the 12 limb joints against
lifting every frame alone. ``pytest -s`` prints the figures (docs/performance.md)."""

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

from motion_clip import make_clip, score

from sapiens_blender.core.motion.clip import AnimateOptions, ClipAnimator
from sapiens_blender.core.motion.smoothing import SmoothingOptions

pytestmark = [pytest.mark.groundtruth, pytest.mark.slow, pytest.mark.anny]


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
    # Measured: lag 2 joints 17.7 mm, 13.1x; rig 21.9 mm, 11.8x. Offline joints 14.4 mm, 95x;
    # rig 16.7 mm, 72x (docs/performance.md). Goals: >= 10x, <= 20 mm. The limits below are a
    # little above the measures, so that a regression shows (other noise seeds: lag 2 joints
    # 20.1 and 21.0 mm, docs/performance.md).
    offline, rig_offline = results["offline"]
    assert base / offline["accel_mm"] >= 50 and offline["mpjpe_mm"] <= 16
    assert base / rig_offline["accel_mm"] >= 40 and rig_offline["mpjpe_mm"] <= 18.5
    online, rig_online = results["lag 2 (default)"]
    assert base / online["accel_mm"] >= 12 and online["mpjpe_mm"] <= 19
    assert base / rig_online["accel_mm"] >= 10 and rig_online["mpjpe_mm"] <= 23.5
    assert online["mpjpe_mm"] < results["per frame"][0]["mpjpe_mm"] / 2
    assert np.isfinite([v for r in results.values() for s in r for v in s.values()]).all()


def test_the_fitted_body_follows_the_clip(clip, fit_server):
    """The body fitted once and posed per frame by the real server: its own joints (anny's, the
    truth's kind) against the truth, at the default look-ahead and with the whole clip."""
    from sapiens_blender.core.remote.client import V2Client
    from sapiens_blender.core.motion.body_drive import drive_bodies, server_body_driver

    base = score(_animate(clip, AnimateOptions(smooth=False, planting=None)).tracks[0].joints,
                 _animate(clip, AnimateOptions()).joint_names, clip.truth)["accel_mm"]
    with V2Client(f"http://{fit_server.url}", fit_server.token) as client:
        # Measured: lag 2 16.5 mm, 20.9x; offline 13.2 mm, 87x (docs/body.md). Goals <= 20 mm, >= 10x.
        for label, options, limits in (("lag 2 (default)", AnimateOptions(), (17.5, 18.0)),
                                       ("offline", AnimateOptions(smoothing=SmoothingOptions(lag=None)), (14.0, 70.0))):
            animation = _animate(clip, options)
            notes = drive_bodies(animation, *server_body_driver(client), whole_clip=options.smoothing.lag is None)
            assert animation.source == "fitted body", notes
            body = animation.tracks[0].body
            s = score(body.joints, body.template.joint_names, clip.truth)
            print(f"fitted body, {label:16s}: MPJPE {s['mpjpe_mm']:5.1f} mm, accel {s['accel_mm']:6.2f} mm/frame^2 "
                  f"({base / s['accel_mm']:5.1f}x lower); {body.report}")
            assert s["mpjpe_mm"] <= limits[0] and base / s["accel_mm"] >= limits[1], s
