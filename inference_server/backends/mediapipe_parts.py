# SPDX-License-Identifier: GPL-3.0-or-later
"""Coarse body parts and limb-interpolated landmark depth for the offline backend.

Each pixel takes the class of the nearest limb segment of the MediaPipe skeleton (torso and
hands are filled polygons, so their inside is at distance 0), and the relative depth of the
landmarks interpolated along that segment. Class names are Sapiens2's, so the builders treat
these maps like any other backend's.
"""

from __future__ import annotations

import cv2
import numpy as np

from ..processing.goliath import PART_NAMES_SAPIENS2
from .mediapipe_landmarks import POSE

PART_ID = {name: i for i, name in enumerate(PART_NAMES_SAPIENS2)}

# Extra skeleton points appended after the 33 pose landmarks. The torso stops a little above
# the hip joints (LOW_*): the hip keypoint sits where the thigh starts, so its pixels belong
# to the upper leg, as in Sapiens' segmentation.
MID_SHOULDER, MID_HIP, HEAD, LOW_LEFT, LOW_RIGHT, LOW_MID = 33, 34, 35, 36, 37, 38
TORSO_LENGTH = 0.8  # fraction of the shoulder -> hip distance that is torso
MIN_VISIBILITY = 0.2  # below this a landmark does not anchor a limb segment

_P = POSE
SEGMENTS = (  # (class name, start point, end point)
    ("Face_Neck", MID_SHOULDER, HEAD),
    ("Torso", MID_SHOULDER, LOW_MID),
    ("Torso", _P["left_shoulder"], LOW_LEFT),
    ("Torso", _P["right_shoulder"], LOW_RIGHT),
    ("Left_Upper_Arm", _P["left_shoulder"], _P["left_elbow"]),
    ("Right_Upper_Arm", _P["right_shoulder"], _P["right_elbow"]),
    ("Left_Lower_Arm", _P["left_elbow"], _P["left_wrist"]),
    ("Right_Lower_Arm", _P["right_elbow"], _P["right_wrist"]),
    ("Left_Hand", _P["left_wrist"], _P["left_index"]),
    ("Left_Hand", _P["left_wrist"], _P["left_pinky"]),
    ("Right_Hand", _P["right_wrist"], _P["right_index"]),
    ("Right_Hand", _P["right_wrist"], _P["right_pinky"]),
    ("Left_Upper_Leg", _P["left_hip"], _P["left_knee"]),
    ("Right_Upper_Leg", _P["right_hip"], _P["right_knee"]),
    ("Left_Lower_Leg", _P["left_knee"], _P["left_ankle"]),
    ("Right_Lower_Leg", _P["right_knee"], _P["right_ankle"]),
    ("Left_Foot", _P["left_ankle"], _P["left_heel"]),
    ("Left_Foot", _P["left_heel"], _P["left_foot_index"]),
    ("Right_Foot", _P["right_ankle"], _P["right_heel"]),
    ("Right_Foot", _P["right_heel"], _P["right_foot_index"]),
)
_SEG_CLASS = np.array([PART_ID[c] for c, _, _ in SEGMENTS], np.uint8)
_SEG_A = np.array([a for _, a, _ in SEGMENTS])
_SEG_B = np.array([b for _, _, b in SEGMENTS])


def skeleton_points(pose: np.ndarray) -> np.ndarray:
    """[39,4] (u, v, z, visibility): the 33 landmarks plus the derived points above."""
    pose = np.asarray(pose, np.float64)
    ls, rs = pose[_P["left_shoulder"]], pose[_P["right_shoulder"]]
    lh, rh = pose[_P["left_hip"]], pose[_P["right_hip"]]
    head_ids = [_P[k] for k in ("nose", "left_eye", "right_eye", "left_ear", "right_ear")]
    head = pose[head_ids]
    w = np.maximum(head[:, 3:4], 1e-3)
    head_c = np.concatenate([(head[:, :3] * w).sum(0) / w.sum(), [head[:, 3].max()]])
    extra = np.stack([
        np.concatenate([(ls[:3] + rs[:3]) / 2, [min(ls[3], rs[3])]]),
        np.concatenate([(lh[:3] + rh[:3]) / 2, [min(lh[3], rh[3])]]),
        head_c,
        np.concatenate([ls[:3] + TORSO_LENGTH * (lh[:3] - ls[:3]), [min(ls[3], lh[3])]]),
        np.concatenate([rs[:3] + TORSO_LENGTH * (rh[:3] - rs[:3]), [min(rs[3], rh[3])]]),
    ])
    extra = np.concatenate([extra, [np.concatenate([(extra[3, :3] + extra[4, :3]) / 2,
                                                    [min(extra[3, 3], extra[4, 3])]])]])
    return np.concatenate([pose, extra], 0)


