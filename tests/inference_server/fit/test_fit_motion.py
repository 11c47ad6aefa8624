# SPDX-License-Identifier: GPL-3.0-or-later
"""The body driven through a clip (inference_server/fit/motion.py) against exact answers: a
body moved by known rotations, its own joints and bone-carried points as the targets."""

import numpy as np
import pytest
import torch

from inference_server.dataplane.base import BackendError
from inference_server.fit.correspondences import JOINT_NAMES
from inference_server.fit.motion import MotionSettings, drive_body, rotvecs_from_bone_matrices
from inference_server.fit.serving import BodyMotionBackend

pytestmark = [pytest.mark.torch, pytest.mark.anny]

PHENOTYPES = np.array([0.5, 0.5, 0.45, 0.55, 0.6, 0.5])
LIMBS = ("left_shoulder", "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist",
         "left_hip", "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle")


def _moving(body, frames: int = 12):
    """Rotations [T,B,3] of a smooth motion (an arm swinging, a knee bending, the body turning
    and walking sideways), placements [T,4,4], and the true camera-frame joints [T,J,3]."""
    idx = body.bone_index
    rot = np.zeros((frames, len(body.bone_names), 3))
    placement = np.tile(np.eye(4), (frames, 1, 1))
    for t in range(frames):
        s = t / (frames - 1)
        rot[t, idx["upperarm01.L"]] = [0.0, 0.0, -0.3 - 0.6 * s]
        rot[t, idx["lowerarm01.L"]] = [0.5 * s, 0.0, 0.0]
        rot[t, idx["upperleg01.R"]] = [-0.4 * s, 0.0, 0.0]
        rot[t, idx["lowerleg01.R"]] = [0.7 * s, 0.0, 0.0]
        rot[t, idx["spine03"]] = [0.1 * s, 0.0, 0.05]
        yaw = 0.4 * s
        c, si = np.cos(yaw), np.sin(yaw)
        # model (Z up, facing -Y) -> camera (y down, z forward), turning about the vertical
        to_cam = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])
        placement[t, :3, :3] = to_cam @ np.array([[c, -si, 0], [si, c, 0], [0, 0, 1.0]])
        placement[t, :3, 3] = [-0.2 + 0.3 * s, 0.1, 3.0]
    with torch.no_grad():
        out = body.evaluate(rot, np.tile(PHENOTYPES, (frames, 1)), placement)
    return rot, placement, out


def test_rotations_round_trip_through_bone_matrices(body):
    rot, placement, out = _moving(body, 3)
    back = rotvecs_from_bone_matrices(body, PHENOTYPES, out["bone_matrices"][2])
    assert np.abs(back - rot[2]).max() < 2e-3


def test_a_known_motion_is_followed_from_its_joints_and_markers(body):
    frames = 12
    rot, placement, out = _moving(body, frames)
    names = list(LIMBS)
    targets = out["joints"][:, [JOINT_NAMES.index(n) for n in names]].astype(np.float64)
    # Two markers, points carried by the head and the left hand: not joints the body knows.
    head = out["bone_matrices"][:, body.bone_index["head"]].astype(np.float64)
    hand = out["bone_matrices"][:, body.bone_index["wrist.L"]].astype(np.float64)
    marker_model = np.stack([head[:, :3, :3] @ [0.0, 0.2, 0.03] + head[:, :3, 3],
                             hand[:, :3, :3] @ [0.0, 0.09, 0.0] + hand[:, :3, 3]], 1)
    markers = np.einsum("tij,tkj->tki", placement[:, :3, :3], marker_model) + placement[:, None, :3, 3]
    targets = np.concatenate([targets, markers], 1)
    names += ["head_top", "left_hand_end"]
    weights = np.ones(targets.shape[:2])
    weights[5, 4] = 0.0  # a wrist unseen on one frame
    targets[5, 4] = np.nan
    ref = 4  # the fitted frame, in the middle: frames are solved outwards both ways
    res = drive_body(body, PHENOTYPES, rot[ref], placement[ref], targets, names, weights, ref,
                     MotionSettings(smoothing="none"))
    err = np.linalg.norm(res.joints[:, [JOINT_NAMES.index(n) for n in LIMBS]] - targets[:, :12], axis=-1)
    err[5, 4] = 0.0
    assert err.max() < 0.015, err.max()  # the body reaches its own joints
    assert np.median(err) < 0.003
    assert res.residual_m.max() < 0.012
    # The motion itself came back: the swinging arm's bone directions, the placement.
    ua = body.bone_index["upperarm01.L"]
    got_y = res.bone_matrices[:, ua, :3, 1]
    true_y = out["bone_matrices"][:, ua, :3, 1]
    angle = np.degrees(np.arccos(np.clip(np.sum(got_y * true_y, -1), -1, 1)))
    assert angle.max() < 4.0, angle
    assert np.abs(res.placement[:, :3, 3] - placement[:, :3, 3]).max() < 0.02
    assert np.allclose(res.bone_matrices[ref], out["bone_matrices"][ref], atol=1e-4)  # the fitted frame kept
    assert res.rotvecs.shape == rot.shape and np.isfinite(res.rotvecs).all()
    # Smoothed (the default, causal; or centred for a whole clip), a smooth motion stays put.
    for smoothing, limit in (("causal", 0.02), ("centred", 0.012)):
        smooth = drive_body(body, PHENOTYPES, rot[ref], placement[ref], targets, names, weights, ref,
                            MotionSettings(smoothing=smoothing))
        err = np.linalg.norm(smooth.joints[:, [JOINT_NAMES.index(n) for n in LIMBS]] - targets[:, :12], axis=-1)
        err[5, 4] = 0.0
        assert err.mean() < limit / 3 and err.max() < limit, (smoothing, err.max())


