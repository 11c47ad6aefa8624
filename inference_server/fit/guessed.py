# SPDX-License-Identifier: GPL-3.0-or-later
"""What the fit saw and what it guessed, per person and limb (the report's ``guessed``).

Each fitted joint has one source:
- ``seen``: its keypoint was in the photo with a score the fit used;
- ``3d``: not seen, but the backend's 3D pose (MediaPipe's world landmarks) placed it: a joint
  just outside the frame that MediaPipe is sure of. Only the joints of the bones the fit takes
  from that pose (bones.WORLD_BONES: the limbs and the torso): its head and feet place nothing;
- ``out_of_frame``: neither; the fitted joint projects outside the photo: the pose prior (legs
  out of the frame stand) set it;
- ``occluded``: neither, and it projects inside the photo: hidden by the person or by someone
  else; the prior and the silhouette set it.
The Blender side turns these into vertex groups (sapiens_blender/core/body/guessed.py).
"""

from __future__ import annotations

import numpy as np

from .bones import WORLD_BONES
from .correspondences import JOINT_NAMES

# The joints the backend's 3D pose can place (an end of a bone the world term follows).
PLACED_BY_3D = np.isin(JOINT_NAMES, [n for bone in WORLD_BONES for n in bone])
SOURCES = ("seen", "3d", "out_of_frame", "occluded")

# Limbs as the artist names them -> the fitted joints that place them.
LIMBS = {
    "head": ("nose", "left_eye", "right_eye", "left_ear", "right_ear"),
    "left_arm": ("left_shoulder", "left_elbow", "left_wrist"),
    "right_arm": ("right_shoulder", "right_elbow", "right_wrist"),
    "left_hand": tuple(n for n in JOINT_NAMES if n.startswith("left_") and ("finger" in n or "thumb" in n)),
    "right_hand": tuple(n for n in JOINT_NAMES if n.startswith("right_") and ("finger" in n or "thumb" in n)),
    "left_leg": ("left_hip", "left_knee", "left_ankle"),
    "right_leg": ("right_hip", "right_knee", "right_ankle"),
    # Not the small toes: MediaPipe has none (it would call every foot "partly seen").
    "left_foot": ("left_big_toe", "left_heel"),
    "right_foot": ("right_big_toe", "right_heel"),
}


def joint_sources(seen: np.ndarray, world_weights: np.ndarray | None, joints_cam: np.ndarray,
                  intrinsics: np.ndarray, hw: tuple[int, int]) -> list[str]:
    """One of SOURCES per JOINT_NAMES joint: ``seen`` [J] bool (the fit's keypoints),
    ``world_weights`` [J] (the 3D pose's, None without one; read at PLACED_BY_3D only), the
    fitted joints [J,3] (camera frame) projected with ``intrinsics`` onto the ``hw`` photo."""
    seen = np.asarray(seen, bool)
    w3 = np.zeros(len(seen)) if world_weights is None else np.nan_to_num(np.asarray(world_weights, np.float64))
    w3 = np.where(PLACED_BY_3D, w3, 0.0)
    j = np.asarray(joints_cam, np.float64)
    k = np.asarray(intrinsics, np.float64)
    z = np.maximum(j[:, 2], 1e-6)
    u = k[0, 0] * j[:, 0] / z + k[0, 2]
    v = k[1, 1] * j[:, 1] / z + k[1, 2]
    h, w = hw
    inside = (j[:, 2] > 0) & (u >= 0) & (u < w) & (v >= 0) & (v < h)
    return ["seen" if s else "3d" if c > 0 else "occluded" if i else "out_of_frame"
            for s, c, i in zip(seen, w3, inside)]


def limb_report(sources: list[str]) -> dict:
    """Per limb: its joints by source (only the sources it has) and one word for the limb:
    ``seen`` (all seen), ``partly seen``, ``3d`` (none seen, some from the 3D pose) or the prior's
    reason (``out_of_frame`` / ``occluded``, the more common of its joints)."""
    by_name = dict(zip(JOINT_NAMES, sources))
    out = {}
    for limb, names in LIMBS.items():
        groups: dict[str, list[str]] = {}
        for n in names:
            groups.setdefault(by_name[n], []).append(n)
        if set(groups) == {"seen"}:
            word = "seen"
        elif "seen" in groups:
            word = "partly seen"
        elif "3d" in groups:
            word = "3d"
        else:
            word = max(("out_of_frame", "occluded"), key=lambda s: len(groups.get(s, ())))
        out[limb] = {"source": word, **{s: groups[s] for s in SOURCES if s in groups}}
    return out
