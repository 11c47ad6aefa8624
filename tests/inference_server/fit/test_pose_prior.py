# SPDX-License-Identifier: GPL-3.0-or-later
"""The pose prior learned from real motion (inference_server/fit/pose_prior.py): the shipped
mixtures load, common poses of anny cost little and impossible ones much, gradients reach the
pose, and the features do not depend on the frame or the side."""

import numpy as np
import pytest
import torch

from inference_server.fit import pose_prior
from inference_server.fit.solver import BodyFitter

pytestmark = [pytest.mark.torch, pytest.mark.anny]


def test_shipped_parameters_load_and_are_finite():
    f = pose_prior.read_parameters()
    for name in ("means", "prec_chol", "log_norm", "best"):
        assert f[name].dtype == np.float32 and np.all(np.isfinite(f[name])), name
    assert f["means"].shape[0] == 2 and f["means"].shape[2] == 6  # arm, leg; 6 features
    assert int(f["frames"]) > 10000  # learned from real motion, not a handful of poses
    prior = pose_prior.load()
    assert prior.means.shape[0] == len(pose_prior.LIMBS)


def test_features_ignore_the_frame_and_mirror_the_sides():
    rng = np.random.default_rng(0)
    joints = torch.as_tensor(rng.normal(size=(5, 12, 3)))
    q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
    q *= np.sign(np.linalg.det(q))  # a rotation
    moved = joints @ torch.as_tensor(q.T) * 2.5 + torch.tensor([1.0, -2.0, 3.0], dtype=torch.float64)
    feats = pose_prior.limb_features(joints)
    torch.testing.assert_close(pose_prior.limb_features(moved), feats)
    # the mirror image's right limbs are the left ones
    mirrored = pose_prior.limb_features(pose_prior._mirrored(joints))
    torch.testing.assert_close(mirrored[:, [1, 0, 3, 2]], feats)


def _posed(body, fitter, turns: dict) -> torch.Tensor:
    """The fit's joints [1,J,3] of the average body in anny's neutral posture, ``turns``
    {bone: rotation vector (rad)} added."""
    rot = fitter.neutral.clone()[None]
    for bone, v in turns.items():
        rot[0, body.bone_index[bone]] += torch.tensor(v, dtype=rot.dtype)
    return body.skeleton(torch.full((1, 6), 0.5), rot).joints


@pytest.fixture(scope="module")
def fitter(body):
    return BodyFitter(body)


# About X a hinge bends (positive: flexed); a thigh's negative X raises it forwards.
PLAUSIBLE = {
    "neutral": {},
    "walking stride": {"upperleg01.L": [-0.5, 0, 0], "lowerleg01.L": [0.4, 0, 0], "upperleg01.R": [0.3, 0, 0]},
    "sitting": {"upperleg01.L": [-1.57, 0, 0], "lowerleg01.L": [1.57, 0, 0]},
    "knee bent": {"lowerleg01.L": [1.57, 0, 0]},
    "elbow bent": {"lowerarm01.L": [1.2, 0, 0]},
}
IMPOSSIBLE = {
    "knee bent backwards 90": ({"lowerleg01.L": [-1.57, 0, 0]}, "left_leg"),
    "thigh kicked up 110, knee straight": ({"upperleg01.L": [-1.92, 0, 0]}, "left_leg"),
    "elbow hyperextended 60": ({"lowerarm01.L": [-1.7, 0, 0]}, "left_arm"),
}


def test_plausible_poses_cost_little_impossible_ones_much(body, fitter):
    prior = pose_prior.load()
    common = {name: prior.energy(_posed(body, fitter, t))[0] for name, t in PLAUSIBLE.items()}
    worst_common = max(float(e.max()) for e in common.values())
    assert worst_common < 16.0, common  # within the mocap's own 99th percentile (about 12-18)
    for name, (turns, limb) in IMPOSSIBLE.items():
        e = prior.energy(_posed(body, fitter, turns))[0]
        row = pose_prior.LIMBS.index(limb)
        assert e[row] > worst_common + 10.0, (name, e, worst_common)


def test_gradient_reaches_the_pose(body, fitter):
    prior = pose_prior.load()
    rot = fitter.neutral.clone()[None]
    rot[0, body.bone_index["lowerleg01.L"], 0] -= 1.0  # bent backwards
    rot.requires_grad_(True)
    energy = prior.energy(body.skeleton(torch.full((1, 6), 0.5), rot).joints).sum()
    energy.backward()
    g = rot.grad[0, body.bone_index["lowerleg01.L"]]
    assert torch.isfinite(rot.grad).all() and g[0] < 0  # bending it forwards lowers the energy


def test_the_prior_weighs_unseen_and_doubtful_limbs():
    from inference_server.fit.bones import BODY_BONES
    from inference_server.fit.correspondences import JOINT_NAMES

    bone_prior = torch.full((1, len(BODY_BONES)), 0.03)
    bone_prior[0, BODY_BONES.index("upperleg01.L")] = bone_prior[0, BODY_BONES.index("lowerleg01.L")] = 30.0
    scores = torch.ones((1, len(JOINT_NAMES)))
    scores[0, JOINT_NAMES.index("right_wrist")] = 0.2  # a doubtful forearm
    w = pose_prior.limb_weights(bone_prior, scores, torch.tensor([1.0]), 3.0)[0]
    assert w[pose_prior.LIMBS.index("left_leg")] == pytest.approx(3.0)  # nothing shows it
    assert w[pose_prior.LIMBS.index("right_arm")] == pytest.approx(0.4)  # 1 - mean(1, 0.2)
    assert w[pose_prior.LIMBS.index("right_leg")] == 0 and w[pose_prior.LIMBS.index("left_arm")] == 0  # sure
