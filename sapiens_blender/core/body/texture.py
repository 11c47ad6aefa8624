# SPDX-License-Identifier: GPL-3.0-or-later
"""The photo baked into a fitted body's UV layout (numpy only): the photo where the camera sees
the body, and for its hidden side the photo's colours carried round each part, from the other
side or from the parts round it (``bake_texture``).

Works on one person's posed body in the camera frame (OpenCV, metres), as ``surface``.
"""

from __future__ import annotations

import numpy as np

from ..maps.canonical import Maps
from .surface import (DRESSED_CLASSES, FACING_MIN, MAX_THICKNESS, OCCLUSION_TOLERANCE, _neighbour_sum, continuation,
                      depth_buffer, mesh_edges, observed_points, project, rasterize, vertex_normals, visible_vertices)

FADE_FACING = 0.3  # cosine: photo texels seen more edge-on than this fade into the part's fill
SKIN_FILL = np.array([196, 160, 140], np.uint8)  # neutral skin where nothing better is known
MIN_SEEN_FOR_FILL = 0.1  # a part's hidden side takes its seen colour only if this much of it is seen
MIN_LAYER_FOR_FILL = 0.05  # of a part's seen texels, dressed (or bare) ones to give it a fill of their own
CARRY_FACING = 0.5  # cosine: only vertices seen more squarely give the colours carried round the hidden side
CARRY_ITERATIONS = 60  # smoothing passes of the colours carried round a part's hidden side
FILL_BLEND_RINGS = 2  # mesh rings over which one part's fill colour fades into the next's


def vertex_average(face_values: np.ndarray, faces: np.ndarray, n_verts: int) -> np.ndarray:
    """Per vertex [V,C], the mean of its faces' values ([F,C]: one or more RGB fills side by side)."""
    f = np.asarray(faces, np.int64)
    count = np.bincount(f.ravel(), minlength=n_verts).astype(np.float64)
    return np.stack([np.bincount(f.ravel(), np.repeat(face_values[:, c], 3), minlength=n_verts)
                     for c in range(face_values.shape[1])], 1) / np.maximum(count, 1.0)[:, None]


def blend_rings(per_vertex: np.ndarray, edges: np.ndarray, rings: int = FILL_BLEND_RINGS) -> np.ndarray:
    """``per_vertex`` ([V,C]) averaged with its neighbours over the mesh ``edges`` ``rings`` times:
    read at a texel through its face's corners, a part's fill fades into the next part's over a
    few centimetres instead of stepping along the triangles' edges (a saw-tooth hem where a
    shirt's fill meets the skin's)."""
    n_verts = len(per_vertex)
    degree = np.bincount(edges.ravel(), minlength=n_verts).astype(np.float64)
    for _ in range(rings):
        per_vertex = (per_vertex + _neighbour_sum(per_vertex, edges, n_verts)) / (1.0 + degree)[:, None]
    return per_vertex


def in_front(observed: np.ndarray, rows, cols, depth: np.ndarray) -> np.ndarray:
    """[N] bool: the photo's surface at (rows, cols) lies well in front of the body's points at
    ``depth`` (a held object counted as the person): that pixel is not the body's colour."""
    return np.nan_to_num(observed[rows, cols, 2] < depth - MAX_THICKNESS - OCCLUSION_TOLERANCE, nan=False).astype(bool)


def vertex_parts_of(faces: np.ndarray, face_part: np.ndarray, n_verts: int) -> np.ndarray:
    """A part per vertex from a part per face (a vertex on a border takes one of its faces')."""
    out = np.zeros(n_verts, np.int64)
    for k in range(3):
        out[np.asarray(faces, np.int64)[:, k]] = face_part
    return out


