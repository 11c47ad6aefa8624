# SPDX-License-Identifier: GPL-3.0-or-later
"""Normal textures for the built mesh: object space (Blender axes) and tangent space.

The mesh object sits at the world origin with an identity transform, so object space is the
Blender world: object-space normals are the camera-frame normal map rotated by
``camera_to_blender``. Tangent space follows MikkTSpace's conventions: per-vertex tangents from
the UV layout (per-triangle dP/du accumulated with corner-angle weights), Gram-Schmidt against
the vertex normal, bitangent = sign * cross(N, T). Decoding with those frames gives the
object-space normals back (``decode_tangent_normals``).
"""

from __future__ import annotations

import numpy as np

from ..maps.canonical import Maps
from .types import SurfaceMesh, camera_to_blender

# Encoded colour for pixels without a normal: facing the camera (-Y in Blender).
FACING_CAMERA = np.array([0.0, -1.0, 0.0], np.float32)


def object_space_normal_map(maps: Maps, person_id: int, fill_from_depth: bool = True) -> np.ndarray:
    """float32 [H,W,3] unit normals in Blender world axes; NaN off the person or unknown.

    Person pixels whose normal is unknown (NaN) but whose depth is known take the normal of
    the depth surface itself (``normals_from_depth``) when ``fill_from_depth``.
    """
    n = maps.normal.astype(np.float64)
    norm = np.linalg.norm(n, axis=-1, keepdims=True)
    person = maps.mask == person_id
    ok = person & np.isfinite(norm[..., 0]) & (norm[..., 0] > 1e-6)
    n = np.where(ok[..., None], n / np.where(ok[..., None], norm, 1.0), np.nan)
    if fill_from_depth and (person & ~ok).any():
        from_depth = normals_from_depth(maps, person_id)
        missing = person & ~ok & np.isfinite(from_depth).all(axis=-1)
        n[missing] = from_depth[missing]
        ok |= missing
    out = np.full(n.shape, np.nan, np.float32)
    out[ok] = camera_to_blender(n[ok]).astype(np.float32)
    return out


def normals_from_depth(maps: Maps, person_id: int) -> np.ndarray:
    """Camera-frame unit normals [H,W,3] of the person's depth surface (towards the camera):
    cross product of the unprojected points' central differences (one-sided at the rim, NaN
    where neither side has depth)."""
    from .surface import person_depth

    z = person_depth(maps, person_id).astype(np.float64)
    k = np.asarray(maps.intrinsics, np.float64)
    h, w = z.shape
    u = np.arange(w) + 0.5
    v = np.arange(h) + 0.5
    p = np.stack([(u[None, :] - k[0, 2]) * z / k[0, 0], (v[:, None] - k[1, 2]) * z / k[1, 1], z], axis=-1)

    def diff(axis):
        fwd = np.full_like(p, np.nan)
        bwd = np.full_like(p, np.nan)
        if axis == 1:
            fwd[:, :-1] = p[:, 1:] - p[:, :-1]
            bwd[:, 1:] = p[:, 1:] - p[:, :-1]
        else:
            fwd[:-1] = p[1:] - p[:-1]
            bwd[1:] = p[1:] - p[:-1]
        both = np.isfinite(fwd).all(-1) & np.isfinite(bwd).all(-1)
        return np.where(both[..., None], 0.5 * (fwd + bwd), np.where(np.isfinite(fwd), fwd, bwd))

    du, dv = diff(1), diff(0)
    n = np.cross(dv, du)  # (y down) x (x right) = -z: towards the camera
    length = np.linalg.norm(n, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(length > 0, n / length, np.nan)


def encode_normal_texture(normals: np.ndarray, fill: np.ndarray = FACING_CAMERA) -> np.ndarray:
    """[-1,1] normals -> [0,1] colours (n * 0.5 + 0.5), NaN replaced by ``fill``'s colour.

    Rows stay top-to-bottom like the photo; Blender's ``Image.pixels`` starts at the bottom row,
    so flip rows (``[::-1]``) before ``foreach_set``. Store as Non-Color data.
    """
    n = np.asarray(normals, np.float32)
    bad = ~np.isfinite(n).all(axis=-1)
    n = np.where(bad[..., None], np.asarray(fill, np.float32), n)
    return np.clip(n * 0.5 + 0.5, 0.0, 1.0).astype(np.float32)


def vertex_normals(vertices: np.ndarray, faces: np.ndarray, angles: np.ndarray | None = None) -> np.ndarray:
    """Corner-angle-weighted vertex normals (as Blender computes them), float64 [N,3]."""
    v = np.asarray(vertices, np.float64)
    f = np.asarray(faces, np.int64)
    if angles is None:
        angles = _corner_angles(v, f)
    fn = np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])
    fn /= np.maximum(np.linalg.norm(fn, axis=1, keepdims=True), 1e-20)
    out = _scatter_corners(f, fn, angles, len(v))
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-20)


