# SPDX-License-Identifier: GPL-3.0-or-later
"""Skeleton hierarchy, Blender rolls, joint filling and the joints file."""

import json

import numpy as np
import pytest

from sapiens_blender.core.geometry import joints_io, skeleton
from sapiens_blender.core.geometry.joints_fill import DERIVED_JOINTS, fill_and_derive
from sapiens_blender.core.geometry.types import GeometryError, Joint
from geometry_fixtures import K, STANDING, standing

def test_hierarchy_lists_parents_before_children_with_documented_names():
    seen = set()
    for bone, parent in skeleton.BONE_HIERARCHY:
        assert parent is None or parent in seen, bone
        seen.add(bone)
    names = [b for b, _ in skeleton.BONE_HIERARCHY]
    assert len(names) == len(set(names)) == 21 + 30
    for n in ("pelvis", "spine", "chest", "neck", "head", "clavicle.L", "upper_arm.L", "forearm.L",
              "hand.L", "thigh.R", "shin.R", "foot.R", "toe.R", "thumb_01.L", "pinky_03.R"):
        assert n in names
    assert dict(skeleton.BONE_HIERARCHY)["thumb_01.L"] == "hand.L"
    assert dict(skeleton.BONE_HIERARCHY)["index_02.R"] == "index_01.R"


def test_build_skeleton_from_joints():
    joints = fill_and_derive(standing(), {}, K)
    sk = skeleton.build_skeleton(joints, person_id=2)
    assert sk.names == [b for b, _ in skeleton.BONE_HIERARCHY[:21]]
    assert sk.person_id == 2 and not sk.estimated.any()
    i = sk.index("forearm.L")
    assert np.allclose(sk.heads[i], STANDING["left_elbow"]) and np.allclose(sk.tails[i], STANDING["left_wrist"])
    assert sk.names[sk.parents[i]] == "upper_arm.L"
    # Connected chain: each limb bone starts where its parent ends.
    for child in ("forearm.R", "shin.L", "toe.R"):
        c = sk.index(child)
        assert np.allclose(sk.heads[c], sk.tails[sk.parents[c]])
    assert (np.linalg.norm(sk.tails - sk.heads, axis=1) > 1e-3).all()


def test_rolls_point_local_z_to_the_front_as_blender_computes_it():
    sk = skeleton.build_skeleton(fill_and_derive(standing(), {}, K))
    from sapiens_blender.core.geometry.types import CAMERA_TO_BLENDER
    m = skeleton.bone_matrices(sk.heads @ CAMERA_TO_BLENDER.T, sk.tails @ CAMERA_TO_BLENDER.T, sk.rolls)
    assert np.allclose(m[:, :, 2], sk.z_axes, atol=1e-9)
    assert np.allclose(np.einsum("bij,bik->bjk", m, m), np.eye(3), atol=1e-9)  # orthonormal
    front = np.array([0.0, -1.0, 0.0])  # facing the camera = Blender -Y
    upright = [sk.index(n) for n in ("spine", "upper_arm.L", "shin.R", "forearm.R")]
    assert (sk.z_axes[upright] @ front > 0.9).all()
    foot = sk.index("foot.L")  # nearly along the front: Z falls back to up (+Z)
    assert sk.z_axes[foot] @ np.array([0.0, 0.0, 1.0]) > 0.5


def test_bone_matrices_match_blender_construction_in_edge_cases():
    heads = np.zeros((3, 3))
    tails = np.array([[0.0, -1.0, 0.0], [0.0, 1.0, 0.0], [0.0, -1.0, 1e-5]])
    m = skeleton.bone_matrices(heads, tails, np.zeros(3))
    assert np.allclose(m[0], np.diag([-1.0, -1.0, 1.0]))  # straight down -Y: Blender's flip
    assert np.allclose(m[1], np.eye(3))
    assert np.allclose(np.linalg.det(m), 1.0)
    z = np.array([[1.0, 0, 0], [0, 0, 1.0], [1.0, 0, 0]])
    rolls = skeleton.rolls_for_z_axes(heads, tails, z)
    assert np.allclose(skeleton.bone_matrices(heads, tails, rolls)[:, :, 2], z, atol=1e-6)


def test_missing_body_joints_raise():
    with pytest.raises(GeometryError, match="no joint"):
        skeleton.build_skeleton({"nose": Joint("nose", np.zeros(3))})