def photo_colours(maps: Maps, person_id: int, v: np.ndarray, f: np.ndarray, normals: np.ndarray, vertex_part: np.ndarray,
                  zbuf, observed, part_names=None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(seed [V] bool, worn [V] bool, colour [V,3]): the vertices whose photo colour can be
    carried (seen squarely, the person's own pixel, nothing in front, and, with ``part_names``
    (the names of ``vertex_part``), a pixel the photo labels as the vertex's own part or as
    clothing or hair: an arm before the chest is not the chest's colour); whether the photo says
    clothing or hair there; the pixel's colour. ``normals``: the body's vertex normals."""
    seen, pix = visible_vertices(v, f, normals, maps.intrinsics, maps.width, maps.height, zbuf)
    r, c = pix[:, 0], pix[:, 1]
    view = -v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    seed = seen & (np.asarray(maps.mask)[r, c] == person_id) & (np.einsum("ij,ij->i", normals, view) > CARRY_FACING)
    if observed is not None:
        seed &= ~in_front(observed, r, c, v[:, 2])
    label = np.asarray(maps.parts)[r, c]
    worn = np.isin(label, [i for i, name in enumerate(maps.part_names) if name in DRESSED_CLASSES])
    if part_names is not None:
        photo_names = list(maps.part_names)
        as_photo = np.array([photo_names.index(n) if n in photo_names else -1 for n in part_names])
        seed &= worn | (label == as_photo[vertex_part])
    return seed, worn, np.asarray(maps.image, np.float64)[r, c]


def carry_colours(seed: np.ndarray, worn: np.ndarray, colour: np.ndarray, vertex_part: np.ndarray, all_edges: np.ndarray,
                  fills: np.ndarray, layered: bool, part_names=None, rest=None) -> np.ndarray:
    """The parts' fills ([V,6]: bare RGB, worn RGB) where the photo's colours (``photo_colours``)
    are carried round each part instead: a part's hidden side takes the colours of the part seen
    nearest to it over the mesh (``continuation`` over edges inside the part), so the back of a
    hip under shorts takes the shorts' colour and the back of the chest the shirt's, where one
    median per part painted the shirt down over the shorts. With both layers (``layered``), the
    bare fill is carried from the seen skin and the worn one from the seen clothing and hair (a
    part that shows too little of a layer squarely keeps that layer's fill: hair seen only from
    above). A part the camera barely sees
    (``MIN_SEEN_FOR_FILL``) continues the colours of the parts round it over the mesh (legs below
    a table's edge: the trousers go on down), averaged with its mirror image's on the other
    side's part where that one is seen (``part_names``; ``rest``: the rest-pose vertices, anny's
    frame, symmetric about x = 0): a leg hidden behind the other is dressed like it, not in bare
    skin. Only a body the camera barely sees anywhere keeps its fills."""
    per_part = np.bincount(vertex_part, minlength=int(vertex_part.max()) + 1)
    seeded = np.bincount(vertex_part[seed], minlength=len(per_part))
    enough = seeded >= MIN_SEEN_FOR_FILL * np.maximum(per_part, 1)
    edges = all_edges[vertex_part[all_edges[:, 0]] == vertex_part[all_edges[:, 1]]]  # inside a part only
    partners = side_partners(part_names) if part_names is not None and rest is not None else {}
    mirrored = []  # (a barely seen part's vertices, the nearest vertex of its mirror image on the other side)
    for part, partner in partners.items():
        if max(part, partner) < len(enough) and enough[partner] and not enough[part]:
            mine, theirs = np.nonzero(vertex_part == part)[0], np.nonzero(vertex_part == partner)[0]
            a, b = rest[mine] * np.array([-1.0, 1.0, 1.0]), rest[theirs]
            d2 = (a * a).sum(1)[:, None] + (b * b).sum(1)[None] - 2.0 * a @ b.T
            mirrored.append((mine, theirs[np.argmin(d2, axis=1)]))
    known = enough[vertex_part]
    out = fills.copy()
    for k, layer in enumerate((seed & ~worn, seed & worn) if layered else (seed,)):
        rgb = slice(3 * k, 3 * k + 3)
        of_layer = np.bincount(vertex_part[layer], minlength=len(per_part))
        own = of_layer >= MIN_LAYER_FOR_FILL * np.maximum(seeded, 1)  # else the layer keeps its fill
        fixed = layer & (own & enough)[vertex_part]
        carried, reached = continuation(colour, fixed, edges, CARRY_ITERATIONS)
        out[reached, rgb] = carried[reached]
        if not known.any() or known.all():
            continue
        # The parts barely seen: the colours of the parts round them continued over the mesh,
        # averaged with their mirror image's where the other side is seen (the two guesses err
        # apart: texture_fill_real.py).
        around, reached = continuation(out[:, rgb], known, all_edges, CARRY_ITERATIONS)
        out[reached & ~known, rgb] = around[reached & ~known]
        for mine, nearest in mirrored:
            out[mine, rgb] = np.where(reached[mine, None], 0.5 * (around[mine] + out[nearest, rgb]), out[nearest, rgb])
    return out


def side_partners(part_names) -> dict:
    """Part index -> the index of the same part on the other side (Left_Foot <-> Right_Foot)."""
    names = list(part_names)
    out = {}
    for i, name in enumerate(names):
        for side, other in (("Left_", "Right_"), ("Right_", "Left_")):
            if name.startswith(side) and other + name[len(side):] in names:
                out[i] = names.index(other + name[len(side):])
    return out


def bake_texture(maps: Maps, person_id: int, vertices, faces, uv, face_uv, face_parts=None,
                 size: int = 1024, pad: int = 4, dressed=None, part_names=None,
                 rest_vertices=None) -> tuple[np.ndarray, dict]:
    """The photo projected onto what the camera sees of the posed body, baked into its UV layout.

    Returns (RGB uint8 [size,size,3], row 0 = top = v 1; report). Texels the camera does not see
    take the colours the photo shows of the same body part (``face_parts``) carried round it
    over the mesh (``carry_colours``; a part barely seen takes its other side's, with
    ``part_names`` and ``rest_vertices``), else the part's median seen colour, else a neutral
    skin colour, faded into the next part's at part borders (``blend_rings``); texels it sees
    nearly edge-on fade from the photo into that fill (``FADE_FACING``); ``pad`` texels of
    padding round every UV island keep seams clean under filtering. With ``dressed`` ([V] 0..1,
    ``Dressing.dressed``) a part has two fills, what the photo shows of it dressed (clothing,
    hair) and bare, mixed per vertex by it: the hidden back of a haired head takes the hair's
    colour, not the face's skin.
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
        seen &= ~in_front(observed, pr, pc, point[:, 2])
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
    # The parts' fills (bare, worn) per vertex: what a part's hidden side falls back to.
    both = vertex_average(np.concatenate([bare_fill, worn_fill], 1), f, len(v))
    names = part_names if face_parts is not None else None
    vertex_part = vertex_parts_of(f, parts, len(v))
    normals, edges = vertex_normals(v, f), mesh_edges(f)
    carried = carry_colours(*photo_colours(maps, person_id, v, f, normals, vertex_part, zbuf, observed, names),
                            vertex_part, edges, both, dressed is not None, names,
                            None if rest_vertices is None else np.asarray(rest_vertices, np.float64))
    both = blend_rings(carried, edges)
    if dressed is None:
        vertex_fill = both[:, :3]
    else:  # mixed by the dressing: the hidden back of a haired head takes the hair's colour
        share = np.asarray(dressed, np.float64)[:, None]
        vertex_fill = share * both[:, 3:] + (1.0 - share) * both[:, :3]
    corner_fill = vertex_fill[f[face]]  # [texels,3,3]
    fill = np.einsum("nk,nkc->nc", bary, corner_fill)
    texture[rows, cols] = np.rint(fill).clip(0, 255).astype(np.uint8)
    # Seen nearly edge-on, a photo pixel is smeared over much of the surface (and mixes in what
    # lies beside the person): those texels fade into the fill, by the smooth normal's cosine.
    normal = np.einsum("nk,nkj->nj", bary[seen], normals[f[face[seen]]])
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
