# SPDX-License-Identifier: GPL-3.0-or-later
"""Joint lifting on analytic limbs: joints land on the limb axis, inside the body."""

import numpy as np
from geometry_fixtures import intrinsics, make_maps

from sapiens_blender.core.geometry import joints as joints_mod
from sapiens_blender.core.goliath import KEYPOINT_INDEX, PART_NAMES_SAPIENS2

H, W, F = 120, 100, 200.0


def cylinder_scene(radius, axis_z, torso_z=None, label="Right_Lower_Arm"):
    """A horizontal round limb (axis along image x through the centre row) at ``axis_z``,
    optionally in front of a flat torso at ``torso_z``; everything one person."""
    k = intrinsics(H, W, F)
    rr, cc = np.mgrid[0:H, 0:W]
    dy = (rr + 0.5 - k[1, 2]) * axis_z / F
    on_limb = (np.abs(dy) < radius) & (cc >= 10) & (cc < 90)
    depth = np.where(on_limb, axis_z - np.sqrt(np.clip(radius ** 2 - dy ** 2, 0, None)), np.nan)
    mask = on_limb.copy()
    if torso_z is not None:
        torso = (rr >= 10) & (rr < 110) & (cc >= 20) & (cc < 80)
        depth = np.where(on_limb, depth, np.where(torso, torso_z, np.nan))
        mask |= torso
    parts = np.where(mask, PART_NAMES_SAPIENS2.index(label), 0)
    kp = np.zeros((1, 308, 3), np.float32)
    kp[0, KEYPOINT_INDEX["right_wrist"]] = (60.0, k[1, 2], 1.0)
    kp[0, KEYPOINT_INDEX["right_elbow"]] = (25.0, k[1, 2], 1.0)
    return make_maps(depth, mask.astype(np.uint8), parts=parts, k=k, keypoints=kp)


def test_joint_sits_on_the_axis_of_a_round_limb():
    maps = cylinder_scene(radius=0.03, axis_z=2.5)
    joints = joints_mod.lift_joints(maps, 1)
    wrist = joints["right_wrist"]
    assert not wrist.estimated
    assert abs(wrist.xyz[2] - 2.5) < 0.008  # the skin is 3 cm in front; the joint is on the axis
    assert abs(wrist.xyz[1]) < 0.01


def test_limb_in_front_of_a_torso_with_the_same_clothing_label():
    # Sapiens labels a T-shirt's sleeve and body alike: only the depth step separates them.
    maps = cylinder_scene(radius=0.025, axis_z=2.6, torso_z=2.85, label="Upper_Clothing")
    wrist = joints_mod.lift_joints(maps, 1)["right_wrist"]
    assert abs(wrist.xyz[2] - 2.6) < 0.008


def test_a_keypoint_on_another_limb_is_treated_as_occluded():
    maps = cylinder_scene(radius=0.03, axis_z=2.5, label="Left_Upper_Leg")
    joints = joints_mod.lift_joints(maps, 1)
    assert "right_wrist" not in joints.report["lifted"]
    assert "right_wrist" in joints.report["notes"]


def test_low_scores_are_not_lifted():
    maps = cylinder_scene(radius=0.03, axis_z=2.5)
    maps.keypoints[0, :, 2] = 0.1
    joints = joints_mod.lift_joints(maps, 1, min_score=0.3)
    assert joints.report["lifted"] == []
