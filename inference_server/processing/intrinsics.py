# SPDX-License-Identifier: GPL-3.0-or-later
"""Pinhole intrinsics of the maps' pixel grid: fitted from a pointmap, or a documented default.

Pixel centres sit at integer + 0.5 (docs/maps_format.md), so column c has u = c + 0.5.
"""

from __future__ import annotations

import numpy as np

# Default focal length as a fraction of the image's long side: Sapiens2's pointmap training camera
# (canonical focal 768 px for a 1024x768 input, i.e. 0.75 x long side, ~67 deg across the long
# side), which is also close to a phone's main camera (26 mm equivalent ~ 0.72 x long side).
DEFAULT_FOCAL_PER_LONG_SIDE = 0.75
MIN_FIT_POINTS = 32


def default_intrinsics(height: int, width: int, focal_per_long_side: float = DEFAULT_FOCAL_PER_LONG_SIDE):
    """K [3,3] float32 with square pixels and the principal point at the image centre."""
    f = focal_per_long_side * max(height, width)
    return np.array([[f, 0.0, width / 2.0], [0.0, f, height / 2.0], [0.0, 0.0, 1.0]], np.float32)


def points_from_depth(depth: np.ndarray, k: np.ndarray, dtype=np.float32) -> np.ndarray:
    """Camera-frame XYZ [H,W,3] of each pixel centre (c + 0.5, r + 0.5) of a Z-depth map [H,W]
    (docs/maps_format.md): the server's one back-projection (the pipeline's pointmap, the fit's
    observed surface)."""
    h, w = depth.shape
    k = np.asarray(k, np.float64)
    z = np.asarray(depth, dtype)
    u = np.arange(w, dtype=dtype) + 0.5
    v = np.arange(h, dtype=dtype) + 0.5
    x = (u[None, :] - dtype(k[0, 2])) * z / dtype(k[0, 0])
    y = (v[:, None] - dtype(k[1, 2])) * z / dtype(k[1, 1])
    return np.stack([x, y, z], -1).astype(dtype, copy=False)


def fit_intrinsics(pointmap: np.ndarray, valid: np.ndarray | None = None):
    """Least-squares K from camera-frame points [H,W,3]: u = fx * X/Z + cx, v = fy * Y/Z + cy.

    Returns (K float32 [3,3], rms reprojection error in pixels) or (None, nan) when there are too
    few usable points or no spread to fit a focal length. Each axis is a line fit, solved in
    closed form (centred normal equations, float64): the same solution as a general least-squares
    solver, in a few passes over the masked pixels instead of a copy of the whole pointmap.
    """
    pts = np.asarray(pointmap)
    if pts.dtype not in (np.float32, np.float64):
        pts = pts.astype(np.float64)
    x, y, z = pts[..., 0], pts[..., 1], pts[..., 2]
    with np.errstate(invalid="ignore"):
        ok = (z > 1e-6) & np.isfinite(z) & np.isfinite(x) & np.isfinite(y)  # NaN > 1e-6 is False
    if valid is not None:
        ok &= np.asarray(valid, bool)
    if np.count_nonzero(ok) < MIN_FIT_POINTS:
        return None, float("nan")
    rows, cols = np.nonzero(ok)
    z_ok = z[ok].astype(np.float64)
    fits = []
    for ray, pix in ((x[ok] / z_ok, cols + 0.5), (y[ok] / z_ok, rows + 0.5)):
        fit = _line_fit(ray, pix)
        if fit is None:
            return None, float("nan")
        fits.append(fit)
    (fx, cx, ru2), (fy, cy, rv2) = fits
    if not (fx > 0 and fy > 0):
        return None, float("nan")
    rms = float(np.sqrt((ru2 + rv2) / len(rows)))
    k = np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]], np.float32)
    return k, rms


def _line_fit(ray: np.ndarray, pix: np.ndarray):
    """(slope, intercept, sum of squared residuals) of pix ~ slope * ray + intercept; None when
    ray has no spread (std < 1e-6)."""
    n = len(ray)
    mean_ray = ray.mean()
    centred = ray - mean_ray
    spread = float(centred @ centred)
    if np.sqrt(spread / n) < 1e-6:
        return None
    mean_pix = pix.mean()
    slope = float(centred @ pix) / spread  # sum(centred) = 0: no need to centre pix
    intercept = mean_pix - slope * mean_ray
    resid = pix - (slope * ray + intercept)
    return slope, float(intercept), float(resid @ resid)
