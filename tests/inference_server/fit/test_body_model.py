# SPDX-License-Identifier: GPL-3.0-or-later
"""The body model's arrays keep the promises of docs/body_format.md."""

import numpy as np
import pytest
import torch

from inference_server.fit.correspondences import JOINT_NAMES
from inference_server.processing.goliath import KEYPOINT_NAMES

pytestmark = [pytest.mark.torch, pytest.mark.anny]


def _random_people(body, n=2, seed=0):
    g = torch.Generator().manual_seed(seed)
    rot = 0.25 * torch.randn((n, len(body.bone_names), 3), generator=g)
    phen = torch.rand((n, 6), generator=g)
    return rot, phen


def test_zero_rotations_are_the_rest_pose(body):
    _, phen = _random_people(body)
    out = body.full(phen, torch.zeros((2, len(body.bone_names), 3)))
    assert torch.allclose(out["vertices"], out["rest_vertices"], atol=1e-5)
    assert torch.allclose(out["bone_poses"], out["rest_bone_poses"], atol=1e-5)


def test_skeleton_pass_gives_the_full_pass_joints(body):
    rot, phen = _random_people(body)
    assert torch.allclose(body.skeleton(phen, rot).joints, body.full(phen, rot)["joints"], atol=1e-5)


def test_pruned_regressor_moves_the_joints_under_half_a_millimetre(body):
    """The fit regresses joints from the vertices holding 99.9 % of each regressor row (a
    quarter of the vertices to skin): against anny's own regressor on the same posed bodies."""
    import anny

    from inference_server.fit.correspondences import JOINT_SOURCES

    rot, phen = _random_people(body)
    out = body.full(phen, rot)
    reg = anny.KeypointsRegressor.coco(body.anny)
    rows = [list(reg.labels).index(name) for kind, name in JOINT_SOURCES if kind == "regressor"]
    joints = [j for j, (kind, _n) in enumerate(JOINT_SOURCES) if kind == "regressor"]
    exact = torch.einsum("jv,pvd->pjd", reg.regression_weights[rows], out["vertices"])
    moved = (out["joints"][:, joints] - exact).norm(dim=-1)
    print(f"pruned regressor: joints moved {1000 * float(moved.max()):.3f} mm at most")
    assert float(moved.max()) < 5e-4, float(moved.max())
    assert len(body._reg_vertices) < 0.3 * len(body.anny.template_vertices)


def test_phenotype_basis_gives_annys_coefficients_and_gradients(body):
    """The fit's phenotype -> blendshape map (a dozen operations) against anny's own (~250): on
    anchors (the fit starts on one, 0.5), at the ends, inside and outside the range."""
    import copy

    from inference_server.fit.phenotype_basis import PhenotypeBasis

    m = body.anny
    assert body._phenotype_basis is not None  # the fast map is the one in use
    g = torch.Generator().manual_seed(5)
    phen = torch.rand((40, 6), generator=g)
    phen[:4] = torch.tensor([[0.0] * 6, [1.0] * 6, [0.5] * 6, [1 / 3, 2 / 3, 0.25, 0.75, 0.5, 0.0]])
    phen[4:8] += torch.randn((4, 6), generator=g)  # past the ends: clamped, as anny does
    ours, theirs = phen.clone().requires_grad_(), phen.clone().requires_grad_()
    empty = torch.zeros((len(phen), 0))
    expected = m._get_phenotype_blendshape_coefficients(theirs, empty, empty)
    got = body.shape_coefficients(ours)
    assert torch.allclose(got, expected, rtol=1e-5, atol=1e-6), float((got - expected).abs().max())
    weights = torch.randn(expected.shape, generator=g)
    (expected * weights).sum().backward()
    (got * weights).sum().backward()
    assert theirs.grad.abs().sum() > 0
    assert torch.allclose(ours.grad, theirs.grad, rtol=1e-4, atol=1e-5), float((ours.grad - theirs.grad).abs().max())
    # An anny that does something else (here: extrapolating past the anchors) keeps its own map.
    other = copy.copy(m)
    other.extrapolate_phenotypes = True
    assert PhenotypeBasis.of(other) is None


