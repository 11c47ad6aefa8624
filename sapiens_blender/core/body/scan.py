# SPDX-License-Identifier: GPL-3.0-or-later
"""What several views of one person add to their one fitted body (numpy only): the clothed layer
and the texture measured from every view, not continued from one.

A view is its maps, the person's mask id there and the body posed as in that view (camera frame,
metres): the fit gives one shape and a pose per view (``inference_server/fit/scan.py``), so the
same vertex is the same point of the body in every view, wherever the arms moved.

- ``scan_dressing``: per vertex, the clothing/hair thickness and the dressed share from the views
  that see it (weighted by how squarely), continued over the mesh only where no view saw it.
- ``fuse_texture``: per texel, the colour from the views that see it best (facing, resolution,
  not occluded, away from the silhouette's edge), blended where two views are about as good
  (no hard seam), each view's exposure evened out first (a gain per channel); texels no view saw
  keep the single-view fill (``texture.bake_texture``) and are marked in a mask.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..maps.canonical import Maps
from .dressing import Dressing, hair_cover, limit_slope
from .texture import bake_texture
from .surface import (DRESSED_CLASSES, FACING_MIN, MAX_THICKNESS, OCCLUSION_TOLERANCE, depth_buffer,
                      diffuse, mesh_edges, observed_points, project, rasterize, vertex_normals, visible_vertices)

MEASURE_FACING = 0.35  # cosine: below it a view's offset to the observed surface is underestimated
EDGE_PX = 4  # a view's pixels this close to the person's outline mix in the background: they weigh less
BEST_SHARE = 0.35  # a view weighing under this share of a texel's best view gives it nothing
GAIN_ROUNDS = 3  # alternations of (consensus colour, per-view gains)
GAIN_LIMIT = (0.5, 2.0)
SIMILAR = 0.6  # weight share of a texel's best view for a view to count in the exposure estimate  # a view's exposure gain per channel is kept inside this


@dataclass
class ScanView:
    maps: Maps
    person_id: int
    vertices: np.ndarray  # [V,3] the body posed as in this view, camera frame
    quality: float = 1.0  # 0..1: how well the fit matches this view (its texels weigh this much more or less)


def _edge_distance(mine: np.ndarray, limit: int = EDGE_PX) -> np.ndarray:
    """Per pixel of ``mine`` [H,W] bool, its distance in pixels (1..limit) to the nearest pixel
    outside it, counted by erosion (4-neighbour), capped at ``limit``."""
    dist = np.zeros(mine.shape, np.float32)
    inner = mine.copy()
    for step in range(1, limit + 1):
        dist[inner] = step
        padded = np.pad(inner, 1, constant_values=False)
        inner = inner & padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
    return dist


def scan_dressing(views: list, faces, vertex_parts, rest_vertices=None, head_part: int | None = None,
                  hairline: float | None = None, iterations: int = 200, zbufs=None,
                  part_thickness=None) -> tuple[Dressing, np.ndarray]:
    """(the clothed layer as ``dressing.dressing`` gives it, seen [V] bool: vertices some view saw)
    from every view: a vertex's thickness is the mean of the views that see it squarely (each
    weighted by its cosine), its dressed share the views' vote; only vertices no view saw are
    continued over the mesh graph from their neighbours. ``part_thickness`` [V] (metres, 0 where
    none): the thickness the fit found for each vertex's part (one per part, from every view's
    covering points at once); where a view measured the vertex, the two are averaged (each view's
    own measure runs thin by what its body sits out into the clothes)."""
    f = np.asarray(faces, np.int64)
    n = len(views[0].vertices)
    w_thick = np.zeros(n)
    thick_sum = np.zeros(n)
    votes = np.zeros(n)
    dressed_votes = np.zeros(n)
    hair = np.zeros(n, bool)
    for k, view in enumerate(views):
        v = np.asarray(view.vertices, np.float64)
        normals = vertex_normals(v, f)
        seen, pix = visible_vertices(v, f, normals, view.maps.intrinsics, view.maps.width, view.maps.height,
                                     zbufs[k] if zbufs is not None else None)
        r, c = pix[:, 0], pix[:, 1]
        mine = np.asarray(view.maps.mask)[r, c] == view.person_id
        label = np.asarray(view.maps.parts)[r, c]
        names = list(view.maps.part_names)
        dressed = np.isin(label, [i for i, name in enumerate(names) if name in DRESSED_CLASSES])
        points = observed_points(view.maps)
        if points is None:
            continue
        offset = np.einsum("ij,ij->i", points[r, c] - v, normals)
        known = seen & mine & np.isfinite(offset) & (offset < MAX_THICKNESS)
        cos = np.einsum("ij,ij->i", normals, -v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12))
        votes += known * cos
        dressed_votes += (known & dressed) * cos
        measured = known & dressed & (cos > MEASURE_FACING)
        w_thick += measured * cos
        thick_sum += np.where(measured, np.clip(np.nan_to_num(offset), 0.0, MAX_THICKNESS), 0.0) * cos
        if "Hair" in names:
            hair |= known & (label == names.index("Hair"))
    known_any = votes > 0
    report = {"seen_vertices": int(known_any.sum()), "views": len(views)}
    bare = Dressing(np.zeros(n), np.zeros(n), report)
    if not (w_thick > 0).any():
        report["note"] = "no view shows clothing or hair with depth: the body is left bare"
        return bare, known_any
    share_seen = np.where(known_any, dressed_votes / np.maximum(votes, 1e-12), 0.0)
    seen_dressed = w_thick > 0
    report["dressed_vertices"] = int(seen_dressed.sum())
    parts = np.asarray(vertex_parts, np.int64)
    unseen_part = ~np.isin(parts, np.unique(parts[known_any]))
    edges = mesh_edges(f)
    covered = np.zeros(n, bool)
    if rest_vertices is not None and head_part is not None:
        covered = hair_cover(rest_vertices, parts == head_part, hair, hairline) & ~known_any
    fixed = known_any | unseen_part | covered
    is_dressed = diffuse(np.where(covered, 1.0, share_seen), fixed, edges, iterations)
    x = np.clip((is_dressed - 0.3) / 0.4, 0.0, 1.0)
    share = x * x * (3.0 - 2.0 * x)
    thick = np.where(seen_dressed, thick_sum / np.maximum(w_thick, 1e-12), 0.0)
    if part_thickness is not None:
        fitted = np.asarray(part_thickness, np.float64)
        thick = np.where(seen_dressed & (fitted > 0), 0.5 * (thick + fitted), thick)
    around = diffuse(thick, seen_dressed, edges, iterations)
    out = np.clip(np.where(seen_dressed, thick, share * around), 0.0, MAX_THICKNESS)
    over = parts == head_part if head_part is not None else None
    return Dressing(limit_slope(out, views[0].vertices, edges), share, report, over), known_any


def depth_buffers(views: list, faces) -> list:
    """Each view's depth buffer of its posed body (the clothed layer and the texture both read it)."""
    return [depth_buffer(np.asarray(v.vertices, np.float64), faces, v.maps.intrinsics, v.maps.width, v.maps.height)
            for v in views]


