# SPDX-License-Identifier: GPL-3.0-or-later
"""Bone weights made to stay on their body part, head/neck split at the chin, <= 4 bones."""

import numpy as np

from sapiens_blender.core.geometry.types import Skeleton, SurfaceMesh
from sapiens_blender.core.geometry.weights import constrain_weights, part_based_weights

NAMES = ["pelvis", "spine", "chest", "neck", "head", "clavicle.R", "upper_arm.R", "forearm.R"]
PARTS = ("Background", "Torso", "Face_Neck", "Right_Upper_Arm", "Hair")
K = np.array([[100.0, 0, 50], [0, 100.0, 50], [0, 0, 1]])


def skeleton():
    heads = np.array([[0, 0.3, 2], [0, 0.1, 2], [0, -0.1, 2], [0, -0.3, 2], [0, -0.5, 2],
                      [0, -0.3, 2], [-0.2, -0.3, 2], [-0.2, 0.0, 2]], float)  # camera frame, y down
    tails = np.array([[0, 0.1, 2], [0, -0.1, 2], [0, -0.3, 2], [0, -0.5, 2], [0, -0.7, 2],
                      [-0.2, -0.3, 2], [-0.2, 0.0, 2], [-0.2, 0.3, 2]], float)
    parents = np.array([-1, 0, 1, 2, 3, 2, 5, 6], np.int32)
    n = len(NAMES)
    return Skeleton(NAMES, heads, tails, parents, np.zeros(n), np.zeros(n, bool))


def mesh(points, parts):
    points = np.asarray(points, np.float32)
    n = len(points)
    return SurfaceMesh(points, np.zeros((0, 3), np.int32), np.zeros((n, 2), np.float32), -np.ones((n, 2), np.int32),
                       np.zeros(0, np.uint8), np.asarray(parts, np.uint8))


def test_parts_chin_and_four_influences():
    rng = np.random.default_rng(1)
    points = [[-0.15, -0.25, 2], [0, -0.45, 2], [0, -0.35, 2], [-0.2, -0.1, 2], [0, -0.6, 2]]
    surface = mesh(points, [1, 2, 2, 3, 4])  # torso by the arm, face, neck skin, arm, hair
    dense = rng.random((5, len(NAMES)))  # everything follows everything, like raw bone heat
    dense[0, NAMES.index("upper_arm.R")] = 10.0  # the torso vertex follows the arm most
    chin = np.array([50.0, 50 + 100 * -0.4 / 2])  # (x, y) pixel: between neck skin and face
    out = constrain_weights(dense, surface, skeleton(), PARTS, chin=chin, intrinsics=K)
    assert np.allclose(out.sum(axis=1), 1.0) and ((out > 0).sum(axis=1) <= 4).all()
    torso_bones = [NAMES.index(b) for b in ("pelvis", "spine", "chest", "neck", "clavicle.R")]
    assert out[0, np.setdiff1d(np.arange(len(NAMES)), torso_bones)].sum() == 0
    head, neck = NAMES.index("head"), NAMES.index("neck")
    assert out[1, head] > 0.9 and out[1, neck] < 0.1  # face, above the chin
    assert out[2, neck] > 0.9 and out[2, head] < 0.1  # neck skin, below it
    assert out[4, head] == 1.0  # hair
    assert out[3, NAMES.index("upper_arm.R")] > 0


def test_a_vertex_left_with_nothing_takes_the_part_weights():
    surface = mesh([[0, 0.0, 2]], [1])
    skel = skeleton()
    dense = np.zeros((1, len(NAMES)))
    dense[0, NAMES.index("forearm.R")] = 1.0  # only a bone its part may not follow
    out = constrain_weights(dense, surface, skel, PARTS, fallback=part_based_weights(surface, skel, PARTS))
    assert np.isclose(out.sum(), 1.0) and out[0, NAMES.index("forearm.R")] == 0
