# SPDX-License-Identifier: GPL-3.0-or-later
"""Scores of a scanned body from viewpoints the scan never had (test-only): the true body and the
scanned one rendered (numpy rasteriser, z-buffered) from cameras between and above the input
views; silhouette IoU and colour error (mean absolute, 0-255, after one gain per channel)."""

from __future__ import annotations

import numpy as np

from sapiens_blender.core.body.surface import project, rasterize

SIZE = (240, 180)


def camera(azimuth_deg: float, elevation_deg: float, centre: np.ndarray, distance: float = 3.0):
    """A function moving first-camera-frame points into a camera turned ``azimuth`` round the
    body's vertical axis (the camera frame's y) through ``centre`` and raised by ``elevation``."""
    a, e = np.radians(azimuth_deg), np.radians(elevation_deg)
    turn = np.array([[np.cos(a), 0, -np.sin(a)], [0, 1, 0], [np.sin(a), 0, np.cos(a)]])
    # Raised: the camera looks down, so the body tips towards it about the camera's x axis.
    tilt = np.array([[1, 0, 0], [0, np.cos(e), np.sin(e)], [0, -np.sin(e), np.cos(e)]])
    r = tilt @ turn

    def move(p):
        return (np.asarray(p, np.float64) - centre) @ r.T + np.array([0.0, 0.0, distance])
    return move


def _intrinsics(size=SIZE, distance: float = 3.0) -> np.ndarray:
    h, w = size
    f = 0.85 * (h / 2) * distance / 1.15
    return np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1.0]])


def _raster(vertices, faces, k, size):
    """Per pixel the nearest (face, barycentrics): (mask [H,W], face [H,W], bary [H,W,3])."""
    h, w = size
    v = np.asarray(vertices, np.float64)
    f = np.asarray(faces, np.int64)
    rows, cols, face, bary = rasterize(project(v, k)[f], w, h)
    # perspective-correct enough at 3 m: barycentrics of the projection
    z = np.einsum("nk,nk->n", bary, v[f[face], 2])
    order = np.lexsort((z, rows * w + cols))
    pix = (rows * w + cols)[order]
    first = np.ones(len(pix), bool)
    first[1:] = pix[1:] != pix[:-1]
    keep = order[first]
    mask = np.zeros(h * w, bool)
    out_face = np.zeros(h * w, np.int64)
    out_bary = np.zeros((h * w, 3))
    p = rows[keep] * w + cols[keep]
    mask[p], out_face[p], out_bary[p] = True, face[keep], bary[keep]
    return mask.reshape(h, w), out_face.reshape(h, w), out_bary.reshape(h, w, 3)


def render_truth(vertices, faces, vertex_colours, k, size=SIZE):
    mask, face, bary = _raster(vertices, faces, k, size)
    col = np.einsum("hwk,hwkc->hwc", bary, np.asarray(vertex_colours)[np.asarray(faces)[face]])
    return mask, col


def render_textured(vertices, faces, uv, face_uv, texture, k, size=SIZE):
    mask, face, bary = _raster(vertices, faces, k, size)
    t = np.einsum("hwk,hwkc->hwc", bary, np.asarray(uv, np.float64)[np.asarray(face_uv)[face]])
    s = texture.shape[0]
    col = np.clip((t[..., 0] * s).astype(int), 0, s - 1)
    row = np.clip(((1.0 - t[..., 1]) * s).astype(int), 0, s - 1)
    return mask, texture[row, col].astype(np.float64)


def compare(truth, fitted) -> dict:
    """IoU of the silhouettes, colour error after one gain per channel on their overlap."""
    (tm, tc), (fm, fc) = truth, fitted
    both = tm & fm
    iou = both.sum() / max((tm | fm).sum(), 1)
    t, f = tc[both], fc[both]
    gain = (t * f).sum(0) / np.maximum((f * f).sum(0), 1e-9)
    return {"iou": float(iou), "colour": float(np.abs(t - f * gain).mean())}


VIEWPOINTS = ((15.0, 0.0), (105.0, 0.0), (195.0, 0.0), (285.0, 0.0), (60.0, 30.0), (240.0, 30.0), (180.0, 0.0))
BACK = (180.0, 0.0)


def score_views(truth_vertices, truth_faces, truth_colours, fit_vertices, faces, uv, face_uv, texture,
                viewpoints=VIEWPOINTS) -> dict:
    """Per viewpoint (azimuth, elevation) its IoU and colour error; 'back' is azimuth 180."""
    centre = 0.5 * (truth_vertices.min(0) + truth_vertices.max(0))
    k = _intrinsics()
    out = {}
    for az, el in viewpoints:
        move = camera(az, el, centre)
        out[(az, el)] = compare(render_truth(move(truth_vertices), truth_faces, truth_colours, k),
                                render_textured(move(fit_vertices), faces, uv, face_uv, texture, k))
    return out