def _view_samples(view: ScanView, f: np.ndarray, face: np.ndarray, bary: np.ndarray, zbuf=None):
    """(texel indices, colours [n,3] float, weights [n]) of the texels ``view`` sees."""
    maps = view.maps
    v = np.asarray(view.vertices, np.float64)
    # Only the texels of triangles turned towards the camera (about half): the rest cannot be seen.
    tri = v[f]
    towards = np.einsum("ij,ij->i", np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0]), -tri.mean(1)) > 0
    sel = np.flatnonzero(towards[face])
    face, bary = face[sel], bary[sel].astype(np.float32)
    point = np.einsum("nk,nkj->nj", bary, v[f[face]].astype(np.float32)).astype(np.float64)
    normal = np.einsum("nk,nkj->nj", bary, vertex_normals(v, f).astype(np.float32)[f[face]])
    normal /= np.maximum(np.linalg.norm(normal, axis=1, keepdims=True), 1e-12)
    dist = np.linalg.norm(point, axis=1)
    cos = np.einsum("ij,ij->i", normal, -point) / np.maximum(dist, 1e-12)
    xy = project(point, maps.intrinsics)
    pc, pr = np.floor(xy[:, 0]).astype(np.int64), np.floor(xy[:, 1]).astype(np.int64)
    inside = (pc >= 0) & (pc < maps.width) & (pr >= 0) & (pr < maps.height) & (point[:, 2] > 1e-3)
    pr, pc = pr.clip(0, maps.height - 1), pc.clip(0, maps.width - 1)
    if zbuf is None:
        zbuf = depth_buffer(v, f, maps.intrinsics, maps.width, maps.height)
    mine = np.asarray(maps.mask) == view.person_id
    edge = _edge_distance(mine)[pr, pc]
    seen = inside & (cos > FACING_MIN) & (point[:, 2] <= zbuf[pr, pc] + OCCLUSION_TOLERANCE) & (edge > 0)
    focal = float(np.asarray(maps.intrinsics)[0, 0])
    # facing x resolution (pixels per metre, squared: per area) x distance from the outline
    weight = cos ** 2 * (focal / np.maximum(point[:, 2], 1e-3)) ** 2 * (edge / EDGE_PX) * view.quality
    idx = np.flatnonzero(seen)
    return sel[idx], np.asarray(maps.image)[pr[idx], pc[idx]].astype(np.float32), weight[idx].astype(np.float32)


