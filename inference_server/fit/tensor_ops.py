# SPDX-License-Identifier: GPL-3.0-or-later
"""Small torch helpers the fit's terms share (solver, problem, motion)."""

import numpy as np
import torch


def to_numpy64(x: torch.Tensor) -> np.ndarray:
    """float64 numpy copy of a tensor on any device (the closed-form steps are numpy)."""
    return x.detach().double().cpu().numpy()


def charbonnier(x: torch.Tensor, eps: float) -> torch.Tensor:
    """Robust cost: quadratic near 0, linear far away (outliers pull gently)."""
    return torch.sqrt(x * x + eps * eps) - eps


def keypoint_cost(px: torch.Tensor, keypoints: torch.Tensor, weights: torch.Tensor, scale) -> torch.Tensor:
    """Per keypoint [..., J]: the score-weighted, robust (Charbonnier) reprojection error, in %
    of the person's size ``scale`` (px)."""
    return weights * charbonnier((px - keypoints).norm(dim=-1) / scale * 100.0, 1.0)


def pinhole(x: torch.Tensor, fx, fy, cx, cy) -> torch.Tensor:
    """Camera-frame points [..., 3] -> pixels [..., 2] (depth held off zero: a body point behind
    the camera must not blow the terms up)."""
    z = x[..., 2:3].clamp_min(0.05)
    return torch.cat([fx * x[..., :1] / z + cx, fy * x[..., 1:2] / z + cy], -1)


def rescaled_depth(points: torch.Tensor, scale, shift) -> torch.Tensor:
    """Relative depth's points [..., 3] moved along their rays to the depth ``z * scale + shift``
    (the scale and shift the fit solves for)."""
    z = points[..., 2]
    return points * ((z * scale + shift) / z.clamp_min(1e-6))[..., None]


def vertex_normals(v: torch.Tensor, faces: torch.Tensor) -> torch.Tensor:
    a, b, c = v[faces[:, 0]], v[faces[:, 1]], v[faces[:, 2]]
    fn = torch.linalg.cross(b - a, c - a)
    n = torch.zeros_like(v)
    for i in range(3):
        n = n.index_add(0, faces[:, i], fn)
    return n / n.norm(dim=-1, keepdim=True).clamp_min(1e-12)
