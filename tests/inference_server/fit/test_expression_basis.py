# SPDX-License-Identifier: GPL-3.0-or-later
"""The template's expression basis is anny's 52 facial actions: ARKit's names, the face's
vertices, and (on anny's own forward) offsets that neither depend on the shape nor move a bone."""

import numpy as np
import pytest
import torch

from inference_server.fit import expressions
from inference_server.fit.body_model import rotvec_to_matrix

pytestmark = [pytest.mark.torch, pytest.mark.anny]


def test_template_sends_the_basis_compactly(body):
    t = body.template()
    assert body.version.endswith("/3")  # 2: the expressions; 3: the calibrated face landmarks
    names = [str(n) for n in t["expression_names"]]
    assert len(names) == 52 and names[24] == "jawOpen" and names[-1] == "tongueOut"
    idx, deltas = t["expression_vertices"], t["expression_deltas"]
    assert idx.dtype == np.int32 and np.all(np.diff(idx) > 0) and deltas.shape == (52, len(idx), 3)
    assert len(idx) < len(t["weight_bones"]) / 3, "only the face's vertices travel"
    assert (np.abs(deltas).sum(axis=(0, 2)) > 0).all(), "every sent vertex is moved by some expression"
    dense = expressions.load_basis().dense(len(t["weight_bones"]))
    assert np.array_equal(dense[:, idx], deltas) and not np.delete(dense, idx, axis=1).any()


@pytest.mark.slow
def test_offsets_are_anny_forward_for_any_shape_and_pose():
    """anny's own model with facial actions (a second anny build, ~5 s): for a random shape and
    pose, the expressed body is the skinning of rest + the offsets, the bones unchanged."""
    import anny

    model = anny.Anny(skinning_method="lbs", facial_actions="all").to(dtype=torch.float64)
    basis = expressions.load_basis()
    g = torch.Generator().manual_seed(3)
    phen = {k: torch.rand(1, generator=g, dtype=torch.float64) for k in
            ("gender", "age", "muscle", "weight", "height", "proportions")}
    pose = torch.eye(4, dtype=torch.float64).repeat(1, len(model.bone_labels), 1, 1)
    pose[..., :3, :3] = rotvec_to_matrix(0.2 * torch.randn((1, len(model.bone_labels), 3), generator=g,
                                                           dtype=torch.float64))
    values = torch.rand((1, 52), generator=g, dtype=torch.float64)
    neutral = model(pose_parameters=pose, phenotype_kwargs=phen)
    posed = model(pose_parameters=pose, phenotype_kwargs=phen,
                  facial_actions={n: values[:, i] for i, n in enumerate(basis.names)})
    assert torch.allclose(posed["bone_poses"], neutral["bone_poses"], atol=1e-12)
    assert (posed["vertices"] - neutral["vertices"]).abs().max() > 0.005, "the pose carries the expression"
    rest_delta = (posed["rest_vertices"] - neutral["rest_vertices"])[0].numpy()
    want = np.zeros_like(rest_delta)
    want[basis.vertices] = np.tensordot(values[0].numpy(), basis.deltas.astype(np.float64), 1)
    assert np.abs(rest_delta - want).max() < 1e-6


def test_face_landmarks_are_the_backends_points_on_anny_face(body):
    """Every Goliath face point the offline backend fills has a vertex; sides, midline and the
    face's vertical order hold on the neutral template (model frame: x the person's left, z up)."""
    from inference_server.backends.mediapipe_landmarks import FACE_SHARED, FACE_TO_GOLIATH

    t = body.template()
    names = [str(n) for n in t["face_landmark_names"]]
    assert set(names) == set(FACE_TO_GOLIATH.values()) | set(FACE_SHARED)
    rest = body.anny.template_vertices.detach().cpu().double().numpy()
    at = {n: rest[v] for n, v in zip(names, t["face_landmark_vertices"])}
    for n, p in at.items():
        if n.startswith(("l_", "end_of_l", "upper_startpoint_of_l", "lower_startpoint_of_l")):
            assert p[0] > 0.005, n
        elif n.startswith(("r_", "end_of_r", "upper_startpoint_of_r", "lower_startpoint_of_r")):
            assert p[0] < -0.005, n
        elif n.startswith(("center_", "tip_", "bottom_")):
            assert abs(p[0]) < 0.003, n
    z = {n: p[2] for n, p in at.items()}
    assert z["tip_of_chin"] < z["center_of_lower_outer_lip"] < z["center_of_lower_inner_lip"] \
        <= z["center_of_upper_inner_lip"] < z["center_of_cupid_bow"] < z["bottom_center_of_nose"] \
        < z["tip_of_nose"] < z["center_of_nose_root"] < z["center_of_glabella"]
    assert z["l_centerpoint_of_lower_lash_line"] < z["l_centerpoint_of_upper_lash_line"] < z["end_of_l_eyebrow"]
    assert at["tip_of_nose"][1] == min(p[1] for p in at.values()), "the nose is the face's front"
    # jawOpen moves the lower lip and chin, not the upper lip or the nose
    jaw = expressions.load_basis().dense(len(rest))[24]
    moved = {n: np.linalg.norm(jaw[v]) for n, v in zip(names, t["face_landmark_vertices"])}
    assert moved["tip_of_chin"] > 0.01 and moved["center_of_lower_inner_lip"] > 0.005
    assert moved["tip_of_nose"] < moved["tip_of_chin"] / 10 and moved["center_of_upper_inner_lip"] < moved["center_of_lower_inner_lip"] / 3


def test_face_landmarks_are_calibrated_mirror_twins_on_the_detectors_points(body):
    """anny's template uses the detector-calibrated picks (face_landmarks.CALIBRATED): a left point
    and its right twin mirror each other; the lids' centres and inner lips are on their cavity's
    ring (a blink or an open mouth moves them as the lid or lip); the glabella sits between the
    brows, not on the forehead (the geometric pick was ~1.7 cm higher than the detector's)."""
    from inference_server.fit import face_landmarks

    t = body.template()
    names = [str(n) for n in t["face_landmark_names"]]
    table = dict(zip(names, (int(v) for v in t["face_landmark_vertices"])))
    assert table == face_landmarks.CALIBRATED
    rest = body.anny.template_vertices.detach().cpu().double().numpy()
    for n, v in table.items():
        if n.startswith("l_") or "_l_" in n:
            twin = table[n[:2].replace("l_", "r_") + n[2:].replace("_l_", "_r_")]
            assert np.abs(rest[v] * [-1, 1, 1] - rest[twin]).max() < 1e-3, n
    faces = body.anny.faces.cpu().numpy()
    head = face_landmarks._segment(body.anny, "head")
    rings = {"mouth": face_landmarks._ring(faces, head, face_landmarks._segment(body.anny, "mouth_cavity")),
             "l": face_landmarks._ring(faces, head, face_landmarks._segment(body.anny, "eye_cavity.L")),
             "r": face_landmarks._ring(faces, head, face_landmarks._segment(body.anny, "eye_cavity.R"))}
    for n, v in table.items():
        if "centerpoint_of" in n:
            assert v in rings[n[0]], n
        if "inner_lip" in n or "inner_corner_of_mouth" in n:
            assert v in rings["mouth"], n
    z = {n: rest[v][2] for n, v in table.items()}
    assert 0.0 < z["center_of_glabella"] - z["center_of_nose_root"] < 0.012
