# SPDX-License-Identifier: GPL-3.0-or-later
"""Visible-surface mesh of one person from the canonical maps (numpy only).

One vertex per masked pixel on a grid of the chosen stride; each 2x2 block of grid pixels gives
two triangles split along the diagonal with the smaller depth difference (fewer slivers on
creases). A triangle is dropped when one of its edges jumps in depth by more than ``max_jump``
pixel footprints (Z * stride / f, x sqrt(2) on diagonals): that is a depth discontinuity (an arm
in front of the torso), not a surface. Vertices are unprojected from the pixel centre through the
intrinsics, so every vertex falls exactly on the pixel it came from.
"""

from __future__ import annotations

import numpy as np

from ..maps.canonical import Maps
from .components import face_components
from .parts import face_parts_from_grid, vertex_parts_from_faces
from .types import GeometryError, SurfaceMesh

DEFAULT_MAX_JUMP = 6.0  # footprints; a 80 deg slope is 5.7 footprints, so real surfaces pass


def erode(mask: np.ndarray, pixels: int) -> np.ndarray:
    """Binary erosion by a (2p+1)^2 square: drops the blended silhouette rim of network maps."""
    out = np.asarray(mask, bool).copy()
    for _ in range(int(pixels)):
        inner = out.copy()
        inner[1:, :] &= out[:-1, :]
        inner[:-1, :] &= out[1:, :]
        inner[:, 1:] &= out[:, :-1]
        inner[:, :-1] &= out[:, 1:]
        inner[0, :] = inner[-1, :] = False
        inner[:, 0] = inner[:, -1] = False
        out = inner
    return out


def person_depth(maps: Maps, person_id: int, erode_px: int = 0) -> np.ndarray:
    """Camera-frame Z [H,W] of the person's pixels (NaN elsewhere); pointmap Z when present."""
    if person_id not in maps.person_ids:
        raise GeometryError(f"person {person_id} is not in the mask (people: {maps.person_ids})")
    z = maps.depth
    if maps.pointmap is not None:
        pz = maps.pointmap[..., 2]
        z = np.where(np.isfinite(pz), pz, z)
    person = maps.mask == person_id
    if erode_px > 0:
        person = erode(person, erode_px)
    z = np.where(person & np.isfinite(z) & (z > 0), z, np.nan)
    return z.astype(np.float32)


def unproject(rows: np.ndarray, cols: np.ndarray, z: np.ndarray, intrinsics: np.ndarray) -> np.ndarray:
    """Camera-frame XYZ [...,3] of pixel centres (row, col) at Z depth (float64): the one depth ->
    3D of the add-on. Broadcasts: a point list (rows, cols, z [N]) or a whole depth map
    (rows [H,1], cols [1,W], z [H,W] -> [H,W,3])."""
    k = np.asarray(intrinsics, np.float64)
    z = np.asarray(z, np.float64)
    x = (np.asarray(cols, np.float64) + 0.5 - k[0, 2]) * z / k[0, 0]
    y = (np.asarray(rows, np.float64) + 0.5 - k[1, 2]) * z / k[1, 1]
    return np.stack([x, y, z], axis=-1)


def reproject(points_cam: np.ndarray, intrinsics: np.ndarray) -> np.ndarray:
    """Pixel coordinates [...,2] (x, y; pixel centres at +0.5) of camera-frame points [...,3]."""
    p = np.asarray(points_cam, np.float64)
    k = np.asarray(intrinsics, np.float64)
    z = p[..., 2]
    return np.stack([k[0, 0] * p[..., 0] / z + k[0, 2], k[1, 1] * p[..., 1] / z + k[1, 2]], axis=-1)


