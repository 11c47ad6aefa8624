# SPDX-License-Identifier: GPL-3.0-or-later
"""Optional closed body: a back surface from a thickness model, stitched into a watertight mesh.

Thickness model (round limbs): a pixel at distance d from the silhouette, where the local
half-width is R (the largest silhouette distance nearby), lies on a circle of radius R, so the
body's half-thickness there is h = sqrt(d * (2R - d)); the back point is 2h behind the front
one along the same pixel ray. The back surface reuses the front triangles reversed, and each
boundary edge of the front gets a two-triangle wall to its back copy, so every edge is shared
by exactly two faces with opposite directions (watertight, consistently oriented).
"""

from __future__ import annotations

import numpy as np

from ..maps.canonical import Maps
from .silhouette import distance_transform
from .surface import unproject
from .types import GeometryError, SurfaceMesh


def close_body(mesh: SurfaceMesh, maps: Maps, person_id: int | None = None,
               thickness_scale: float = 1.0) -> SurfaceMesh:
    """A watertight version of the visible-surface ``mesh`` (camera frame, metres)."""
    pid = mesh.person_id if person_id is None else person_id
    faces, keep_v, removed = _manifold_faces(mesh.faces.astype(np.int64), len(mesh.vertices))
    if len(faces) == 0:
        raise GeometryError(f"person {pid}: no manifold surface left to close")
    remap = np.full(len(mesh.vertices), -1, np.int64)
    remap[keep_v] = np.arange(int(keep_v.sum()))
    faces = remap[faces]
    front = mesh.vertices[keep_v].astype(np.float64)
    pixel = mesh.pixel[keep_v]
    fparts = mesh.face_parts[_kept_face_index(mesh.faces, faces, remap)]
    n = len(front)

    half = _half_thickness(maps, pid, pixel) * thickness_scale  # metres, per vertex
    back = unproject(pixel[:, 0], pixel[:, 1], front[:, 2] + 2.0 * half, maps.intrinsics)

    a, b = _boundary_edges(faces)
    walls = np.concatenate([np.stack([b, a, a + n], 1), np.stack([b, a + n, b + n], 1)])
    wall_parts = np.tile(_edge_face_parts(faces, fparts, a, b), 2)
    all_faces = np.concatenate([faces, faces[:, [0, 2, 1]] + n, walls]).astype(np.int32)
    report = dict(mesh.report)
    report.update({"closed": True, "faces_removed_for_manifold": int(removed),
                   "boundary_edges_stitched": int(len(a)),
                   "max_half_thickness_m": float(half.max(initial=0.0))})
    return SurfaceMesh(
        vertices=np.concatenate([front, back]).astype(np.float32),
        faces=all_faces,
        uv=np.concatenate([mesh.uv[keep_v], mesh.uv[keep_v]]),
        pixel=np.concatenate([pixel, np.full_like(pixel, -1)]).astype(np.int32),
        face_parts=np.concatenate([fparts, fparts, wall_parts]).astype(np.uint8),
        vertex_parts=np.concatenate([mesh.vertex_parts[keep_v]] * 2),
        person_id=pid,
        report=report,
    )


