# SPDX-License-Identifier: GPL-3.0-or-later
"""Goliath-308 keypoints and Sapiens body-part classes (facts, not code).

Keypoint order is the one Sapiens v1 and Sapiens2 pose models output (Goliath "Sociopticon"
order, teeth removed). Note it is *not* COCO order: hips are 9/10, wrists 41 (right), 62 (left).
This module is pure data; the inference server keeps an identical copy (its room never imports
sapiens_blender) and a test checks the two agree.
"""

KEYPOINT_NAMES = (
    'nose', 'left_eye', 'right_eye', 'left_ear',
    'right_ear', 'left_shoulder', 'right_shoulder', 'left_elbow',
    'right_elbow', 'left_hip', 'right_hip', 'left_knee',
    'right_knee', 'left_ankle', 'right_ankle', 'left_big_toe',
    'left_small_toe', 'left_heel', 'right_big_toe', 'right_small_toe',
    'right_heel', 'right_thumb4', 'right_thumb3', 'right_thumb2',
    'right_thumb_third_joint', 'right_forefinger4', 'right_forefinger3', 'right_forefinger2',
    'right_forefinger_third_joint', 'right_middle_finger4', 'right_middle_finger3', 'right_middle_finger2',
    'right_middle_finger_third_joint', 'right_ring_finger4', 'right_ring_finger3', 'right_ring_finger2',
    'right_ring_finger_third_joint', 'right_pinky_finger4', 'right_pinky_finger3', 'right_pinky_finger2',
    'right_pinky_finger_third_joint', 'right_wrist', 'left_thumb4', 'left_thumb3',
    'left_thumb2', 'left_thumb_third_joint', 'left_forefinger4', 'left_forefinger3',
    'left_forefinger2', 'left_forefinger_third_joint', 'left_middle_finger4', 'left_middle_finger3',
    'left_middle_finger2', 'left_middle_finger_third_joint', 'left_ring_finger4', 'left_ring_finger3',
    'left_ring_finger2', 'left_ring_finger_third_joint', 'left_pinky_finger4', 'left_pinky_finger3',
    'left_pinky_finger2', 'left_pinky_finger_third_joint', 'left_wrist', 'left_olecranon',
    'right_olecranon', 'left_cubital_fossa', 'right_cubital_fossa', 'left_acromion',
    'right_acromion', 'neck', 'center_of_glabella', 'center_of_nose_root',
    'tip_of_nose_bridge', 'midpoint_1_of_nose_bridge', 'midpoint_2_of_nose_bridge', 'midpoint_3_of_nose_bridge',
    'center_of_labiomental_groove', 'tip_of_chin', 'upper_startpoint_of_r_eyebrow', 'lower_startpoint_of_r_eyebrow',
    'end_of_r_eyebrow', 'upper_midpoint_1_of_r_eyebrow', 'lower_midpoint_1_of_r_eyebrow', 'upper_midpoint_2_of_r_eyebrow',
    'upper_midpoint_3_of_r_eyebrow', 'lower_midpoint_2_of_r_eyebrow', 'lower_midpoint_3_of_r_eyebrow', 'upper_startpoint_of_l_eyebrow',
    'lower_startpoint_of_l_eyebrow', 'end_of_l_eyebrow', 'upper_midpoint_1_of_l_eyebrow', 'lower_midpoint_1_of_l_eyebrow',
    'upper_midpoint_2_of_l_eyebrow', 'upper_midpoint_3_of_l_eyebrow', 'lower_midpoint_2_of_l_eyebrow', 'lower_midpoint_3_of_l_eyebrow',
    'l_inner_end_of_upper_lash_line', 'l_outer_end_of_upper_lash_line', 'l_centerpoint_of_upper_lash_line', 'l_midpoint_2_of_upper_lash_line',
    'l_midpoint_1_of_upper_lash_line', 'l_midpoint_6_of_upper_lash_line', 'l_midpoint_5_of_upper_lash_line', 'l_midpoint_4_of_upper_lash_line',
    'l_midpoint_3_of_upper_lash_line', 'l_outer_end_of_upper_eyelid_line', 'l_midpoint_6_of_upper_eyelid_line', 'l_midpoint_2_of_upper_eyelid_line',
    'l_midpoint_5_of_upper_eyelid_line', 'l_centerpoint_of_upper_eyelid_line', 'l_midpoint_4_of_upper_eyelid_line', 'l_midpoint_1_of_upper_eyelid_line',
    'l_midpoint_3_of_upper_eyelid_line', 'l_midpoint_6_of_upper_crease_line', 'l_midpoint_2_of_upper_crease_line', 'l_midpoint_5_of_upper_crease_line',
    'l_centerpoint_of_upper_crease_line', 'l_midpoint_4_of_upper_crease_line', 'l_midpoint_1_of_upper_crease_line', 'l_midpoint_3_of_upper_crease_line',
    'r_inner_end_of_upper_lash_line', 'r_outer_end_of_upper_lash_line', 'r_centerpoint_of_upper_lash_line', 'r_midpoint_1_of_upper_lash_line',
    'r_midpoint_2_of_upper_lash_line', 'r_midpoint_3_of_upper_lash_line', 'r_midpoint_4_of_upper_lash_line', 'r_midpoint_5_of_upper_lash_line',
    'r_midpoint_6_of_upper_lash_line', 'r_outer_end_of_upper_eyelid_line', 'r_midpoint_3_of_upper_eyelid_line', 'r_midpoint_1_of_upper_eyelid_line',
    'r_midpoint_4_of_upper_eyelid_line', 'r_centerpoint_of_upper_eyelid_line', 'r_midpoint_5_of_upper_eyelid_line', 'r_midpoint_2_of_upper_eyelid_line',
    'r_midpoint_6_of_upper_eyelid_line', 'r_midpoint_3_of_upper_crease_line', 'r_midpoint_1_of_upper_crease_line', 'r_midpoint_4_of_upper_crease_line',
    'r_centerpoint_of_upper_crease_line', 'r_midpoint_5_of_upper_crease_line', 'r_midpoint_2_of_upper_crease_line', 'r_midpoint_6_of_upper_crease_line',
    'l_inner_end_of_lower_lash_line', 'l_outer_end_of_lower_lash_line', 'l_centerpoint_of_lower_lash_line', 'l_midpoint_2_of_lower_lash_line',
    'l_midpoint_1_of_lower_lash_line', 'l_midpoint_6_of_lower_lash_line', 'l_midpoint_5_of_lower_lash_line', 'l_midpoint_4_of_lower_lash_line',
    'l_midpoint_3_of_lower_lash_line', 'l_outer_end_of_lower_eyelid_line', 'l_midpoint_6_of_lower_eyelid_line', 'l_midpoint_2_of_lower_eyelid_line',
    'l_midpoint_5_of_lower_eyelid_line', 'l_centerpoint_of_lower_eyelid_line', 'l_midpoint_4_of_lower_eyelid_line', 'l_midpoint_1_of_lower_eyelid_line',
    'l_midpoint_3_of_lower_eyelid_line', 'r_inner_end_of_lower_lash_line', 'r_outer_end_of_lower_lash_line', 'r_centerpoint_of_lower_lash_line',
    'r_midpoint_1_of_lower_lash_line', 'r_midpoint_2_of_lower_lash_line', 'r_midpoint_3_of_lower_lash_line', 'r_midpoint_4_of_lower_lash_line',
    'r_midpoint_5_of_lower_lash_line', 'r_midpoint_6_of_lower_lash_line', 'r_outer_end_of_lower_eyelid_line', 'r_midpoint_3_of_lower_eyelid_line',
    'r_midpoint_1_of_lower_eyelid_line', 'r_midpoint_4_of_lower_eyelid_line', 'r_centerpoint_of_lower_eyelid_line', 'r_midpoint_5_of_lower_eyelid_line',
    'r_midpoint_2_of_lower_eyelid_line', 'r_midpoint_6_of_lower_eyelid_line', 'tip_of_nose', 'bottom_center_of_nose',
    'r_outer_corner_of_nose', 'l_outer_corner_of_nose', 'inner_corner_of_r_nostril', 'outer_corner_of_r_nostril',
    'upper_corner_of_r_nostril', 'inner_corner_of_l_nostril', 'outer_corner_of_l_nostril', 'upper_corner_of_l_nostril',
    'r_outer_corner_of_mouth', 'l_outer_corner_of_mouth', 'center_of_cupid_bow', 'center_of_lower_outer_lip',
    'midpoint_1_of_upper_outer_lip', 'midpoint_2_of_upper_outer_lip', 'midpoint_1_of_lower_outer_lip', 'midpoint_2_of_lower_outer_lip',
    'midpoint_3_of_upper_outer_lip', 'midpoint_4_of_upper_outer_lip', 'midpoint_5_of_upper_outer_lip', 'midpoint_6_of_upper_outer_lip',
    'midpoint_3_of_lower_outer_lip', 'midpoint_4_of_lower_outer_lip', 'midpoint_5_of_lower_outer_lip', 'midpoint_6_of_lower_outer_lip',
    'r_inner_corner_of_mouth', 'l_inner_corner_of_mouth', 'center_of_upper_inner_lip', 'center_of_lower_inner_lip',
    'midpoint_1_of_upper_inner_lip', 'midpoint_2_of_upper_inner_lip', 'midpoint_1_of_lower_inner_lip', 'midpoint_2_of_lower_inner_lip',
    'midpoint_3_of_upper_inner_lip', 'midpoint_4_of_upper_inner_lip', 'midpoint_5_of_upper_inner_lip', 'midpoint_6_of_upper_inner_lip',
    'midpoint_3_of_lower_inner_lip', 'midpoint_4_of_lower_inner_lip', 'midpoint_5_of_lower_inner_lip', 'midpoint_6_of_lower_inner_lip',
    'l_top_end_of_inferior_crus', 'l_top_end_of_superior_crus', 'l_start_of_antihelix', 'l_end_of_antihelix',
    'l_midpoint_1_of_antihelix', 'l_midpoint_1_of_inferior_crus', 'l_midpoint_2_of_antihelix', 'l_midpoint_3_of_antihelix',
    'l_point_1_of_inner_helix', 'l_point_2_of_inner_helix', 'l_point_3_of_inner_helix', 'l_point_4_of_inner_helix',
    'l_point_5_of_inner_helix', 'l_point_6_of_inner_helix', 'l_point_7_of_inner_helix', 'l_highest_point_of_antitragus',
    'l_bottom_point_of_tragus', 'l_protruding_point_of_tragus', 'l_top_point_of_tragus', 'l_start_point_of_crus_of_helix',
    'l_deepest_point_of_concha', 'l_tip_of_ear_lobe', 'l_midpoint_between_22_15', 'l_bottom_connecting_point_of_ear_lobe',
    'l_top_connecting_point_of_helix', 'l_point_8_of_inner_helix', 'r_top_end_of_inferior_crus', 'r_top_end_of_superior_crus',
    'r_start_of_antihelix', 'r_end_of_antihelix', 'r_midpoint_1_of_antihelix', 'r_midpoint_1_of_inferior_crus',
    'r_midpoint_2_of_antihelix', 'r_midpoint_3_of_antihelix', 'r_point_1_of_inner_helix', 'r_point_8_of_inner_helix',
    'r_point_3_of_inner_helix', 'r_point_4_of_inner_helix', 'r_point_5_of_inner_helix', 'r_point_6_of_inner_helix',
    'r_point_7_of_inner_helix', 'r_highest_point_of_antitragus', 'r_bottom_point_of_tragus', 'r_protruding_point_of_tragus',
    'r_top_point_of_tragus', 'r_start_point_of_crus_of_helix', 'r_deepest_point_of_concha', 'r_tip_of_ear_lobe',
    'r_midpoint_between_22_15', 'r_bottom_connecting_point_of_ear_lobe', 'r_top_connecting_point_of_helix', 'r_point_2_of_inner_helix',
    'l_center_of_iris', 'l_border_of_iris_3', 'l_border_of_iris_midpoint_1', 'l_border_of_iris_12',
    'l_border_of_iris_midpoint_4', 'l_border_of_iris_9', 'l_border_of_iris_midpoint_3', 'l_border_of_iris_6',
    'l_border_of_iris_midpoint_2', 'r_center_of_iris', 'r_border_of_iris_3', 'r_border_of_iris_midpoint_1',
    'r_border_of_iris_12', 'r_border_of_iris_midpoint_4', 'r_border_of_iris_9', 'r_border_of_iris_midpoint_3',
    'r_border_of_iris_6', 'r_border_of_iris_midpoint_2', 'l_center_of_pupil', 'l_border_of_pupil_3',
    'l_border_of_pupil_midpoint_1', 'l_border_of_pupil_12', 'l_border_of_pupil_midpoint_4', 'l_border_of_pupil_9',
    'l_border_of_pupil_midpoint_3', 'l_border_of_pupil_6', 'l_border_of_pupil_midpoint_2', 'r_center_of_pupil',
    'r_border_of_pupil_3', 'r_border_of_pupil_midpoint_1', 'r_border_of_pupil_12', 'r_border_of_pupil_midpoint_4',
    'r_border_of_pupil_9', 'r_border_of_pupil_midpoint_3', 'r_border_of_pupil_6', 'r_border_of_pupil_midpoint_2',
)
assert len(KEYPOINT_NAMES) == 308

