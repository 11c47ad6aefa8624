# SPDX-License-Identifier: GPL-3.0-or-later
"""A clip's expressions on ground truth: a 40-frame talking face (tests/support/face_cases.py:
the jaw on syllables, a smile building up, the brows, two blinks held 2 and 3 frames) with 1 %
landmark noise per frame. Per-frame fits then the body's look-ahead smoothing: the driven keys
within 0.1, the talking jaw followed, both blinks seen shut, the jitter >= 5x below the per-frame
fits'."""

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

import face_cases  # noqa: E402
from sapiens_blender.core.body.expression_fit import DRIVEN  # noqa: E402
from sapiens_blender.core.motion import face  # noqa: E402

pytestmark = [pytest.mark.anny]


def _jitter(values, truth, keys):
    """Mean |second difference| of the error: the frame-to-frame noise, the motion taken out."""
    return float(np.abs(np.diff(values[:, keys] - truth[:, keys], 2, axis=0)).mean())


@pytest.mark.parametrize("lag", [2, None])
def test_talking_face_is_followed_blinks_kept_and_jitter_cut(body_scene, lag):
    scene = body_scene("standing")
    t = scene.template
    track, truth = face_cases.talking_track(scene, lag=lag)
    smoothed = face.track_expressions(track, face_cases.INTRINSICS, lag)
    raw = face.frame_expressions(t, scene.fit, 0, track.body.bone_matrices, track.keypoints, face_cases.INTRINSICS)
    driven = [t.expression_names.index(n) for n in DRIVEN]
    blinks = [t.expression_names.index(n) for n in face.BLINKS]
    assert np.abs(smoothed[:, driven] - truth[:, driven]).mean() <= 0.1
    jaw = t.expression_names.index("jawOpen")
    assert np.abs(smoothed[:, jaw] - truth[:, jaw]).mean() <= 0.08, "the syllables are not smoothed away"
    for start, stop in ((13, 15), (30, 33)):  # both blinks, the 2-frame one too, shut on every frame
        assert (smoothed[start:stop, blinks] > 0.5).all() and (smoothed[start - 3:start - 1, blinks] < 0.3).all()
    others = [k for k in driven if k not in blinks]
    assert _jitter(raw, truth, others) >= 5 * _jitter(smoothed, truth, others)
    assert smoothed.min() >= 0.0 and smoothed.max() <= 1.0


def test_unseen_frames_are_held_and_a_faceless_track_keeps_its_photo(body_scene):
    scene = body_scene("standing")
    track, truth = face_cases.talking_track(scene)
    track.keypoints[18:21, :, 2] = 0.0  # the face turned away for 3 frames
    smoothed = face.track_expressions(track, face_cases.INTRINSICS)
    assert np.isfinite(smoothed).all()
    track.keypoints[..., 2] = 0.0
    assert face.track_expressions(track, face_cases.INTRINSICS) is None