def test_mirroring_fills_a_missing_limb_from_its_partner():
    joints = fill_and_derive(standing(drop=("left_wrist", "left_elbow")), {}, K)
    assert joints["left_elbow"].estimated and joints["left_wrist"].estimated
    assert np.allclose(joints["left_elbow"].xyz, STANDING["left_elbow"], atol=1e-6)
    assert np.allclose(joints["left_wrist"].xyz, STANDING["left_wrist"], atol=1e-6)
    assert set(joints.report["filled"]) == {"left_elbow", "left_wrist"}
    sk = skeleton.build_skeleton(joints)
    est = {sk.names[i] for i in np.nonzero(sk.estimated)[0]}
    assert {"upper_arm.L", "forearm.L", "hand.L"} <= est and "upper_arm.R" not in est


def test_a_low_score_keypoint_keeps_its_ray_and_the_partner_length():
    truth = np.array(STANDING["left_knee"])
    uv = K[:2, :2] @ (truth[:2] / truth[2]) + K[:2, 2]
    joints = fill_and_derive(standing(drop=("left_knee",)), {"left_knee": uv}, K)
    knee = joints["left_knee"].xyz
    assert joints["left_knee"].estimated
    assert np.allclose(K[:2, :2] @ (knee[:2] / knee[2]) + K[:2, 2], uv)
    partner = np.linalg.norm(np.subtract(STANDING["right_knee"], STANDING["right_hip"]))
    assert np.isclose(np.linalg.norm(knee - STANDING["left_hip"]), partner)


def test_derived_joints_and_their_flags():
    joints = fill_and_derive(standing(), {}, K)
    for n in DERIVED_JOINTS:
        assert joints[n].estimated, n
    assert np.allclose(joints["pelvis"].xyz, [0.0, 0.05, 3.0])
    assert np.allclose(joints["head"].xyz, [0.0, -0.63, 3.0])
    assert joints["head_top"].xyz[1] < joints["head"].xyz[1]  # above (y down)
    assert not joints["left_elbow"].estimated


def test_joints_file_round_trip_and_completion(tmp_path):
    joints = fill_and_derive(standing(), {}, K)
    path = joints_io.write(tmp_path / "j.json", {1: joints})
    back = joints_io.read(path)
    assert set(back) == {1} and set(back[1]) == set(joints)
    for n, j in joints.items():
        assert np.allclose(back[1][n].xyz, j.xyz) and back[1][n].estimated == j.estimated
    # A file with only Goliath names gets its derived joints back, flagged estimated.
    doc = {"people": [{"id": 3, "joints": {n: {"xyz": list(p), "estimated": False} for n, p in STANDING.items()}}]}
    (tmp_path / "k.json").write_text(json.dumps(doc))
    read = joints_io.read(tmp_path / "k.json")[3]
    assert read["pelvis"].estimated and not read["left_knee"].estimated
    assert np.allclose(read["neck"].xyz, STANDING["neck"])  # given joints are kept as they are
    skeleton.build_skeleton(read, 3)


@pytest.mark.parametrize("doc, match", [
    ({"persons": []}, "people"),
    ({"people": [{"id": 0, "joints": {}}]}, "positive integer"),
    ({"people": [{"id": 1, "joints": {"elbow": {"xyz": [0, 0, 1]}}}]}, "unknown joint name"),
    ({"people": [{"id": 1, "joints": {"left_elbow": {"xyz": [0, 1]}}}]}, "3 numbers"),
    ({"people": [{"id": 1, "joints": {"left_elbow": {"xyz": [0, "nan", 1]}}}]}, "3 numbers|finite"),
    ({"people": [{"id": 1, "joints": {"left_elbow": {"xyz": [0, 0, 1], "estimated": "no"}}}]}, "true or false"),
    ({"people": [{"id": 1, "joints": {}}, {"id": 1, "joints": {}}]}, "twice"),
])
def test_bad_joints_files_say_what_is_wrong(tmp_path, doc, match):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(joints_io.JointsFileError, match=match):
        joints_io.read(path, complete=False)


def test_unreadable_joints_file(tmp_path):
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(joints_io.JointsFileError, match="not valid JSON"):
        joints_io.read(tmp_path / "x.json")


def test_upper_body_photo_still_gets_a_complete_skeleton():
    legs = [n for n in STANDING if any(p in n for p in ("hip", "knee", "ankle", "toe"))]
    joints = fill_and_derive(standing(drop=legs), {}, K)
    sk = skeleton.build_skeleton(joints)
    assert len(sk.names) == 21
    est = {sk.names[i] for i in np.nonzero(sk.estimated)[0]}
    assert {"thigh.L", "shin.R", "foot.L"} <= est and "forearm.L" not in est
    # Legs hang below the pelvis (y down), the pelvis a torso length below the neck.
    assert sk.tails[sk.index("shin.L")][1] > sk.heads[sk.index("thigh.L")][1] + 0.5
    assert joints["left_hip"].estimated and "left_hip" in joints.report["filled"]
    assert joints["left_hip"].xyz[0] > joints["right_hip"].xyz[0]  # the person's left is +x here