KEYPOINT_INDEX = {name: i for i, name in enumerate(KEYPOINT_NAMES)}


def mirror_order(names) -> tuple[int, ...]:
    """For each of ``names`` (``left_*`` / ``right_*`` style), the index of its partner on the
    other side, itself where it has none: the rows of a mirrored view's joints."""
    names = list(names)
    other = [n.replace("left", "@").replace("right", "left").replace("@", "right") for n in names]
    return tuple(names.index(o) if o in names else i for i, o in enumerate(other))


# Left/right partners for flip augmentation (292 of the 308 keypoints have one).
FLIP_PAIRS = (
    (1, 2), (3, 4), (5, 6), (7, 8), (9, 10), (11, 12),
    (13, 14), (15, 18), (16, 19), (17, 20), (21, 42), (22, 43),
    (23, 44), (24, 45), (25, 46), (26, 47), (27, 48), (28, 49),
    (29, 50), (30, 51), (31, 52), (32, 53), (33, 54), (34, 55),
    (35, 56), (36, 57), (37, 58), (38, 59), (39, 60), (40, 61),
    (41, 62), (63, 64), (65, 66), (67, 68), (78, 87), (79, 88),
    (80, 89), (81, 90), (82, 91), (83, 93), (84, 92), (85, 95),
    (86, 94), (96, 120), (97, 121), (98, 122), (99, 123), (100, 124),
    (101, 125), (102, 126), (103, 127), (104, 128), (105, 129), (106, 130),
    (107, 131), (108, 132), (109, 133), (110, 134), (111, 135), (112, 136),
    (113, 137), (114, 138), (115, 139), (116, 140), (117, 141), (118, 142),
    (119, 143), (144, 161), (145, 162), (146, 163), (147, 164), (148, 165),
    (149, 166), (150, 167), (151, 168), (152, 169), (153, 170), (154, 171),
    (155, 172), (156, 173), (157, 174), (158, 175), (159, 176), (160, 177),
    (180, 181), (182, 185), (183, 186), (184, 187), (188, 189), (192, 193),
    (194, 195), (196, 199), (197, 198), (200, 203), (201, 202), (204, 205),
    (208, 209), (210, 211), (212, 215), (213, 214), (216, 219), (217, 218),
    (220, 246), (221, 247), (222, 248), (223, 249), (224, 250), (225, 251),
    (226, 252), (227, 253), (228, 254), (229, 255), (230, 256), (231, 257),
    (232, 258), (233, 259), (234, 260), (235, 261), (236, 262), (237, 263),
    (238, 264), (239, 265), (240, 266), (241, 267), (242, 268), (243, 269),
    (244, 270), (245, 271), (272, 281), (273, 286), (274, 285), (275, 284),
    (276, 283), (277, 282), (278, 289), (279, 288), (280, 287), (290, 299),
    (291, 304), (292, 303), (293, 302), (294, 301), (295, 300), (296, 307),
    (297, 306), (298, 305),
)

# Sapiens2 body-part segmentation: 29 classes including background.
PART_NAMES_SAPIENS2 = (
    'Background', 'Apparel', 'Eyeglass', 'Face_Neck',
    'Hair', 'Left_Foot', 'Left_Hand', 'Left_Lower_Arm',
    'Left_Lower_Leg', 'Left_Shoe', 'Left_Sock', 'Left_Upper_Arm',
    'Left_Upper_Leg', 'Lower_Clothing', 'Right_Foot', 'Right_Hand',
    'Right_Lower_Arm', 'Right_Lower_Leg', 'Right_Shoe', 'Right_Sock',
    'Right_Upper_Arm', 'Right_Upper_Leg', 'Torso', 'Upper_Clothing',
    'Lower_Lip', 'Upper_Lip', 'Lower_Teeth', 'Upper_Teeth',
    'Tongue',
)

# Sapiens v1: 28 classes including background (no Eyeglass; everything after Apparel shifts by -1).
PART_NAMES_SAPIENS1 = tuple(n for n in PART_NAMES_SAPIENS2 if n != "Eyeglass")
