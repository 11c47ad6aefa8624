# SPDX-License-Identifier: GPL-3.0-or-later
"""Relative depth (Sapiens v1) -> a plausible camera-frame Z, for building only (metric=false).

Sapiens v1 depth is trained on the per-image foreground depth min-max normalised to [0, 1]
(larger = farther; sapiens.md 2.4), so it has neither scale nor offset. We place the surface so
the mesh comes out human-sized:
1. t = the prediction normalised over the people (2nd..98th percentile -> 0..1, clipped);
2. the nominal distance D0 puts person 1 (largest) at the distance where a NOMINAL_HEIGHT_M tall
   person spans its mask height in pixels with the given focal length: D0 = fy * H_m / h_px,
   clamped to [MIN_DISTANCE_M, MAX_DISTANCE_M];
3. Z = D0 + (t - 0.5) * RELIEF_M: the body's front-to-back relief spans RELIEF_M.
The result is a guess of scale, documented as such: ``metric`` stays false.
"""

from __future__ import annotations

import numpy as np

NOMINAL_HEIGHT_M = 1.7
RELIEF_M = 0.5
MIN_DISTANCE_M = 0.5
MAX_DISTANCE_M = 15.0


def nominal_distance(people: np.ndarray, focal_y: float) -> float:
    rows = np.nonzero((people == 1).any(axis=1))[0]
    if rows.size == 0:
        return 3.0
    height_px = float(rows[-1] - rows[0] + 1)
    return float(np.clip(focal_y * NOMINAL_HEIGHT_M / height_px, MIN_DISTANCE_M, MAX_DISTANCE_M))


def relative_depth_to_z(relative: np.ndarray, people: np.ndarray, focal_y: float) -> np.ndarray:
    """float32 Z [H,W] on the people, NaN elsewhere (and where the prediction is not finite)."""
    rel = np.asarray(relative, np.float32)
    fg = (np.asarray(people) > 0) & np.isfinite(rel)
    z = np.full(rel.shape, np.nan, np.float32)
    if not fg.any():
        return z
    lo, hi = np.percentile(rel[fg], [2.0, 98.0])
    span = hi - lo if hi - lo > 1e-6 else 1.0
    t = np.clip((rel - lo) / span, 0.0, 1.0)
    d0 = nominal_distance(people, focal_y)
    z[fg] = (d0 + (t[fg] - 0.5) * RELIEF_M).astype(np.float32)
    return z
