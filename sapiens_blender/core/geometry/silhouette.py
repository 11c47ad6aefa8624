# SPDX-License-Identifier: GPL-3.0-or-later
"""Silhouette measurements on numpy: widths across a limb and a Euclidean distance transform."""

from __future__ import annotations

import numpy as np


def widths_across(inside: np.ndarray, centres: np.ndarray, directions: np.ndarray,
                  max_px: float, step: float = 0.5, depth: np.ndarray | None = None,
                  focal: float | None = None, slack_m: float = 0.04) -> np.ndarray:
    """Silhouette width (px) through each centre, across its direction (vectorised over both).

    ``inside`` is a bool [H,W] region; ``centres`` [J,2] are (x, y) pixel coordinates and
    ``directions`` [J,2] the limb directions (x, y). Walks both ways along the perpendicular
    until the first sample outside ``inside`` (or the image); the width is the sum of both walks.
    A centre that is itself outside gives 0.

    With ``depth`` (and ``focal``), the walk also stops where the depth departs from the
    centre's by more than 1.5x the distance walked (in metres) plus ``slack_m``: across a round
    limb the depth changes no faster than the distance walked, so a bigger step is another
    surface (a forearm lying in front of the torso, both labelled as the same clothing).
    """
    centres = np.asarray(centres, np.float64).reshape(-1, 2)
    d = np.asarray(directions, np.float64).reshape(-1, 2)
    norm = np.linalg.norm(d, axis=1, keepdims=True)
    d = np.where(norm > 1e-9, d / np.maximum(norm, 1e-9), np.array([[0.0, 1.0]]))
    perp = np.stack([-d[:, 1], d[:, 0]], axis=1)
    ts = np.arange(0.0, max_px + step, step)
    h, w = inside.shape
    total = np.zeros(len(centres))
    for sign in (1.0, -1.0):
        pts = centres[:, None, :] + sign * ts[None, :, None] * perp[:, None, :]  # [J,T,2]
        col = np.floor(pts[..., 0]).astype(np.int64)
        row = np.floor(pts[..., 1]).astype(np.int64)
        ok = (row >= 0) & (row < h) & (col >= 0) & (col < w)
        hit = np.zeros(ok.shape, bool)
        hit[ok] = inside[row[ok], col[ok]]
        if depth is not None:
            z = np.full(ok.shape, np.nan)
            z[ok] = depth[row[ok], col[ok]]
            zc = z[:, :1]
            with np.errstate(invalid="ignore"):
                hit &= np.abs(z - zc) <= 1.5 * ts[None, :] * zc / focal + slack_m
        # First sample that leaves the region; a run that never leaves counts as max_px.
        leaves = ~hit
        first = np.where(leaves.any(axis=1), leaves.argmax(axis=1), len(ts))
        total += np.where(first > 0, ts[np.minimum(first, len(ts) - 1)] - step / 2, 0.0)
        total = np.where(hit[:, 0], total, 0.0)
    return np.maximum(total, 0.0)


def distance_transform(inside: np.ndarray) -> np.ndarray:
    """Exact Euclidean distance (px) from each inside pixel centre to the nearest outside one.

    Separable: exact 1-D distances along rows, then a column pass over offsets that stops as soon
    as no pixel can improve (offset^2 exceeds the largest current value). Outside pixels are 0;
    the image border counts as outside.
    """
    inside = np.asarray(inside, bool)
    h, w = inside.shape
    big = float(h + w + 2)
    # Row pass: distance to the nearest outside pixel in the same row (border = outside).
    idx = np.arange(w, dtype=np.float64)[None, :].repeat(h, axis=0)
    last_out = np.where(~inside, idx, -np.inf)
    last_out = np.maximum.accumulate(np.concatenate([np.full((h, 1), -1.0), last_out], axis=1), axis=1)[:, 1:]
    next_out = np.where(~inside, idx, np.inf)
    next_out = np.minimum.accumulate(
        np.concatenate([next_out, np.full((h, 1), float(w))], axis=1)[:, ::-1], axis=1)[:, ::-1][:, :-1]
    g = np.minimum(idx - last_out, next_out - idx)
    g = np.minimum(g, big)
    g2 = g * g
    # Column pass: D(r) = min_k g2(r+k) + k^2, stopping once k^2 > max D.
    best = g2.copy()
    k = 1
    while k < h and k * k < best.max():
        kk = float(k * k)
        best[:-k] = np.minimum(best[:-k], g2[k:] + kk)
        best[k:] = np.minimum(best[k:], g2[:-k] + kk)
        k += 1
    # Rows beyond the top/bottom border are outside too.
    r = np.arange(h, dtype=np.float64)[:, None]
    best = np.minimum(best, np.minimum(r + 1, h - r) ** 2)
    return np.where(inside, np.sqrt(best), 0.0)