def tangent_frames(mesh: SurfaceMesh):
    """Per-vertex (normal, tangent, sign) in Blender world axes: N, T float64 [N,3], sign [N]."""
    v = camera_to_blender(mesh.vertices.astype(np.float64))
    f = mesh.faces.astype(np.int64)
    uv = mesh.uv.astype(np.float64)
    angles = _corner_angles(v, f)
    n = vertex_normals(v, f, angles)
    e1, e2 = v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]]
    d1, d2 = uv[f[:, 1]] - uv[f[:, 0]], uv[f[:, 2]] - uv[f[:, 0]]
    det = d1[:, 0] * d2[:, 1] - d2[:, 0] * d1[:, 1]
    inv = np.where(np.abs(det) > 1e-20, 1.0 / np.where(det == 0, 1.0, det), 0.0)[:, None]
    ft = (e1 * d2[:, 1:2] - e2 * d1[:, 1:2]) * inv  # dP/du
    fb = (e2 * d1[:, 0:1] - e1 * d2[:, 0:1]) * inv  # dP/dv
    ft /= np.maximum(np.linalg.norm(ft, axis=1, keepdims=True), 1e-20)
    fb /= np.maximum(np.linalg.norm(fb, axis=1, keepdims=True), 1e-20)
    t = _scatter_corners(f, ft, angles, len(v))
    b = _scatter_corners(f, fb, angles, len(v))
    t = t - n * np.einsum("ij,ij->i", t, n)[:, None]
    bad = np.linalg.norm(t, axis=1) < 1e-12
    if bad.any():  # no UV gradient (isolated vertex): any vector orthogonal to N
        alt = np.cross(n[bad], np.array([0.0, 0.0, 1.0]))
        alt[np.linalg.norm(alt, axis=1) < 1e-6] = [1.0, 0.0, 0.0]
        t[bad] = alt
    t /= np.maximum(np.linalg.norm(t, axis=1, keepdims=True), 1e-20)
    sign = np.where(np.einsum("ij,ij->i", np.cross(n, t), b) < 0.0, -1.0, 1.0)
    return n, t, sign


def tangent_space_normal_map(mesh: SurfaceMesh, maps: Maps) -> np.ndarray:
    """float32 [H,W,3] tangent-space normals in [-1,1] (NaN where no vertex frame applies).

    Each pixel uses the frame of the mesh vertex at its grid position (the vertex of that pixel
    at stride 1, the top-left grid vertex of its block otherwise).
    """
    obj = object_space_normal_map(maps, mesh.person_id)
    n, t, sign = tangent_frames(mesh)
    bt = np.cross(n, t) * sign[:, None]
    h, w = maps.height, maps.width
    stride = int(mesh.report.get("stride", 1))
    lookup = np.full((h, w), -1, np.int64)
    has = mesh.pixel[:, 0] >= 0  # back vertices of a closed body have no pixel
    lookup[mesh.pixel[has, 0], mesh.pixel[has, 1]] = np.nonzero(has)[0]
    rr, cc = np.mgrid[0:h, 0:w]
    vid = lookup[(rr // stride) * stride, (cc // stride) * stride]
    ok = (vid >= 0) & np.isfinite(obj).all(axis=-1)
    out = np.full((h, w, 3), np.nan, np.float32)
    o, i = obj[ok].astype(np.float64), vid[ok]
    out[ok] = np.stack([np.einsum("ij,ij->i", o, t[i]), np.einsum("ij,ij->i", o, bt[i]),
                        np.einsum("ij,ij->i", o, n[i])], axis=1).astype(np.float32)
    return out


def decode_tangent_normals(tangent_normals: np.ndarray, n, t, sign) -> np.ndarray:
    """Object-space normals [K,3] from tangent-space ones [K,3] and their vertices' frames."""
    tn = np.asarray(tangent_normals, np.float64)
    bt = np.cross(n, t) * sign[:, None]
    out = tn[:, 0:1] * t + tn[:, 1:2] * bt + tn[:, 2:3] * n
    return out / np.maximum(np.linalg.norm(out, axis=1, keepdims=True), 1e-20)


def _scatter_corners(f, per_face, corner_weights, n):
    """Sum over faces of per_face[face] * weight[face, corner] into each corner's vertex [n,3]
    (bincount: far faster than ufunc.at)."""
    out = np.empty((n, 3))
    idx = f.ravel()
    w = corner_weights.ravel()
    for k in range(3):
        out[:, k] = np.bincount(idx, weights=np.repeat(per_face[:, k], 3) * w, minlength=n)
    return out


def _corner_angles(v, f):
    """Interior angle at each corner [F,3] (radians)."""
    e = [v[f[:, (c + 1) % 3]] - v[f[:, c]] for c in range(3)]  # edge leaving corner c
    length = [np.sqrt(np.einsum("ij,ij->i", x, x)) for x in e]
    out = np.empty((len(f), 3))
    for c in range(3):
        prev = (c + 2) % 3  # the edge arriving at corner c, reversed, is -e[prev]
        cos = -np.einsum("ij,ij->i", e[c], e[prev]) / np.maximum(length[c] * length[prev], 1e-20)
        out[:, c] = np.arccos(np.clip(cos, -1.0, 1.0))
    return out
