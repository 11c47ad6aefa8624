# SPDX-License-Identifier: GPL-3.0-or-later
"""Pose and skinning arithmetic of a fitted body (numpy only): parent-relative pose for Blender's
pose bones, linear blend skinning, weight pruning, the fitted joints and a symmetry check."""

from __future__ import annotations

import numpy as np

from .records import BodyError, BodyFit, BodyTemplate
from ..geometry.rotations import matrix_to_quaternion

MAX_INFLUENCES = 4  # what glTF's JOINTS_0/WEIGHTS_0 and game engines take per vertex


def local_pose_matrices(rest: np.ndarray, pose: np.ndarray, parents) -> np.ndarray:
    """[B,4,4] per-bone pose relative to its rest, parent-relative (Blender's ``matrix_basis``):
    ``inv(inv(Rest_p) @ Rest_b) @ inv(Pose_p) @ Pose_b``; roots: ``inv(Rest_b) @ Pose_b``."""
    rest = np.asarray(rest, np.float64)
    pose = np.asarray(pose, np.float64)
    parents = np.asarray(parents, np.int64)
    inv_rest, inv_pose = np.linalg.inv(rest), np.linalg.inv(pose)
    has_parent = (parents >= 0)[:, None, None]
    safe = np.maximum(parents, 0)
    rest_local = np.where(has_parent, inv_rest[safe] @ rest, rest)  # Rest_b in its parent's frame
    pose_local = np.where(has_parent, inv_pose[safe] @ pose, pose)
    return np.linalg.inv(rest_local) @ pose_local


def local_pose_quaternions(rest: np.ndarray, pose: np.ndarray, parents) -> tuple[np.ndarray, np.ndarray]:
    """(quaternions [B,4] w,x,y,z with w >= 0, locations [B,3]) for Blender's pose bones."""
    local = local_pose_matrices(rest, pose, parents)
    return matrix_to_quaternion(local[:, :3, :3]), local[:, :3, 3]


def skin_vertices(rest_vertices, rest_bones, pose_bones, weight_bones, weight_values) -> np.ndarray:
    """Linear blend skinning (the contract's formula), model frame: [V,3]."""
    transforms = np.asarray(pose_bones, np.float64) @ np.linalg.inv(np.asarray(rest_bones, np.float64))
    rest_h = np.c_[np.asarray(rest_vertices, np.float64), np.ones(len(rest_vertices))]
    w = np.asarray(weight_values, np.float64)
    out = np.zeros((len(rest_h), 3))
    for k in range(w.shape[1]):  # K <= 9 influence slots, each vectorised over all vertices
        t = transforms[weight_bones[:, k]]
        out += w[:, k, None] * np.einsum("vij,vj->vi", t[:, :3, :], rest_h)
    return out


# --- weights -------------------------------------------------------------------------------------
def prune_weights(weight_bones, weight_values, max_influences: int = MAX_INFLUENCES) -> tuple[np.ndarray, np.ndarray]:
    """The ``max_influences`` largest weights per vertex, renormalised to sum 1 ([V,max] each;
    unused slots: bone 0, weight 0). Slots are sorted by decreasing weight."""
    bones = np.asarray(weight_bones, np.int32)
    values = np.asarray(weight_values, np.float64)
    if values.shape[1] < max_influences:
        pad = max_influences - values.shape[1]
        bones = np.pad(bones, ((0, 0), (0, pad)))
        values = np.pad(values, ((0, 0), (0, pad)))
    order = np.argsort(-values, axis=1, kind="stable")[:, :max_influences]
    kept_b = np.take_along_axis(bones, order, 1)
    kept_w = np.take_along_axis(values, order, 1)
    total = kept_w.sum(axis=1, keepdims=True)
    if np.any(total <= 0):
        raise BodyError(f"{int(np.count_nonzero(total <= 0))} vertices have no skin weight")
    kept_w = kept_w / total
    kept_b = np.where(kept_w > 0, kept_b, 0)
    return kept_b.astype(np.int32), kept_w.astype(np.float32)


# --- joints ------------------------------------------------------------------------------------
def fit_joints(template: BodyTemplate, fit: BodyFit, person_id: int) -> dict:
    """{name: Joint} of one fitted person (camera frame), names the joints file accepts."""
    from ..geometry.joints_io import KNOWN_NAMES
    from ..geometry.types import Joint

    i = fit.index(person_id)
    return {name: Joint(name, fit.joints[i, j].astype(np.float64), bool(fit.joints_estimated[i, j]))
            for j, name in enumerate(template.joint_names) if name in KNOWN_NAMES}


def mirror_asymmetry(points: np.ndarray, names, left: str = ".L", right: str = ".R") -> float:
    """Largest distance (m) between a left point and its right partner mirrored through X = 0
    (model frame), over names ending in ``left``/``right``; 0 when there are no pairs."""
    index = {n: i for i, n in enumerate(names)}
    pts = np.asarray(points, np.float64)
    worst = 0.0
    for name, i in index.items():
        if name.endswith(left) and name[: -len(left)] + right in index:
            mirrored = pts[index[name[: -len(left)] + right]] * np.array([-1.0, 1.0, 1.0])
            worst = max(worst, float(np.linalg.norm(pts[i] - mirrored)))
    return worst