def test_forward_kinematics_is_annys(body):
    """The fit's chain (one matmul per depth level, rest factors kept with the rest body) gives
    anny's 'local-bone' forward kinematics, values and gradients, root at rest."""
    from anny.utils import kinematics

    from inference_server.fit.body_model import rotvec_to_matrix

    m = body.anny
    rot, phen = _random_people(body, n=3, seed=7)
    rot, phen = rot.requires_grad_(), phen.requires_grad_()
    rest = body.rest_state(phen)
    transforms, poses = body.pose_bones(rest, rot)
    delta = torch.zeros(rot.shape[:2] + (4, 4))
    delta[..., :3, :3] = rotvec_to_matrix(rot)
    delta[..., 3, 3] = 1.0
    delta = torch.cat([rest.poses[:, :1], delta[:, 1:]], 1)
    theirs = kinematics.forward_kinematic((m.kinematic_chain_levels, m.kinematic_chain_indices), rest.poses,
                                          delta, "local-bone", None)
    assert torch.allclose(transforms, theirs[0], atol=1e-5)
    assert torch.allclose(poses, theirs[1], atol=1e-5)
    assert torch.allclose(poses[:, 0], rest.poses[:, 0])  # the root at rest whatever its rotation
    weights = torch.randn(poses.shape, generator=torch.Generator().manual_seed(1))
    ours = torch.autograd.grad(((transforms + poses) * weights).sum(), (rot, phen), retain_graph=True)
    expected = torch.autograd.grad(((theirs[0] + theirs[1]) * weights).sum(), (rot, phen))
    for a, b in zip(ours, expected):
        assert torch.allclose(a, b, rtol=1e-4, atol=1e-4 * float(b.abs().max())), float((a - b).abs().max())


def test_surface_sample_pass_gives_the_full_pass_vertices(body):
    rot, phen = _random_people(body)
    sample = body.vertex_sample(torch.arange(0, len(body.anny.template_vertices), 7))
    joints, verts = body.sampled(body.rest_state(phen, sample=sample), rot, sample)
    out = body.full(phen, rot)
    assert torch.allclose(verts, out["vertices"][:, sample.index], atol=1e-5)
    assert torch.allclose(joints, out["joints"], atol=1e-5)
    # a rest body made whole carries the sample's set too
    joints, verts = body.sampled(body.rest_state(phen, True, sample=sample), rot, sample)
    assert torch.allclose(verts, out["vertices"][:, sample.index], atol=1e-5)


def test_linear_blend_skinning_with_the_template_reproduces_the_vertices(body):
    """What a Blender armature computes from rest/pose matrices and the weights = the fit's vertices."""
    rot, phen = _random_people(body, n=1, seed=3)
    placement = np.eye(4, dtype=np.float32)
    placement[:3, 3] = (0.1, -0.2, 3.0)
    out = body.evaluate(rot, phen, placement[None])
    t = body.template()
    rel = out["bone_matrices"][0] @ np.linalg.inv(out["rest_bone_matrices"][0])  # [B,4,4]
    rest = np.c_[out["rest_vertices"][0], np.ones(len(t["weight_bones"]))]
    per = np.einsum("vkij,vj->vki", rel[t["weight_bones"]], rest)[..., :3]
    skinned = (t["weight_values"][..., None] * per).sum(1) + placement[:3, 3]
    assert np.abs(skinned - out["vertices"][0]).max() < 1e-4


def test_rest_bones_follow_blenders_convention(body):
    _, phen = _random_people(body)
    out = body.evaluate(torch.zeros((2, len(body.bone_names), 3)), phen, np.tile(np.eye(4), (2, 1, 1)))
    m, tails = out["rest_bone_matrices"], out["rest_bone_tails"]
    axis = tails - m[..., :3, 3]
    length = np.linalg.norm(axis, axis=-1)
    assert length.min() >= 0.0099
    cos = (axis / length[..., None] * m[..., :3, 1]).sum(-1)
    assert cos.min() > 0.9999  # Y from head to tail
    r = m[..., :3, :3]
    assert np.abs(np.einsum("...ji,...jk->...ik", r, r) - np.eye(3)).max() < 1e-4


def test_template_is_a_watertight_skinned_labelled_body(body):
    t = body.template()
    faces = t["faces"]
    edges = np.sort(np.concatenate([faces[:, [0, 1]], faces[:, [1, 2]], faces[:, [2, 0]]]), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    assert (counts == 2).all()  # every edge shared by exactly two triangles
    assert np.allclose(t["weight_values"].sum(1), 1.0, atol=1e-5)
    assert len(t["bone_names"]) >= 60 and t["bone_parents"][0] == -1
    assert (t["bone_parents"][1:] < np.arange(1, len(t["bone_parents"]))).all()  # parents first
    assert set(JOINT_NAMES) <= set(KEYPOINT_NAMES) and len(JOINT_NAMES) == 63
    names = list(t["part_names"])
    rest = body.evaluate(torch.zeros((1, len(body.bone_names), 3)), torch.full((1, 6), 0.5),
                         np.eye(4)[None])["rest_vertices"][0]
    left = rest[t["vertex_parts"] == names.index("Left_Hand")]
    right = rest[t["vertex_parts"] == names.index("Right_Hand")]
    assert left[:, 0].mean() > 0.3 and right[:, 0].mean() < -0.3  # the person's left is +X
    head = rest[t["vertex_parts"] == names.index("Face_Neck")]
    assert head[:, 2].mean() > rest[:, 2].mean() + 0.5
