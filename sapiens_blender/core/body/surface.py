# SPDX-License-Identifier: GPL-3.0-or-later
"""What the photo adds to a fitted body (numpy only): mesh helpers, which vertices the camera
sees, and the texture baked into the body's UV layout. The ``clothed`` layer (the photo's
clothing and hair carried onto the body) is ``body_dressing``.

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
FADE_FACING = 0.3  # cosine: photo texels seen more edge-on than this fade into the part's fill
SKIN_FILL = np.array([196, 160, 140], np.uint8)  # neutral skin where nothing better is known
MIN_SEEN_FOR_FILL = 0.1  # a part's hidden side takes its seen colour only if this much of it is seen
MIN_LAYER_FOR_FILL = 0.05  # of a part's seen texels, dressed (or bare) ones to give it a fill of their own
FILL_BLEND_RINGS = 2  # mesh rings over which one part's fill colour fades into the next's
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


# --- the texture -------------------------------------------------------------------------------
def face_parts(faces: np.ndarray, vertex_parts: np.ndarray) -> np.ndarray:
    """A part per triangle: the part two of its corners share, else the first corner's."""
    vp = np.asarray(vertex_parts)[np.asarray(faces, np.int64)]
    return np.where(vp[:, 1] == vp[:, 2], vp[:, 1], vp[:, 0])


def blended_fill(face_fill: np.ndarray, faces: np.ndarray, n_verts: int, rings: int = FILL_BLEND_RINGS) -> np.ndarray:
    """Per vertex [V,C], the fill colours of its faces ([F,C]: one or more RGB fills side by side)
    averaged, then blended ``rings`` times with its neighbours': read at a texel through its
    face's corners, a part's fill fades into the next part's over a few centimetres instead of
    stepping along the triangles' edges (a saw-tooth hem where a shirt's fill meets the skin's).
    Inside a part, away from its border, the colour stays the part's own."""
    f = np.asarray(faces, np.int64)
    count = np.bincount(f.ravel(), minlength=n_verts).astype(np.float64)
    per_vertex = np.stack([np.bincount(f.ravel(), np.repeat(face_fill[:, c], 3), minlength=n_verts)
                           for c in range(face_fill.shape[1])], 1) / np.maximum(count, 1.0)[:, None]
    edges = mesh_edges(f)
    degree = np.bincount(edges.ravel(), minlength=n_verts).astype(np.float64)
    for _ in range(rings):
        per_vertex = (per_vertex + _neighbour_sum(per_vertex, edges, n_verts)) / (1.0 + degree)[:, None]
    return per_vertex