def test_causal_smoothing_reads_no_later_frame(body):
    """Frame t of the default (causal) smoothing is the same whether later frames exist or not."""
    rot, placement, out = _moving(body, 8)
    targets = out["joints"][:, [JOINT_NAMES.index(n) for n in LIMBS]].astype(np.float64)
    targets[:, :, :2] += np.random.default_rng(1).normal(0.0, 0.004, targets[:, :, :2].shape)
    full = drive_body(body, PHENOTYPES, rot[0], placement[0], targets, LIMBS, np.ones(targets.shape[:2]), 0)
    part = drive_body(body, PHENOTYPES, rot[0], placement[0], targets[:5], LIMBS, np.ones((5, 12)), 0)
    np.testing.assert_allclose(part.joints, full.joints[:5], atol=1e-6)


def test_same_track_same_answer(body):
    rot, placement, out = _moving(body, 4)
    targets = out["joints"][:, [JOINT_NAMES.index(n) for n in LIMBS]]
    a = drive_body(body, PHENOTYPES, rot[0], placement[0], targets, LIMBS, np.ones(targets.shape[:2]), 0)
    b = drive_body(body, PHENOTYPES, rot[0], placement[0], targets, LIMBS, np.ones(targets.shape[:2]), 0)
    assert np.array_equal(a.bone_matrices, b.bone_matrices)


def test_bad_tracks_get_clear_errors(body):
    backend = BodyMotionBackend()
    backend.load()
    rot, placement, out = _moving(body, 2)
    good = {"phenotypes": PHENOTYPES.astype(np.float32), "reference_bone_matrices": out["bone_matrices"][0],
            "reference_placement": placement[0].astype(np.float32), "reference_frame": np.array([0], np.int32),
            "targets": out["joints"][:, :12], "target_names": np.array([n.encode() for n in JOINT_NAMES[:12]], object),
            "weights": np.ones((2, 12), np.float32)}
    result = backend.infer_tensors(good, {})
    assert result["bone_matrices"].shape == (2, len(body.bone_names), 4, 4)
    for change, words in (({"targets": out["joints"][:, :11]}, "targets must be [T,12,3]"),
                          ({"smoothing": np.array([b"gaussian"], object)}, "smoothing must be"),
                          ({"weights": np.ones((3, 12), np.float32)}, "weights must be [2, 12]"),
                          ({"reference_frame": np.array([7], np.int32)}, "outside the track's 2 frames"),
                          ({"reference_bone_matrices": out["bone_matrices"][0, :5]}, "reference_bone_matrices must be")):
        with pytest.raises(BackendError, match=words.replace("[", r"\[").replace("]", r"\]")):
            backend.infer_tensors({**good, **change}, {})
    missing = dict(good)
    del missing["targets"]
    with pytest.raises(BackendError, match="body_motion needs"):
        backend.infer_tensors(missing, {})