def _fill(shape: tuple[int, int], points: np.ndarray) -> np.ndarray:
    out = np.zeros(shape, np.uint8)
    if len(points) >= 3:
        hull = cv2.convexHull(np.round(points[:, :2]).astype(np.int32))
        cv2.fillConvexPoly(out, hull, 1)
    return out.astype(bool)


def parts_and_depth(
    shape: tuple[int, int],
    pose: np.ndarray,
    left_hand: np.ndarray | None = None,
    right_hand: np.ndarray | None = None,
    face: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Part class ids (uint8 [H,W]) and landmark depth offsets (float32 [H,W], metres).

    All inputs are in pixels of a ``shape`` grid: ``pose`` [33,4] (u, v, world z relative to
    the hips, visibility); hands [21,2] and face [468,2] (u, v) or None. Every pixel gets a
    class (the caller applies the person mask).
    """
    h, w = shape
    pts = skeleton_points(pose)
    vis = pts[:, 3]
    # Unreliable landmarks keep their place but lose their depth: occluded joints' z is a guess.
    z = pts[:, 2] * np.clip(vis / 0.5, 0.0, 1.0)
    # A segment needs its proximal end seen; the distal end may be MediaPipe's estimate (an
    # occluded or out-of-frame joint still gives the limb's direction).
    use = vis[_SEG_A] >= MIN_VISIBILITY
    if not use.any():
        use[:2] = True  # at least head and torso: the caller only asks when shoulders exist
    a, b = pts[_SEG_A[use], :2], pts[_SEG_B[use], :2]
    za, zb = z[_SEG_A[use]], z[_SEG_B[use]]
    cls = _SEG_CLASS[use]

    yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
    px, py = xx.reshape(1, -1) + 0.5, yy.reshape(1, -1) + 0.5  # pixel centres [1,N]
    ax, ay = a[:, :1].astype(np.float32), a[:, 1:].astype(np.float32)  # [S,1]
    bx, by = b[:, :1].astype(np.float32) - ax, b[:, 1:].astype(np.float32) - ay
    dx, dy = px - ax, py - ay  # [S,N]
    t = (dx * bx + dy * by) * (1.0 / np.maximum(bx * bx + by * by, 1e-6))
    np.clip(t, 0.0, 1.0, out=t)
    dx -= t * bx
    dy -= t * by
    nearest = (dx * dx + dy * dy).argmin(0)
    t_near = np.take_along_axis(t, nearest[None, :], 0)[0]
    depth = (za[nearest] + t_near * (zb[nearest] - za[nearest])).reshape(h, w)
    labels = cls[nearest].reshape(h, w)

    # Region overrides: the torso quad and hand hulls are solid, not just their centre lines.
    torso_ids = [_P["left_shoulder"], _P["right_shoulder"], LOW_RIGHT, LOW_LEFT]
    if (vis[torso_ids] >= MIN_VISIBILITY).all():
        labels[_fill(shape, pts[torso_ids])] = PART_ID["Torso"]
    for side, hand in (("Left", left_hand), ("Right", right_hand)):
        if hand is not None:
            labels[_fill(shape, np.asarray(hand))] = PART_ID[f"{side}_Hand"]
    if face is not None:
        face = np.asarray(face)
        inside = _fill(shape, face)
        head = labels == PART_ID["Face_Neck"]
        # Head pixels outside the face oval and above the mouth are hair.
        mouth_v = float(face[[13, 14], 1].mean())
        hair = head & ~inside & (yy < mouth_v)
        labels[hair] = PART_ID["Hair"]
    return labels, depth.astype(np.float32)