def build_surface_mesh(
    maps: Maps,
    person_id: int,
    stride: int = 1,
    max_jump: float = DEFAULT_MAX_JUMP,
    min_island: int | None = None,
    erode_px: int = 0,
) -> SurfaceMesh:
    """Triangle mesh of the person's visible surface, camera frame, metres.

    ``min_island``: connected pieces with fewer vertices are removed (default: 0.2 % of the
    person's vertices, at least 10). ``erode_px``: shrink the mask first (network maps blend
    foreground and background on the silhouette, giving "flying" rim vertices). ``mesh.report``
    says what was dropped.
    """
    if stride < 1:
        raise GeometryError(f"stride must be >= 1, got {stride}")
    if erode_px < 0:
        raise GeometryError(f"erode_px must be >= 0, got {erode_px}")
    z_full = person_depth(maps, person_id, erode_px)
    rows = np.arange(0, maps.height, stride)
    cols = np.arange(0, maps.width, stride)
    z = z_full[rows[:, None], cols[None, :]]
    valid = np.isfinite(z)
    n_valid = int(valid.sum())
    if n_valid < 3:
        raise GeometryError(f"person {person_id} has no usable depth (only {n_valid} pixels at stride {stride})")
    gh, gw = z.shape
    idx = np.full((gh, gw), -1, np.int64)
    idx[valid] = np.arange(n_valid)

    tri, quad_of_tri, n_jump = _grid_triangles(idx, z, maps.intrinsics, stride, max_jump)
    # Keep only referenced vertices, then drop small islands.
    used = np.zeros(n_valid, bool)
    used[tri.ravel()] = True
    labels = face_components(n_valid, tri)
    sizes = np.bincount(labels[used], minlength=n_valid)
    if min_island is None:
        min_island = max(10, int(0.002 * n_valid))
    small = sizes[labels] < min_island
    keep_face = ~small[tri[:, 0]]
    islands_removed = int(np.count_nonzero((sizes > 0) & (sizes < min_island)))
    tri, quad_of_tri = tri[keep_face], quad_of_tri[keep_face]
    keep_vertex = np.zeros(n_valid, bool)
    keep_vertex[tri.ravel()] = True
    remap = np.full(n_valid, -1, np.int64)
    remap[keep_vertex] = np.arange(int(keep_vertex.sum()))
    faces = remap[tri].astype(np.int32)
    if len(faces) == 0:
        raise GeometryError(
            f"person {person_id}: no surface left ({n_valid} pixels with depth at stride {stride}, "
            f"{n_jump} triangles cut at depth jumps, pieces under {min_island} vertices removed)")

    grid_r, grid_c = np.nonzero(valid)  # row-major, matches idx numbering
    grid_r, grid_c = grid_r[keep_vertex], grid_c[keep_vertex]
    pr, pc = rows[grid_r], cols[grid_c]
    zv = z[grid_r, grid_c]
    vertices = unproject(pr, pc, zv, maps.intrinsics).astype(np.float32)
    uv = np.stack([(pc + 0.5) / maps.width, 1.0 - (pr + 0.5) / maps.height], axis=1).astype(np.float32)
    pixel = np.stack([pr, pc], axis=1).astype(np.int32)

    fparts = face_parts_from_grid(maps, person_id, rows, cols, quad_of_tri, gw - 1, stride)
    vparts = vertex_parts_from_faces(maps.parts[pr, pc], faces, fparts, len(vertices))
    report = {
        "vertices": int(len(vertices)),
        "faces": int(len(faces)),
        "stride": int(stride),
        "masked_pixels_without_depth": int(np.count_nonzero(
            (maps.mask == person_id) & ~np.isfinite(person_depth(maps, person_id)))),
        "eroded_px": int(erode_px),
        "triangles_dropped_at_depth_jumps": int(n_jump),
        "islands_removed": islands_removed,
        "island_vertices_removed": int(n_valid - used.sum() + np.count_nonzero(used & small)),
    }
    if maps.pointmap is not None:
        report["pointmap_reprojection_px_max"] = _pointmap_disagreement(maps, pr, pc)
    return SurfaceMesh(vertices, faces, uv, pixel, fparts, vparts, person_id=person_id, report=report)


