# SPDX-License-Identifier: GPL-3.0-or-later
"""A fitted body against its photo (numpy only): mesh helpers, a harmonic continuation over the
mesh, which vertices the camera sees, the photo's observed surface and each triangle's part.
The texture baked from them is ``texture``; the ``clothed`` layer (the photo's clothing and hair
carried onto the body) is ``dressing``.

Everything here works on one person's posed body in the camera frame (OpenCV, metres).
"""

from __future__ import annotations

import numpy as np

from ..geometry.surface import unproject
from ..maps.canonical import Maps

# Classes whose observed surface lies outside the body (never inside): the clothed layer's.
DRESSED_CLASSES = frozenset({"Apparel", "Upper_Clothing", "Lower_Clothing", "Hair", "Left_Shoe", "Right_Shoe",
                             "Left_Sock", "Right_Sock"})
MAX_THICKNESS = 0.12  # m: an observed surface farther out than this belongs to something else
OCCLUSION_TOLERANCE = 0.015  # m: a point this close behind the nearest body surface still counts as seen
FACING_MIN = 0.05  # cosine: surfaces seen this edge-on give no reliable photo pixel
RASTER_CHUNK = 4_000_000  # candidate pixels per rasteriser pass (bounds memory)


# --- mesh helpers ------------------------------------------------------------------------------
def face_normals(vertices, faces) -> np.ndarray:
    """Triangle normals [F,3], twice the area long (outward for counter-clockwise faces)."""
    v = np.asarray(vertices, np.float64)
    f = np.asarray(faces, np.int64)
    return np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])


def vertex_normals(vertices: np.ndarray, faces: np.ndarray) -> np.ndarray:
    """Area-weighted unit vertex normals [V,3] (outward for counter-clockwise faces)."""
    v = np.asarray(vertices, np.float64)
    f = np.asarray(faces, np.int64)
    face_n = face_normals(v, f)
    out = np.zeros_like(v)
    for k in range(3):
        for axis in range(3):
            out[:, axis] += np.bincount(f[:, k], face_n[:, axis], minlength=len(v))
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-12)


