# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the fit starts: the rest body placed in the camera in closed form (numpy only).

No optimisation step is spent finding the person: the rest body's joints are aligned (Kabsch)
with the keypoints lifted by the pointmap, or, without metric depth, back-projected at the
distance their spread implies.
"""

from __future__ import annotations

import numpy as np

from .correspondences import JOINT_NAMES
from .observations import PersonObservation

# anny's model frame (Z up, facing -Y) seen by a camera it faces: x = X, y = -Z, z = Y.
FACING_CAMERA = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])
_TORSO = tuple(JOINT_NAMES.index(n) for n in ("left_shoulder", "right_shoulder", "left_hip", "right_hip"))
_LEFT, _RIGHT = JOINT_NAMES.index("left_shoulder"), JOINT_NAMES.index("right_shoulder")


def kabsch(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rotation R and translation t minimising |R src + t - dst| (rows are points)."""
    cs, cd = src.mean(0), dst.mean(0)
    u, _, vt = np.linalg.svd((src - cs).T @ (dst - cd))
    d = np.sign(np.linalg.det(vt.T @ u.T))
    r = vt.T @ np.diag([1, 1, d]) @ u.T
    return r, cd - r @ cs


def distance_from_size(obs: PersonObservation, rest: np.ndarray, use) -> float:
    """Camera distance at which the rest body's joint spread matches the keypoints'."""
    pts = obs.keypoints[use]
    px = np.sqrt(((pts - pts.mean(0)) ** 2).sum(1).mean())
    m = rest[use][:, [0, 2]]  # width and height in the model frame (facing the camera)
    metres = np.sqrt(((m - m.mean(0)) ** 2).sum(1).mean())
    return float(np.clip(obs.intrinsics[0, 0] * metres / max(px, 1e-3), 0.3, 50.0))


def _facing_from_sides(obs: PersonObservation, r: np.ndarray) -> np.ndarray:
    """A body seen from behind and from the front project alike when all points share one
    depth: keep the rotation's up vector and choose the yaw that puts the person's left where
    the left keypoints are (the shoulders' x order in the image)."""
    if obs.weights[_LEFT] > 0 and obs.weights[_RIGHT] > 0:
        left_is_right_in_image = obs.keypoints[_LEFT, 0] > obs.keypoints[_RIGHT, 0]
        if (r[0, 0] > 0) != left_is_right_in_image:  # column 0: the person's left in the camera
            r = r @ np.diag([-1.0, 1.0, -1.0])  # half a turn about the body's up (Z)
    return r


def closed_form(obs: PersonObservation, rest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R, t) taking the rest body's model frame to the camera, from the seen keypoints."""
    use = [j for j in range(len(JOINT_NAMES)) if obs.weights[j] > 0]
    lifted_torso = [j for j in _TORSO if obs.weights[j] > 0 and np.isfinite(obs.lifted[j])]
    if obs.metric and len(lifted_torso) >= 3:
        sel = [j for j in use if np.isfinite(obs.lifted[j]) and obs.lifted_two_sided[j]] or \
              [j for j in use if np.isfinite(obs.lifted[j])]
        z = obs.lifted[sel] + obs.joint_radius[sel]
    else:
        sel = use
        z = np.full(len(sel), distance_from_size(obs, rest, use))
    k = obs.intrinsics
    dst = np.stack([(obs.keypoints[sel, 0] - k[0, 2]) / k[0, 0] * z,
                    (obs.keypoints[sel, 1] - k[1, 2]) / k[1, 1] * z, z], 1)
    if len(sel) < 3:
        r = FACING_CAMERA
    else:
        r, t = kabsch(rest[sel], dst)
        if obs.metric:
            return r, t
        r = _facing_from_sides(obs, r)
    return r, dst.mean(0) - r @ rest[sel].mean(0)


def facing_the_camera(obs: PersonObservation, rest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The plain baseline's start: the rest body facing the camera at the silhouette's place
    and the person's median depth."""
    use = [j for j in range(len(JOINT_NAMES)) if obs.weights[j] > 0]
    z = float(np.nanmedian(obs.points[:, 2])) if obs.has_depth and len(obs.points) else \
        distance_from_size(obs, rest, use)
    k = obs.intrinsics
    c = obs.cover_pixels.mean(0)
    centre = np.array([(c[0] - k[0, 2]) / k[0, 0] * z, (c[1] - k[1, 2]) / k[1, 1] * z, z])
    return FACING_CAMERA, centre - FACING_CAMERA @ rest.mean(0)