def _grid_triangles(idx, z, intrinsics, stride, max_jump):
    """Triangles [T,3] (vertex indices) over the grid, their quad index, and how many jumped.

    All tests run on grid-shaped arrays (one per edge direction), so the cost is a few passes
    over the image rather than gathers per triangle.
    """
    k = np.asarray(intrinsics, np.float64)
    scale = np.float32(max_jump * stride / (0.5 * (k[0, 0] + k[1, 1])))
    zz = np.where(idx >= 0, z, np.nan).astype(np.float32)
    za, zb, zc, zd = zz[:-1, :-1], zz[:-1, 1:], zz[1:, :-1], zz[1:, 1:]

    def smooth(p, q, diag):  # edge p-q is not a depth discontinuity (False if either is missing)
        limit = np.fmin(p, q) * (scale * np.float32(np.sqrt(2.0) if diag else 1.0))
        with np.errstate(invalid="ignore"):
            return np.abs(p - q) <= limit

    top, bottom = smooth(za, zb, False), smooth(zc, zd, False)
    left, right = smooth(za, zc, False), smooth(zb, zd, False)
    ad, bc = smooth(za, zd, True), smooth(zb, zc, True)
    ok_a, ok_b, ok_c, ok_d = (idx[:-1, :-1] >= 0), (idx[:-1, 1:] >= 0), (idx[1:, :-1] >= 0), (idx[1:, 1:] >= 0)
    with np.errstate(invalid="ignore"):
        ad_flatter = np.abs(za - zd) <= np.abs(zb - zc)
    # Split along a-d unless a or d is missing, or b-c is flatter with all four present.
    use_ad = (ok_a & ok_d) & (~(ok_b & ok_c) | ad_flatter)
    # Orientation: (row, col) -> (row+1, col) -> (row, col+1) is counter-clockwise seen from the
    # camera in the OpenCV frame, i.e. the normal points towards the camera.
    t1_ok = np.where(use_ad, left & bottom & ad, left & bc & top)  # (a,c,d) | (a,c,b)
    t2_ok = np.where(use_ad, ad & right & top, bc & bottom & right)  # (a,d,b) | (b,c,d)
    t1_any = np.where(use_ad, ok_a & ok_c & ok_d, ok_a & ok_c & ok_b)
    t2_any = np.where(use_ad, ok_a & ok_d & ok_b, ok_b & ok_c & ok_d)
    n_jump = int(np.count_nonzero(t1_any & ~t1_ok) + np.count_nonzero(t2_any & ~t2_ok))

    a, b, c, d = idx[:-1, :-1], idx[:-1, 1:], idx[1:, :-1], idx[1:, 1:]
    q1 = np.flatnonzero(t1_ok)
    q2 = np.flatnonzero(t2_ok)
    u1, u2 = use_ad.ravel()[q1], use_ad.ravel()[q2]
    a, b, c, d = a.ravel(), b.ravel(), c.ravel(), d.ravel()
    tri1 = np.stack([a[q1], c[q1], np.where(u1, d[q1], b[q1])], axis=1)
    tri2 = np.stack([np.where(u2, a[q2], b[q2]), np.where(u2, d[q2], c[q2]), np.where(u2, b[q2], d[q2])], axis=1)
    return np.concatenate([tri1, tri2]), np.concatenate([q1, q2]), n_jump


def _pointmap_disagreement(maps: Maps, pr: np.ndarray, pc: np.ndarray) -> float:
    """How far (px) the raw pointmap XY would land from its own pixel: a diagnostic only."""
    p = maps.pointmap[pr, pc].astype(np.float64)
    ok = np.isfinite(p).all(axis=1) & (p[:, 2] > 0)
    if not ok.any():
        return float("nan")
    uv = reproject(p[ok], maps.intrinsics)
    err = np.hypot(uv[:, 0] - (pc[ok] + 0.5), uv[:, 1] - (pr[ok] + 0.5))
    return float(err.max())