def mesh_edges(faces: np.ndarray) -> np.ndarray:
    """Unique undirected edges [E,2] of a triangle mesh."""
    f = np.asarray(faces, np.int64)
    e = np.sort(np.concatenate([f[:, [0, 1]], f[:, [1, 2]], f[:, [2, 0]]]), axis=1)
    # One int64 key per edge: a 1-D unique is ~10x faster than unique(axis=0) on rows, the
    # same edges in the same order (a body build reads the edges four times).
    n = int(f.max()) + 1 if f.size else 1
    keys = np.unique(e[:, 0] * n + e[:, 1])
    return np.stack([keys // n, keys % n], 1)


def _neighbour_sum(values: np.ndarray, edges: np.ndarray, n: int) -> np.ndarray:
    """Per vertex, the sum of its neighbours' ``values`` ([V] or [V,C], column by column)."""
    if values.ndim == 2:
        return np.stack([_neighbour_sum(values[:, c], edges, n) for c in range(values.shape[1])], 1)
    return (np.bincount(edges[:, 0], values[edges[:, 1]], minlength=n)
            + np.bincount(edges[:, 1], values[edges[:, 0]], minlength=n))


def continuation(values: np.ndarray, fixed: np.ndarray, edges: np.ndarray, iterations: int):
    """(values, reached): the harmonic continuation of ``values`` ([V] or [V,C]) from the ``fixed``
    vertices over the mesh graph ``edges``. Free vertices start from their nearest fixed
    neighbours (a front grown one ring per pass), then relax to the mean of their neighbours
    (Jacobi) ``iterations`` times; ``reached`` [V] is False on pieces of the graph with no fixed
    vertex (their values are 0)."""
    n = len(values)
    col = (slice(None),) + (None,) * (np.ndim(values) - 1)  # broadcasts a [V] mask over channels
    d = np.where(fixed[col], values, 0.0).astype(np.float64)
    filled = fixed.copy()
    edges = edges[~fixed[edges[:, 0]] | ~fixed[edges[:, 1]]]  # a free vertex's edges are all it reads
    while fixed.any() and not filled.all():
        total = _neighbour_sum(np.where(filled[col], d, 0.0), edges, n)
        count = _neighbour_sum(filled.astype(np.float64), edges, n)
        grow = ~filled & (count > 0)
        if not grow.any():
            break  # the rest of the graph has no fixed vertex
        d[grow] = total[grow] / count[grow][(slice(None),) + col[1:]]
        filled |= grow
    degree = np.maximum(np.bincount(edges.ravel(), minlength=n), 1).astype(np.float64)[col]
    free = (~fixed & filled)[col]
    for _ in range(iterations):
        d = np.where(free, _neighbour_sum(d, edges, n) / degree, d)
    return d, filled


def diffuse(values: np.ndarray, fixed: np.ndarray, edges: np.ndarray, iterations: int) -> np.ndarray:
    """``continuation``'s values alone (0 where no fixed vertex is reached)."""
    return continuation(values, fixed, edges, iterations)[0]


# --- rasterisation -----------------------------------------------------------------------------
def rasterize(tri_xy: np.ndarray, width: int, height: int):
    """Pixel centres (col + 0.5, row + 0.5) covered by each 2D triangle [F,3,2].

    Returns (rows, cols, face index, barycentrics [N,3]) for every covered (pixel, triangle);
    a pixel covered by several triangles appears once per triangle. Vectorised: each triangle's
    bounding box is expanded into candidate pixels in chunks, then kept by its edge functions.
    """
    tri = np.asarray(tri_xy, np.float64)
    lo = np.ceil(tri.min(axis=1) - 0.5).astype(np.int64)
    hi = np.floor(tri.max(axis=1) - 0.5).astype(np.int64)
    lo = np.maximum(lo, 0)
    hi = np.minimum(hi, [width - 1, height - 1])
    nx, ny = hi[:, 0] - lo[:, 0] + 1, hi[:, 1] - lo[:, 1] + 1
    a, b, c = tri[:, 0], tri[:, 1], tri[:, 2]
    area = (b[:, 0] - a[:, 0]) * (c[:, 1] - a[:, 1]) - (b[:, 1] - a[:, 1]) * (c[:, 0] - a[:, 0])
    live = np.flatnonzero((nx > 0) & (ny > 0) & (np.abs(area) > 1e-12))
    counts = (nx * ny)[live]
    out = ([], [], [], [])
    splits = np.searchsorted(np.cumsum(counts), np.arange(RASTER_CHUNK, max(counts.sum(), 1), RASTER_CHUNK))
    for faces in np.split(live, splits):  # chunks of about RASTER_CHUNK candidate pixels
        if not len(faces):
            continue
        cnt = nx[faces] * ny[faces]
        face = np.repeat(faces, cnt)
        local = np.arange(cnt.sum()) - np.repeat(np.cumsum(cnt) - cnt, cnt)
        col = lo[face, 0] + local % nx[face]
        row = lo[face, 1] + local // nx[face]
        px, py = col + 0.5, row + 0.5
        fa, fb, fc, far = a[face], b[face], c[face], area[face]
        w0 = ((fb[:, 0] - px) * (fc[:, 1] - py) - (fb[:, 1] - py) * (fc[:, 0] - px)) / far
        w1 = ((fc[:, 0] - px) * (fa[:, 1] - py) - (fc[:, 1] - py) * (fa[:, 0] - px)) / far
        w2 = 1.0 - w0 - w1
        inside = (w0 >= -1e-9) & (w1 >= -1e-9) & (w2 >= -1e-9)
        out[0].append(row[inside])
        out[1].append(col[inside])
        out[2].append(face[inside])
        out[3].append(np.stack([w0, w1, w2], 1)[inside])
    if not out[0]:
        return np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros(0, np.int64), np.zeros((0, 3))
    return tuple(np.concatenate(x) for x in out)


def project(points: np.ndarray, intrinsics: np.ndarray) -> np.ndarray:
    """Camera-frame points [N,3] -> pixel coordinates [N,2] (x right, y down; centres at +0.5)."""
    k = np.asarray(intrinsics, np.float64)
    p = np.asarray(points, np.float64)
    z = np.where(np.abs(p[:, 2]) < 1e-9, 1e-9, p[:, 2])
    return np.stack([k[0, 0] * p[:, 0] / z + k[0, 2], k[1, 1] * p[:, 1] / z + k[1, 2]], 1)


def depth_buffer(vertices: np.ndarray, faces: np.ndarray, intrinsics, width: int, height: int) -> np.ndarray:
    """Nearest depth [H,W] of the mesh per pixel (inf where it does not cover the pixel)."""
    v = np.asarray(vertices, np.float64)
    f = np.asarray(faces, np.int64)
    xy = project(v, intrinsics)
    front = (v[f, 2] > 1e-3).all(axis=1)
    rows, cols, face, bary = rasterize(xy[f[front]], width, height)
    z = np.einsum("nk,nk->n", bary, v[f[front][face], 2])
    zbuf = np.full(height * width, np.inf)
    np.minimum.at(zbuf, rows * width + cols, z)
    return zbuf.reshape(height, width)


# --- visibility --------------------------------------------------------------------------------
def visible_vertices(vertices, faces, normals, intrinsics, width, height, zbuf=None) -> tuple[np.ndarray, np.ndarray]:
    """(seen [V] bool, pixel [V,2] row/col) for the camera: facing it, inside the image, and not
    behind the body's own nearer surface."""
    v = np.asarray(vertices, np.float64)
    if zbuf is None:
        zbuf = depth_buffer(v, faces, intrinsics, width, height)
    xy = project(v, intrinsics)
    col, row = np.floor(xy[:, 0]).astype(np.int64), np.floor(xy[:, 1]).astype(np.int64)
    inside = (v[:, 2] > 1e-3) & (col >= 0) & (col < width) & (row >= 0) & (row < height)
    view = -v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    facing = np.einsum("ij,ij->i", normals, view) > FACING_MIN
    r, c = row.clip(0, height - 1), col.clip(0, width - 1)
    unoccluded = v[:, 2] <= zbuf[r, c] + OCCLUSION_TOLERANCE
    return inside & facing & unoccluded, np.stack([r, c], 1)


# --- the photo's surface -----------------------------------------------------------------------
def observed_points(maps: Maps) -> np.ndarray | None:
    """Camera-frame points [H,W,3] of the photo's surface (NaN where unknown), or None."""
    if maps.pointmap is not None:
        return np.asarray(maps.pointmap, np.float64)
    depth = np.asarray(maps.depth, np.float64)
    if not np.isfinite(depth).any():
        return None
    h, w = depth.shape
    return unproject(np.arange(h)[:, None], np.arange(w)[None, :], depth, maps.intrinsics)


# --- parts -------------------------------------------------------------------------------------
def face_parts(faces: np.ndarray, vertex_parts: np.ndarray) -> np.ndarray:
    """A part per triangle: the part two of its corners share, else the first corner's."""
    vp = np.asarray(vertex_parts)[np.asarray(faces, np.int64)]
    return np.where(vp[:, 1] == vp[:, 2], vp[:, 1], vp[:, 0])