def _half_thickness(maps: Maps, pid: int, pixel: np.ndarray) -> np.ndarray:
    person = maps.mask == pid
    # Work in the person's bounding box (+1 px of background): the transform's cost grows with
    # the area and the largest distance, not with the photo.
    rows, cols = np.nonzero(person)
    r0, c0 = max(int(rows.min()) - 1, 0), max(int(cols.min()) - 1, 0)
    dist = np.zeros(person.shape)
    dist[r0:int(rows.max()) + 2, c0:int(cols.max()) + 2] = distance_transform(
        person[r0:int(rows.max()) + 2, c0:int(cols.max()) + 2])  # px, to the nearest outside centre
    # Local half-width R: the largest distance within reach (a coarse max filter is enough).
    step = 4
    coarse = dist[::step, ::step]
    radius = int(np.ceil(dist.max() / step)) + 1
    local = _max_filter(coarse, radius)
    r = local[pixel[:, 0] // step, pixel[:, 1] // step]
    d = np.maximum(dist[pixel[:, 0], pixel[:, 1]] - 0.5, 0.25)  # to the silhouette edge
    r = np.maximum(r - 0.5, d)
    h_px = np.sqrt(d * (2.0 * r - d))
    k = np.asarray(maps.intrinsics, np.float64)
    z = np.asarray(maps.depth, np.float64)[pixel[:, 0], pixel[:, 1]]
    if maps.pointmap is not None:
        pz = np.asarray(maps.pointmap[..., 2], np.float64)[pixel[:, 0], pixel[:, 1]]
        z = np.where(np.isfinite(pz), pz, z)
    return h_px * z / (0.5 * (k[0, 0] + k[1, 1]))


def _max_filter(a: np.ndarray, radius: int) -> np.ndarray:
    """Square max filter of the given radius (separable, by doubling shifts)."""
    out = a.copy()
    for axis in (0, 1):
        reach = 0
        cur = out
        while reach < radius:
            s = min(reach + 1, radius - reach)
            shifted_fwd = np.full_like(cur, -np.inf)
            shifted_bwd = np.full_like(cur, -np.inf)
            if axis == 0:
                shifted_fwd[s:], shifted_bwd[:-s] = cur[:-s], cur[s:]
            else:
                shifted_fwd[:, s:], shifted_bwd[:, :-s] = cur[:, :-s], cur[:, s:]
            cur = np.maximum(cur, np.maximum(shifted_fwd, shifted_bwd))
            reach += s
        out = cur
    return out


def _boundary_edges(faces: np.ndarray):
    """Directed edges (a -> b) of faces whose reverse (b -> a) no face has."""
    a = faces.ravel()
    b = faces[:, [1, 2, 0]].ravel()
    n = int(faces.max()) + 1
    key = a * n + b
    boundary = ~np.isin(b * n + a, key)
    return a[boundary], b[boundary]


def _manifold_faces(faces: np.ndarray, n_vertices: int):
    """Drop faces touching "bowtie" vertices (two boundary fans meeting at one vertex), which
    cannot be stitched into a manifold; repeat until none remain."""
    removed = 0
    for _ in range(20):
        a, _b = _boundary_edges(faces) if len(faces) else (np.zeros(0, np.int64), None)
        out_deg = np.bincount(a, minlength=n_vertices)
        bad = out_deg > 1
        drop = bad[faces].any(axis=1)
        if not drop.any():
            break
        removed += int(drop.sum())
        faces = faces[~drop]
    keep_v = np.zeros(n_vertices, bool)
    keep_v[faces.ravel()] = True
    return faces, keep_v, removed


def _kept_face_index(original: np.ndarray, kept_remapped: np.ndarray, remap: np.ndarray) -> np.ndarray:
    """Index into ``original`` of each kept face (faces are unique triples)."""
    o = remap[original.astype(np.int64)]
    valid = (o >= 0).all(axis=1)
    n = int(remap.max()) + 1
    okey = (o[:, 0] * n + o[:, 1]) * n + o[:, 2]
    kkey = (kept_remapped[:, 0] * n + kept_remapped[:, 1]) * n + kept_remapped[:, 2]
    order = np.argsort(np.where(valid, okey, -1))
    pos = np.searchsorted(np.where(valid, okey, -1)[order], kkey)
    return order[pos]


def _edge_face_parts(faces: np.ndarray, fparts: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Part of the face that owns each directed edge a -> b."""
    n = int(faces.max()) + 1
    ea = faces.ravel()
    eb = faces[:, [1, 2, 0]].ravel()
    key = ea * n + eb
    order = np.argsort(key)
    pos = np.searchsorted(key[order], a * n + b)
    return fparts[order[pos] // 3]
