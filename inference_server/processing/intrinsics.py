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


def fit_intrinsics(pointmap: np.ndarray, valid: np.ndarray | None = None):
    """Least-squares K from camera-frame points [H,W,3]: u = fx * X/Z + cx, v = fy * Y/Z + cy.

    Returns (K float32 [3,3], rms reprojection error in pixels) or (None, nan) when there are too
    few usable points or no spread to fit a focal length.
    """
    pts = np.asarray(pointmap, np.float64)
    h, w = pts.shape[:2]
    z = pts[..., 2]
    ok = np.isfinite(pts).all(-1) & (z > 1e-6)
    if valid is not None:
        ok &= np.asarray(valid, bool)
    if ok.sum() < MIN_FIT_POINTS:
        return None, float("nan")
    rows, cols = np.nonzero(ok)
    a = pts[rows, cols, 0] / z[rows, cols]
    b = pts[rows, cols, 1] / z[rows, cols]
    u = cols + 0.5
    v = rows + 0.5
    fits = []
    for ray, pix in ((a, u), (b, v)):
        if np.std(ray) < 1e-6:
            return None, float("nan")
        design = np.stack([ray, np.ones_like(ray)], -1)
        (f, c), *_ = np.linalg.lstsq(design, pix, rcond=None)
        fits.append((f, c, pix - (f * ray + c)))
    (fx, cx, ru), (fy, cy, rv) = fits
    if not (fx > 0 and fy > 0):
        return None, float("nan")
    rms = float(np.sqrt(np.mean(ru**2 + rv**2)))
    k = np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]], np.float32)
    return k, rms
