# SPDX-License-Identifier: GPL-3.0-or-later
"""Rotation matrices as Blender's pose-bone quaternions (w, x, y, z), kept continuous in time."""

from __future__ import annotations

import numpy as np


def matrix_to_quaternion(m: np.ndarray) -> np.ndarray:
    """Rotation matrices [...,3,3] -> unit quaternions [...,4] (w, x, y, z), Shepperd's method."""
    m = np.asarray(m, np.float64)
    tr = m[..., 0, 0] + m[..., 1, 1] + m[..., 2, 2]
    cands = np.stack([
        np.stack([1 + tr, m[..., 2, 1] - m[..., 1, 2], m[..., 0, 2] - m[..., 2, 0], m[..., 1, 0] - m[..., 0, 1]], -1),
        np.stack([m[..., 2, 1] - m[..., 1, 2], 1 + 2 * m[..., 0, 0] - tr, m[..., 0, 1] + m[..., 1, 0], m[..., 0, 2] + m[..., 2, 0]], -1),
        np.stack([m[..., 0, 2] - m[..., 2, 0], m[..., 0, 1] + m[..., 1, 0], 1 + 2 * m[..., 1, 1] - tr, m[..., 1, 2] + m[..., 2, 1]], -1),
        np.stack([m[..., 1, 0] - m[..., 0, 1], m[..., 0, 2] + m[..., 2, 0], m[..., 1, 2] + m[..., 2, 1], 1 + 2 * m[..., 2, 2] - tr], -1),
    ], -2)  # [...,4,4]: row k is 4 q q_k (numerically best where q_k is largest)
    diag = np.stack([tr, m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]], -1)
    best = np.argmax(diag, axis=-1)
    q = np.take_along_axis(cands, best[..., None, None], axis=-2)[..., 0, :]
    q = q / np.linalg.norm(q, axis=-1, keepdims=True)
    return np.where(q[..., :1] < 0, -q, q)


def continuous_quaternions(q: np.ndarray) -> np.ndarray:
    """Flip signs along time (axis 0) so consecutive quaternions never jump to the antipode
    (q and -q are the same rotation; interpolating between them spins the bone around)."""
    q = np.array(q, np.float64)
    if len(q) < 2:
        return q
    dots = np.sum(q[1:] * q[:-1], axis=-1)
    flips = np.concatenate([np.ones((1,) + dots.shape[1:]), np.where(dots < 0, -1.0, 1.0)])
    return q * np.cumprod(flips, axis=0)[..., None]