def _gains(samples: list, n_texels: int) -> np.ndarray:
    """[views,3] per-channel gains that bring every view's colours to the first view's exposure:
    alternately the texels' consensus (weighted mean of the views' gained colours) and each
    view's least-squares gain onto it, over the texels two or more views see about as well."""
    gains = np.ones((len(samples), 3))
    # Every 7th texel: a view's gain is 3 numbers, tens of thousands of texels settle them.
    samples = [(idx[keep], col[keep], w[keep]) for idx, col, w in samples for keep in [idx % 7 == 0]]
    # Only views that see a texel about as squarely as its best view compare: shading changes
    # with the angle to the light (often on the camera), and an oblique view's darker pixel
    # would read as a darker exposure.
    best = np.zeros(n_texels, np.float32)
    for idx, _c, w in samples:
        np.maximum.at(best, idx, w)
    samples = [(idx[keep], col[keep], w[keep]) for idx, col, w in samples for keep in [w >= SIMILAR * best[idx]]]
    count = np.zeros(n_texels)
    for idx, _c, _w in samples:
        count[idx] += 1
    for _ in range(GAIN_ROUNDS):
        total = np.zeros((n_texels, 3))
        wsum = np.zeros(n_texels)
        for (idx, col, w), g in zip(samples, gains):
            wsum += np.bincount(idx, w, minlength=n_texels)
            for ch in range(3):
                total[:, ch] += np.bincount(idx, w * col[:, ch] * g[ch], minlength=n_texels)
        consensus = total / np.maximum(wsum, 1e-12)[:, None]
        for k, (idx, col, w) in enumerate(samples):
            shared = count[idx] >= 2
            if shared.sum() < 50:
                continue
            x, y, ww = col[shared].astype(np.float64), consensus[idx[shared]], w[shared, None]
            gains[k] = np.clip((ww * x * y).sum(0) / np.maximum((ww * x * x).sum(0), 1e-12), *GAIN_LIMIT)
        gains /= gains[0]  # the first view's exposure is the reference
    return gains


def fuse_texture(views: list, faces, uv, face_uv, face_parts=None, size: int = 1024, pad: int = 4,
                 dressed=None, zbufs=None, part_names=None, rest_vertices=None) -> tuple[np.ndarray, np.ndarray, dict]:
    """(RGB uint8 [size,size,3], unseen uint8 [size,size]: 255 where no view saw the texel, report).

    Starts from the first view's bake (its fill for what no view sees; ``part_names`` and
    ``rest_vertices`` as ``bake_texture``'s), then every texel some
    view sees takes the blend of the views within ``BEST_SHARE`` of its best one, weighted by
    facing x resolution x distance from the outline, faded smoothly so a seam between two views
    is a gradient, each view's colours first scaled by its exposure gains (``_gains``)."""
    f = np.asarray(faces, np.int64)
    uvs = np.asarray(uv, np.float64)
    uv_tex = np.stack([uvs[:, 0] * size, (1.0 - uvs[:, 1]) * size], 1)
    rows, cols, face, bary = rasterize(uv_tex[np.asarray(face_uv, np.int64)], size, size)
    first = views[0]
    texture, _ = bake_texture(first.maps, first.person_id, first.vertices, f, uv, face_uv, face_parts,
                              size=size, pad=0, dressed=dressed, part_names=part_names, rest_vertices=rest_vertices)
    n = len(rows)
    samples = [_view_samples(view, f, face, bary, zbufs[k] if zbufs is not None else None)
               for k, view in enumerate(views)]
    gains = _gains(samples, n)
    best = np.zeros(n, np.float32)
    for idx, _c, w in samples:
        np.maximum.at(best, idx, w)
    total = np.zeros((n, 3))
    wsum = np.zeros(n)
    for (idx, col, w), g in zip(samples, gains):
        x = np.clip((w / np.maximum(best[idx], 1e-12) - BEST_SHARE) / (1.0 - BEST_SHARE), 0.0, 1.0)
        eff = w * x * x * (3.0 - 2.0 * x)
        wsum += np.bincount(idx, eff, minlength=n)
        for ch in range(3):
            total[:, ch] += np.bincount(idx, eff * col[:, ch] * g[ch], minlength=n)
    seen = wsum > 0
    fused = np.rint(total[seen] / wsum[seen, None]).clip(0, 255).astype(np.uint8)
    texture[rows[seen], cols[seen]] = fused
    unseen = np.zeros((size, size), np.uint8)
    unseen[rows[~seen], cols[~seen]] = 255
    covered = np.zeros((size, size), bool)
    covered[rows, cols] = True
    texture = _grow(texture, covered, pad)
    views_per_texel = np.zeros(n)
    for idx, _c, _w in samples:
        views_per_texel[idx] += 1
    report = {"texels": int(n), "seen_texels": int(seen.sum()), "unseen_share": round(float(1 - seen.mean()), 4),
              "views": len(views), "size": size, "mean_views_per_seen_texel": round(float(views_per_texel[seen].mean()), 2)
              if seen.any() else 0.0, "gains": np.round(gains, 3).tolist()}
    return texture, unseen, report


