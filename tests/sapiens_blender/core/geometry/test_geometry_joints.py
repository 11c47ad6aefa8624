# SPDX-License-Identifier: GPL-3.0-or-later
"""Joint lifting on analytic limbs: joints land on the limb axis, inside the body."""

import numpy as np
from geometry_fixtures import intrinsics, make_maps

from sapiens_blender.core.geometry import joints as joints_mod
from sapiens_blender.core.maps.goliath import KEYPOINT_INDEX, PART_NAMES_SAPIENS2

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


def _flat_person_with_hand(drop=()):
    """A flat person 3 m away with no part labels, body keypoints from the standing pose and
    the right hand's 20 finger keypoints fanned out below the wrist."""
    from geometry_fixtures import STANDING

    h, w, f = 240, 200, 200.0
    k = intrinsics(h, w, f)
    mask = np.zeros((h, w), np.uint8)
    mask[5:235, 20:180] = 1
    maps = make_maps(np.full((h, w), 3.0), mask, parts=np.zeros((h, w)), k=k)

    def px(xyz):
        return k[0, 0] * xyz[0] / xyz[2] + k[0, 2], k[1, 1] * xyz[1] / xyz[2] + k[1, 2]

    for name, xyz in STANDING.items():
        maps.keypoints[0, KEYPOINT_INDEX[name]] = (*px(xyz), 1.0)
    wx, wy = px(STANDING["right_wrist"])
    for i, finger in enumerate(("thumb", "forefinger", "middle_finger", "ring_finger", "pinky_finger")):
        for j, suffix in enumerate(("_third_joint", "2", "3", "4")):
            name = f"right_{finger}{suffix}"
            score = 0.0 if name in drop else 1.0
            maps.keypoints[0, KEYPOINT_INDEX[name]] = (wx - 6 + 3 * i, wy + 3 + 2.5 * j, score)
    return maps


def test_fingers_get_three_bones_each_when_all_their_keypoints_are_seen():
    from sapiens_blender.core.geometry import skeleton

    sk = skeleton.build_skeleton(joints_mod.lift_joints(_flat_person_with_hand(), 1), 1)
    right_fingers = [n for n in sk.names if n.endswith(".R") and n.split("_")[0] in
                     ("thumb", "index", "middle", "ring", "pinky")]
    assert len(right_fingers) == 15 and len(sk.names) == 21 + 15
    assert sk.names[sk.parents[sk.index("index_01.R")]] == "hand.R"
    assert sk.names[sk.parents[sk.index("index_03.R")]] == "index_02.R"
    # The hand bone now ends at the middle finger's knuckle.
    assert np.allclose(sk.tails[sk.index("hand.R")], sk.heads[sk.index("middle_01.R")])
    # A finger with a missing keypoint is left out; the others stay.
    sk = skeleton.build_skeleton(joints_mod.lift_joints(_flat_person_with_hand(drop=("right_thumb3",)), 1), 1)
    assert "thumb_01.R" not in sk.names and "index_01.R" in sk.names and len(sk.names) == 21 + 12