def bake_texture(maps: Maps, person_id: int, vertices, faces, uv, face_uv, face_parts=None,
                 size: int = 1024, pad: int = 4, dressed=None) -> tuple[np.ndarray, dict]:
    """The photo projected onto what the camera sees of the posed body, baked into its UV layout.

    Returns (RGB uint8 [size,size,3], row 0 = top = v 1; report). Texels the camera does not see
    take the median seen colour of the same body part (``face_parts``), else a neutral skin
    colour, faded into the next part's at part borders (``blended_fill``); texels it sees nearly
    edge-on fade from the photo into that fill (``FADE_FACING``); ``pad`` texels of padding
    round every UV island keep seams clean under filtering. With ``dressed`` ([V] 0..1,
    ``Dressing.dressed``) a part has two fills, what the photo shows of it dressed (clothing,
    hair) and bare, mixed per vertex by it: the hidden back of a haired head takes the hair's
    colour, not the median of face and hair (skin).
    """
    v = np.asarray(vertices, np.float64)
    f = np.asarray(faces, np.int64)
    uv_tex = np.stack([np.asarray(uv, np.float64)[:, 0] * size, (1.0 - np.asarray(uv, np.float64)[:, 1]) * size], 1)
    rows, cols, face, bary = rasterize(uv_tex[np.asarray(face_uv, np.int64)], size, size)
    point = np.einsum("nk,nkj->nj", bary, v[f[face]])
    tri = v[f]
    face_normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    face_normal /= np.maximum(np.linalg.norm(face_normal, axis=1, keepdims=True), 1e-12)
    view = -point / np.maximum(np.linalg.norm(point, axis=1, keepdims=True), 1e-12)
    facing = np.einsum("ij,ij->i", face_normal[face], view) > FACING_MIN
    zbuf = depth_buffer(v, f, maps.intrinsics, maps.width, maps.height)
    xy = project(point, maps.intrinsics)
    pc, pr = np.floor(xy[:, 0]).astype(np.int64), np.floor(xy[:, 1]).astype(np.int64)
    inside = (pc >= 0) & (pc < maps.width) & (pr >= 0) & (pr < maps.height) & (point[:, 2] > 1e-3)
    pr, pc = pr.clip(0, maps.height - 1), pc.clip(0, maps.width - 1)
    seen = (inside & facing & (point[:, 2] <= zbuf[pr, pc] + OCCLUSION_TOLERANCE)
            & (np.asarray(maps.mask)[pr, pc] == person_id))
    observed = observed_points(maps) if maps.metric else None
    if observed is not None:  # something of the photo's own (a held object) in front of the body
        in_front = observed[pr, pc, 2] < point[:, 2] - MAX_THICKNESS - OCCLUSION_TOLERANCE
        seen &= ~np.nan_to_num(in_front, nan=False).astype(bool)
    image = np.asarray(maps.image)
    texture = np.zeros((size, size, 3), np.uint8)
    covered = np.zeros((size, size), bool)
    # Fill first (part median, else skin), then the seen texels on top.
    parts = np.zeros(len(f), np.int64) if face_parts is None else np.asarray(face_parts, np.int64)
    colours = image[pr[seen], pc[seen]]
    dressed_ids = [i for i, name in enumerate(maps.part_names) if name in DRESSED_CLASSES]
    worn = np.isin(np.asarray(maps.parts)[pr[seen], pc[seen]], dressed_ids)
    bare_fill = np.tile(SKIN_FILL.astype(np.float64), (len(f), 1))
    worn_fill = bare_fill.copy()
    seen_parts = parts[face[seen]]
    texel_parts = parts[face]
    for part in np.unique(seen_parts):  # medians per part (a few dozen parts)
        of_part = seen_parts == part
        if of_part.sum() < MIN_SEEN_FOR_FILL * (texel_parts == part).sum():  # a glimpse at the frame's edge is no sample
            continue
        everything = np.median(colours[of_part], axis=0)
        for fill, layer in ((bare_fill, of_part & ~worn), (worn_fill, of_part & worn)):
            sampled = dressed is not None and layer.sum() >= MIN_LAYER_FOR_FILL * of_part.sum()
            fill[parts == part] = np.median(colours[layer], axis=0) if sampled else everything
    if dressed is None:
        vertex_fill = blended_fill(bare_fill, f, len(v))
    else:  # both fills blended in one pass over the edges, then mixed by the dressing
        both = blended_fill(np.concatenate([bare_fill, worn_fill], 1), f, len(v))
        share = np.asarray(dressed, np.float64)[:, None]
        vertex_fill = share * both[:, 3:] + (1.0 - share) * both[:, :3]
    corner_fill = vertex_fill[f[face]]  # [texels,3,3]
    fill = np.einsum("nk,nkc->nc", bary, corner_fill)
    texture[rows, cols] = np.rint(fill).clip(0, 255).astype(np.uint8)
    # Seen nearly edge-on, a photo pixel is smeared over much of the surface (and mixes in what
    # lies beside the person): those texels fade into the fill, by the smooth normal's cosine.
    normal = np.einsum("nk,nkj->nj", bary[seen], vertex_normals(v, f)[f[face[seen]]])
    cosine = np.einsum("ij,ij->i", normal, view[seen]) / np.maximum(np.linalg.norm(normal, axis=1), 1e-12)
    w = np.clip((cosine - FACING_MIN) / (FADE_FACING - FACING_MIN), 0.0, 1.0)[:, None]
    w = w * w * (3.0 - 2.0 * w)
    texture[rows[seen], cols[seen]] = np.rint(w * colours + (1.0 - w) * fill[seen]).clip(0, 255).astype(np.uint8)
    covered[rows, cols] = True
    for _ in range(pad):  # grow the islands by one texel per pass
        grown = texture.copy()
        new = np.zeros_like(covered)
        for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            src = np.roll(covered, (dr, dc), (0, 1))
            take = src & ~covered & ~new
            grown[take] = np.roll(texture, (dr, dc), (0, 1))[take]
            new |= take
        texture, covered = grown, covered | new
    texture[~covered] = SKIN_FILL
    report = {"texels": int(len(rows)), "seen_texels": int(seen.sum()), "size": size}
    return texture, report