def _grow(texture: np.ndarray, covered: np.ndarray, pad: int) -> np.ndarray:
    """The UV islands grown by ``pad`` texels (each pass copies a neighbour's colour outwards):
    filtering near a seam then reads the island's colours, not the background's."""
    for _ in range(pad):
        grown = texture.copy()
        new = np.zeros_like(covered)
        for dr, dc in ((1, 0), (-1, 0), (0, 1), (0, -1)):
            take = np.roll(covered, (dr, dc), (0, 1)) & ~covered & ~new
            grown[take] = np.roll(texture, (dr, dc), (0, 1))[take]
            new |= take
        texture, covered = grown, covered | new
    return texture


def fit_quality(residuals) -> np.ndarray:
    """Per view 0..1 from its fit's surface residual (m, the report's ``surface_residual_m``):
    1 up to 1.5x the views' median, falling as the square of the ratio beyond. A view whose body
    sits centimetres off its pixels (a profile's arm folded the wrong way) would paint the
    wrong colours onto the body: its texels only fill what the better views do not see."""
    r = np.asarray([np.nan if x is None else x for x in residuals], np.float64)
    if not np.isfinite(r).any():
        return np.ones(len(r))
    ref = 1.5 * np.nanmedian(r)
    return np.where(np.isfinite(r), np.clip(ref / np.maximum(r, 1e-9), 0.0, 1.0) ** 2, 1.0)


@dataclass
class ScanSurface:
    """Everything the views add to the fitted body of their first view."""

    rest: np.ndarray  # [V,3] bind pose, model frame, the clothed layer on (mode 'clothed')
    posed: np.ndarray  # [V,3] as in the first view, camera frame, the clothed layer on
    texture: np.ndarray  # [S,S,3] uint8
    unseen_texels: np.ndarray  # [S,S] uint8: 255 where no view saw the texel
    unseen_vertices: np.ndarray  # [V] bool: vertices no view saw
    dressing: Dressing
    report: dict


def fitted_thickness(template, fit):
    """[V] metres: the clothing thickness the scan fit found for each vertex's part (its report's
    ``clothing_thickness_m``, per part name; 0 for a part without), or None without one."""
    worn = fit.report(int(fit.person_ids[0])).get("clothing_thickness_m")
    if not worn:
        return None
    per_part = np.array([float(worn.get(str(name), 0.0)) for name in template.part_names])
    return per_part[np.asarray(template.vertex_parts, np.int64)]


def scan_surface(template, fit, views: list, mode: str = "clothed", texture_size: int = 1024) -> ScanSurface:
    """The clothed layer and the fused texture of one scanned body: ``fit`` (core.body.records.BodyFit)
    holds one row per view (the same shape, each view's pose), ``views`` the matching ScanView
    list (their ``vertices`` the fit's rows); the result is posed and placed as the first view."""
    from . import surface as body_surface
    from .dressing import dress, head_landmarks

    faces = np.asarray(template.faces, np.int64)
    zbufs = depth_buffers(views, faces)
    worn, seen = scan_dressing(views, faces, template.vertex_parts, rest_vertices=fit.rest_vertices[0],
                               zbufs=zbufs, part_thickness=fitted_thickness(template, fit),
                               **head_landmarks(template, fit, 0))
    rest = np.asarray(fit.rest_vertices[0], np.float64)
    posed = np.asarray(views[0].vertices, np.float64)
    if mode == "clothed":
        rest = dress(rest, faces, worn.thickness, worn.over)
        posed = dress(posed, faces, worn.thickness, worn.over)
    per_face = body_surface.face_parts(faces, template.vertex_parts)
    # The texture is read on the body as it is exported: with the clothed layer on (its zbufs too).
    if mode == "clothed":
        views = [ScanView(v.maps, v.person_id, dress(v.vertices, faces, worn.thickness, worn.over), v.quality)
                 for v in views]
        zbufs = depth_buffers(views, faces)
    texture, unseen, bake = fuse_texture(views, faces, template.uv, template.face_uv, per_face, size=texture_size,
                                         dressed=worn.dressed, zbufs=zbufs, part_names=template.part_names,
                                         rest_vertices=fit.rest_vertices[0])
    report = {"texture": bake, "clothing": dict(worn.report, max_thickness_m=round(float(worn.thickness.max()), 4)),
              "unseen_vertices": int((~seen).sum())}
    return ScanSurface(rest, posed, texture, unseen, ~seen, worn, report)
