# SPDX-License-Identifier: GPL-3.0-or-later
"""Point sets and directions laid onto others, numpy: the rotation (Kabsch), the rotation, scale
and shift (Umeyama), and the smallest turn between two directions. Stateless kernels shared by
the fit's closed-form start, its learned lifting and the real-photo benchmark's scoring."""

from __future__ import annotations

import numpy as np


def kabsch(src: np.ndarray, dst: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rotation R and translation t minimising |R src + t - dst| (rows are points)."""
    cs, cd = src.mean(0), dst.mean(0)
    u, _, vt = np.linalg.svd((src - cs).T @ (dst - cd))
    d = np.sign(np.linalg.det(vt.T @ u.T))
    r = vt.T @ np.diag([1, 1, d]) @ u.T
    return r, cd - r @ cs


def similarity_onto(src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """``src`` [N,3] moved onto ``dst`` by the best rotation, scale and shift (no reflection)."""
    ms, md = src.mean(0), dst.mean(0)
    p, t = src - ms, dst - md
    u, s, vt = np.linalg.svd(p.T @ t)
    d = np.ones(3)
    d[2] = np.sign(np.linalg.det(u @ vt)) or 1.0
    scale = float((s * d).sum() / max((p ** 2).sum(), 1e-30))
    return scale * p @ (u @ np.diag(d) @ vt) + md


def rotation_between(u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The smallest rotation taking direction u to direction v (no twist about either)."""
    u = u / max(np.linalg.norm(u), 1e-12)
    v = v / max(np.linalg.norm(v), 1e-12)
    axis = np.cross(u, v)
    s, c = np.linalg.norm(axis), float(np.dot(u, v))
    if s < 1e-9:
        return np.eye(3)  # parallel (or exactly opposite: left to the solver)
    k = axis / s
    kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
    return np.eye(3) + s * kx + (1 - c) * (kx @ kx)
