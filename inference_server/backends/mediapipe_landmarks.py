# SPDX-License-Identifier: GPL-3.0-or-later
"""MediaPipe landmarks -> Goliath-308 keypoint slots (data and one vectorised function).

MediaPipe's "left"/"right" are the *person's* left/right, the same convention as Goliath
(``left_shoulder`` is the subject's left shoulder, on the image's right for a person facing the
camera). So no swap is needed; a mirrored photo shows a different (mirrored) person and the
models label that person's sides, which the tests check.
"""

from __future__ import annotations

import numpy as np

from ..processing.goliath import KEYPOINT_INDEX, KEYPOINT_NAMES

# MediaPipe Pose's 33 landmark indices (BlazePose topology).
POSE = {
    "nose": 0, "left_eye_inner": 1, "left_eye": 2, "left_eye_outer": 3, "right_eye_inner": 4,
    "right_eye": 5, "right_eye_outer": 6, "left_ear": 7, "right_ear": 8, "mouth_left": 9,
    "mouth_right": 10, "left_shoulder": 11, "right_shoulder": 12, "left_elbow": 13,
    "right_elbow": 14, "left_wrist": 15, "right_wrist": 16, "left_pinky": 17, "right_pinky": 18,
    "left_index": 19, "right_index": 20, "left_thumb": 21, "right_thumb": 22, "left_hip": 23,
    "right_hip": 24, "left_knee": 25, "right_knee": 26, "left_ankle": 27, "right_ankle": 28,
    "left_heel": 29, "right_heel": 30, "left_foot_index": 31, "right_foot_index": 32,
}
NUM_POSE = 33

# Goliath name <- pose landmark. The foot index landmark is the tip of the foot, which is
# where Goliath's big toe keypoint sits to within a toe's width.
POSE_TO_GOLIATH = {
    "nose": "nose", "left_eye": "left_eye", "right_eye": "right_eye", "left_ear": "left_ear",
    "right_ear": "right_ear", "left_shoulder": "left_shoulder", "right_shoulder": "right_shoulder",
    "left_elbow": "left_elbow", "right_elbow": "right_elbow", "left_wrist": "left_wrist",
    "right_wrist": "right_wrist", "left_hip": "left_hip", "right_hip": "right_hip",
    "left_knee": "left_knee", "right_knee": "right_knee", "left_ankle": "left_ankle",
    "right_ankle": "right_ankle", "left_heel": "left_heel", "right_heel": "right_heel",
    "left_foot_index": "left_big_toe", "right_foot_index": "right_big_toe",
}

# MediaPipe Hands' 21 landmarks: 0 wrist, then 4 per finger from the palm outwards.
# Goliath names a finger's points tip-first: `4` tip, `3`, `2`, `_third_joint` (the knuckle
# nearest the palm; for the thumb that is the CMC joint).
_FINGERS = (("thumb", 1), ("forefinger", 5), ("middle_finger", 9), ("ring_finger", 13),
            ("pinky_finger", 17))


def _hand_table(side: str) -> dict[int, str]:
    table = {0: f"{side}_wrist"}
    for finger, base in _FINGERS:
        table[base] = f"{side}_{finger}_third_joint"
        table[base + 1] = f"{side}_{finger}2"
        table[base + 2] = f"{side}_{finger}3"
        table[base + 3] = f"{side}_{finger}4"
    return table


HAND_TO_GOLIATH = {"left": _hand_table("left"), "right": _hand_table("right")}

# A face-mesh subset (468-point canonical mesh) whose Goliath meaning is unambiguous.
# Face-mesh indices with "right" are the subject's right (image left for a frontal face).
FACE_TO_GOLIATH = {
    1: "tip_of_nose", 2: "bottom_center_of_nose", 152: "tip_of_chin", 168: "center_of_nose_root",
    9: "center_of_glabella",
    61: "r_outer_corner_of_mouth", 291: "l_outer_corner_of_mouth",
    78: "r_inner_corner_of_mouth", 308: "l_inner_corner_of_mouth",
    0: "center_of_cupid_bow", 17: "center_of_lower_outer_lip",
    13: "center_of_upper_inner_lip", 14: "center_of_lower_inner_lip",
    33: "r_outer_end_of_upper_lash_line", 133: "r_inner_end_of_upper_lash_line",
    263: "l_outer_end_of_upper_lash_line", 362: "l_inner_end_of_upper_lash_line",
    159: "r_centerpoint_of_upper_lash_line", 145: "r_centerpoint_of_lower_lash_line",
    386: "l_centerpoint_of_upper_lash_line", 374: "l_centerpoint_of_lower_lash_line",
    70: "end_of_r_eyebrow", 107: "upper_startpoint_of_r_eyebrow",
    55: "lower_startpoint_of_r_eyebrow",
    300: "end_of_l_eyebrow", 336: "upper_startpoint_of_l_eyebrow",
    285: "lower_startpoint_of_l_eyebrow",
}
# Eye corners are shared by the upper and lower lash lines.
FACE_SHARED = {
    "r_outer_end_of_lower_lash_line": 33, "r_inner_end_of_lower_lash_line": 133,
    "l_outer_end_of_lower_lash_line": 263, "l_inner_end_of_lower_lash_line": 362,
}


