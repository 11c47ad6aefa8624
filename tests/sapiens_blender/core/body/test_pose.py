# SPDX-License-Identifier: GPL-3.0-or-later
"""Pose and skinning arithmetic of a fitted body: local quaternions, symmetry, skinning, weight
pruning, and the fitted joints as a joints file.

On bodies made by the fit's own body model (tests/support/body_scenes.py).
"""

import json

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

from sapiens_blender.core.body import pose as body_pose
from sapiens_blender.core.geometry.rotations import matrix_to_quaternion
from sapiens_blender.core.geometry import joints_io

pytestmark = [pytest.mark.anny]


def test_local_quaternions_rebuild_the_pose_and_keep_continuous_signs(body_scene):
    scene = body_scene("standing")
    t, f = scene.template, scene.fit
    rest, pose = f.rest_bone_matrices[0].astype(np.float64), f.bone_matrices[0].astype(np.float64)
    quats, locs = body_pose.local_pose_quaternions(rest, pose, t.bone_parents)
    assert np.all(quats[:, 0] >= 0) and np.allclose(np.linalg.norm(quats, axis=1), 1)
    # Forward kinematics with the quaternions (as Blender does) gives the pose back.
    w, x, y, z = quats.T
    rot = np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                    2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                    2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], 1).reshape(-1, 3, 3)
    basis = np.tile(np.eye(4), (len(rot), 1, 1))
    basis[:, :3, :3], basis[:, :3, 3] = rot, locs
    world = np.zeros_like(pose)
    for b, p in enumerate(t.bone_parents):
        world[b] = (rest[b] if p < 0 else world[p] @ np.linalg.inv(rest[p]) @ rest[b]) @ basis[b]
    assert np.abs(world - pose).max() < 1e-5
    # A rotation by nearly 360 degrees about an axis comes out the short way (w >= 0).
    angle = np.radians(350.0)
    r = np.array([[1, 0, 0], [0, np.cos(angle), -np.sin(angle)], [0, np.sin(angle), np.cos(angle)]])
    q = matrix_to_quaternion(r)
    assert q[0] > 0 and np.isclose(q[0], np.cos(np.radians(5.0)))


def test_rest_pose_is_mirror_symmetric_and_skinning_reproduces_the_fit(body_scene):
    scene = body_scene("standing")
    t, f = scene.template, scene.fit
    heads = f.rest_bone_matrices[0, :, :3, 3]
    assert body_pose.mirror_asymmetry(heads, t.bone_names) < 0.01
    skinned = body_pose.skin_vertices(f.rest_vertices[0], f.rest_bone_matrices[0], f.bone_matrices[0],
                                      t.weight_bones, t.weight_values)
    placed = skinned @ f.placement[0, :3, :3].T.astype(np.float64) + f.placement[0, :3, 3]
    assert np.abs(placed - f.vertices[0]).max() < 1e-4


def test_weights_pruned_to_four_and_renormalised(body_scene):
    t = body_scene("standing").template
    assert t.weight_bones.shape[1] > 4 and (np.count_nonzero(t.weight_values, axis=1) > 4).any()
    bones, values = body_pose.prune_weights(t.weight_bones, t.weight_values)
    assert bones.shape == (t.num_vertices, 4) and np.allclose(values.sum(1), 1, atol=1e-6)
    assert np.all(np.diff(values, axis=1) <= 1e-7)  # largest first
    # The kept weights are each vertex's four largest, all scaled by the same factor.
    top = -np.sort(-t.weight_values, axis=1)[:, :4]
    assert np.allclose(values, top / top.sum(1, keepdims=True), atol=1e-6)
    rows = np.arange(t.num_vertices)[:, None]
    dense = np.zeros((t.num_vertices, t.num_bones))
    np.add.at(dense, (np.broadcast_to(rows, t.weight_bones.shape), t.weight_bones), t.weight_values)
    assert np.allclose(dense[np.broadcast_to(rows, bones.shape), bones][values > 0],
                       (values * top.sum(1, keepdims=True))[values > 0], atol=1e-6)


def test_joints_of_a_fit_write_a_joints_file_that_reads_back(body_scene, tmp_path):
    scene = body_scene("two")
    people = {pid: body_pose.fit_joints(scene.template, scene.fit, pid) for pid in (1, 2)}
    assert len(people[1]) == len(scene.template.joint_names)
    path = joints_io.write(tmp_path / "joints.json", people)
    back = joints_io.read(path, complete=False)
    assert np.allclose(back[2]["left_wrist"].xyz, scene.fit.joints[1, scene.template.joint_names.index("left_wrist")])
    assert json.loads(path.read_text())["people"][0]["id"] == 1