def _index_arrays(table: dict[int, str]) -> tuple[np.ndarray, np.ndarray]:
    src = np.array(list(table.keys()), dtype=np.int64)
    dst = np.array([KEYPOINT_INDEX[name] for name in table.values()], dtype=np.int64)
    return src, dst


_POSE_SRC, _POSE_DST = _index_arrays({POSE[k]: v for k, v in POSE_TO_GOLIATH.items()})
_HAND_IDX = {side: _index_arrays(t) for side, t in HAND_TO_GOLIATH.items()}
_FACE_PAIRS = list(FACE_TO_GOLIATH.items()) + [(i, n) for n, i in FACE_SHARED.items()]
_FACE_SRC = np.array([i for i, _ in _FACE_PAIRS], dtype=np.int64)
_FACE_DST = np.array([KEYPOINT_INDEX[n] for _, n in _FACE_PAIRS], dtype=np.int64)

HAND_SCORE = 0.9  # Holistic gives no per-landmark hand/face confidence; present = confident
FACE_SCORE = 0.9


def to_goliath_3d(world: np.ndarray, visibility: np.ndarray) -> np.ndarray:
    """Goliath-308 3D keypoints [308,4] (x, y, z metres relative to the hips in the camera's
    axes, confidence) from MediaPipe's pose world landmarks [33,3] and their visibility [33]:
    the pose's slots only (hands and face have no world landmarks: NaN), ``neck`` the
    shoulders' midpoint as in to_goliath."""
    out = np.full((len(KEYPOINT_NAMES), 4), np.nan, np.float32)
    src = np.concatenate([np.asarray(world, np.float32), np.asarray(visibility, np.float32)[:, None]], 1)
    out[_POSE_DST] = src[_POSE_SRC]
    ls, rs = src[POSE["left_shoulder"]], src[POSE["right_shoulder"]]
    out[KEYPOINT_INDEX["neck"]] = [*((ls[:3] + rs[:3]) / 2), min(ls[3], rs[3])]
    out[:, 3] = np.clip(out[:, 3], 0.0, 1.0)
    return out


def to_goliath(
    pose: np.ndarray,
    left_hand: np.ndarray | None = None,
    right_hand: np.ndarray | None = None,
    face: np.ndarray | None = None,
) -> np.ndarray:
    """Goliath-308 keypoints [308,3] (x, y, score) from MediaPipe landmarks in pixels.

    ``pose`` is [33,3] (x, y, visibility); hands [21,2] and face [>=468,2] are (x, y) or None.
    Slots with no MediaPipe counterpart keep score 0. ``neck`` is derived as the shoulders'
    midpoint (where Goliath puts it, to within a few centimetres).
    """
    out = np.zeros((len(KEYPOINT_NAMES), 3), np.float32)
    pose = np.asarray(pose, np.float32)
    out[_POSE_DST] = pose[_POSE_SRC]
    ls, rs = pose[POSE["left_shoulder"]], pose[POSE["right_shoulder"]]
    out[KEYPOINT_INDEX["neck"]] = [(ls[0] + rs[0]) / 2, (ls[1] + rs[1]) / 2, min(ls[2], rs[2])]
    for side, hand in (("left", left_hand), ("right", right_hand)):
        if hand is None:
            continue
        src, dst = _HAND_IDX[side]
        out[dst, :2] = np.asarray(hand, np.float32)[src, :2]
        out[dst, 2] = HAND_SCORE
    if face is not None:
        out[_FACE_DST, :2] = np.asarray(face, np.float32)[_FACE_SRC, :2]
        out[_FACE_DST, 2] = FACE_SCORE
    np.clip(out[:, 2], 0.0, 1.0, out=out[:, 2])
    return out
