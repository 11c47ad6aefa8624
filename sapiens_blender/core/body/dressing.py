# SPDX-License-Identifier: GPL-3.0-or-later
"""The ``clothed`` layer of a fitted body (numpy only): where the photo's clothing and hair cover
the posed body and how thickly, carried round its hidden side, and the body with that layer on.

Works on one person's posed body in the camera frame (OpenCV, metres), as ``body_surface``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .surface import (DRESSED_CLASSES, MAX_THICKNESS, _neighbour_sum, diffuse, mesh_edges, observed_points,
                      vertex_normals, visible_vertices)
from ..maps.canonical import Maps

MEASURE_FACING = 0.35  # cosine: below it the offset to the observed surface is underestimated
MAX_SLOPE = 0.5  # m/m: the clothing's thickness rises at most this steeply along the body
MIN_HAIR_SEEN = 20  # seen hair vertices on the head before its hidden back counts as haired
DRESSING_RELAX = 10  # relaxation passes of the body whose normals the layer is laid along
OVER_RELAX = 30  # relaxation passes of the body a layer lies over where it lies over features (ears)
OVER_THICKNESS = 0.01  # m: a layer this thick lies wholly over those features, a thinner one partly


@dataclass
class Dressing:
    """What the photo says a posed body wears, per vertex."""
    thickness: np.ndarray  # [V] m (>= 0): how far the clothing/hair lies outside the body
    dressed: np.ndarray  # [V] 0..1: how surely clothing or hair covers the vertex
    report: dict
    over: np.ndarray | None = None  # [V] bool: where the layer lies over small features (the head)


def dressing(maps: Maps, person_id: int, vertices, faces, vertex_parts, iterations: int = 200,
             rest_vertices=None, head_part: int | None = None, hairline: float | None = None,
             thickness: bool = True) -> Dressing:
    """Where, and how thickly, the photo's clothing and hair cover a posed body.

    Seen vertices (``visible_vertices``) take the offset along their normal to the observed
    surface where the segmentation says clothing or hair, 0 where it says skin. Hidden vertices
    of the body parts the camera saw get two smooth continuations over the mesh graph: how
    likely they are dressed (seen dressed = 1, seen skin = 0) and how thick the seen clothing
    around them is; their thickness is the product, so the front's clothing wraps round the back
    and stops where the seen skin starts. Parts the photo does not show stay bare. With the
    rest-pose vertices and the head's part, hair seen on the head also covers the hidden back of
    the head (``hair_cover``): the continuation alone left a bald back of the head between hair
    seen at its sides and the seen face. The thickness rises no steeper than ``MAX_SLOPE``
    (``limit_slope``). ``thickness=False`` skips the thickness (a bare body's texture needs only
    ``dressed``).
    """
    v = np.asarray(vertices, np.float64)
    n_verts = len(v)
    bare = Dressing(np.zeros(n_verts), np.zeros(n_verts), {"seen_vertices": 0, "dressed_vertices": 0})
    normals = vertex_normals(v, faces)
    points = observed_points(maps)
    if points is None:
        bare.report["note"] = "no depth in the maps: the clothed layer needs depth, the body is left bare"
        return bare
    seen, pix = visible_vertices(v, faces, normals, maps.intrinsics, maps.width, maps.height)
    r, c = pix[:, 0], pix[:, 1]
    offset = np.einsum("ij,ij->i", points[r, c] - v, normals)
    same_person = np.asarray(maps.mask)[r, c] == person_id
    dressed_ids = [i for i, name in enumerate(maps.part_names) if name in DRESSED_CLASSES]
    label = np.asarray(maps.parts)[r, c]
    dressed = np.isin(label, dressed_ids)
    known = seen & same_person & np.isfinite(offset) & (offset < MAX_THICKNESS)
    thick = np.clip(np.nan_to_num(offset), 0.0, MAX_THICKNESS)
    view = -v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
    measured = np.einsum("ij,ij->i", normals, view) > MEASURE_FACING
    seen_dressed = known & dressed & measured
    bare.report.update(seen_vertices=int(known.sum()), dressed_vertices=int(seen_dressed.sum()))
    if not seen_dressed.any():
        return bare
    parts = np.asarray(vertex_parts, np.int64)
    unseen_part = ~np.isin(parts, np.unique(parts[known]))
    edges = mesh_edges(faces)
    # Probability of being dressed: seen vertices, unseen parts and hair-covered hidden head
    # vertices are fixed, the rest diffuse.
    hair = (label == list(maps.part_names).index("Hair")) if "Hair" in maps.part_names else np.zeros(n_verts, bool)
    covered = np.zeros(n_verts, bool)
    if rest_vertices is not None and head_part is not None:
        covered = hair_cover(rest_vertices, parts == head_part, known & hair, hairline) & ~known
    fixed = known | unseen_part | covered
    is_dressed = diffuse(np.where((known & dressed) | covered, 1.0, 0.0), fixed, edges, iterations)
    # Sharpen the probability: the hidden side is dressed or not, with a short smooth seam.
    x = np.clip((is_dressed - 0.3) / 0.4, 0.0, 1.0)
    share = x * x * (3.0 - 2.0 * x)
    if not thickness:
        return Dressing(bare.thickness, share, bare.report)
    # Thickness of the nearby clothing: only the seen dressed vertices are anchors.
    around = diffuse(np.where(seen_dressed, thick, 0.0), seen_dressed, edges, iterations)
    out = np.clip(np.where(seen_dressed, thick, share * around), 0.0, MAX_THICKNESS)
    over = parts == head_part if head_part is not None else None
    return Dressing(limit_slope(out, v, edges), share, bare.report, over)


def limit_slope(thickness: np.ndarray, vertices, edges: np.ndarray, slope: float | None = None) -> np.ndarray:
    """The thickness lowered where it rises faster than ``slope`` (m per m along the mesh) above a
    neighbour's: laid on along the normals, a steeper rise folds the layer through itself (a
    puff of hair measured 4 cm thick beside a bare cheek became a crumpled flap). Only lowers,
    so the layer stays outside the body."""
    t = np.asarray(thickness, np.float64).copy()
    v = np.asarray(vertices, np.float64)
    reach = (MAX_SLOPE if slope is None else slope) * np.linalg.norm(v[edges[:, 0]] - v[edges[:, 1]], axis=1)
    for _ in range(len(t)):  # converges in about max thickness / (slope x edge length) passes
        capped = t.copy()
        np.minimum.at(capped, edges[:, 0], t[edges[:, 1]] + reach)
        np.minimum.at(capped, edges[:, 1], t[edges[:, 0]] + reach)
        if np.array_equal(capped, t):
            break
        t = capped
    return t


def head_landmarks(template, fit, index: int) -> dict:
    """``dressing``'s head landmarks from a body template and fit (``core.body.records``): the head's part
    and the eyes' rest height (the hidden back of a haired head is hair down to there)."""
    out = {}
    if "Face_Neck" in template.part_names:
        out["head_part"] = template.part_names.index("Face_Neck")
    eyes = [template.bone_names.index(n) for n in ("eye.L", "eye.R") if n in template.bone_names]
    if eyes:
        out["hairline"] = float(np.mean(np.asarray(fit.rest_bone_matrices[index])[eyes, 2, 3]))
    return out


def hair_cover(rest_vertices, head: np.ndarray, seen_hair: np.ndarray, hairline: float | None = None) -> np.ndarray:
    """[V] bool: where the hair a photo shows on the head goes on out of sight: the back half of
    the head, down to the lowest hair seen on it or to ``hairline`` (a rest-pose height), whichever
    is lower (a photo from the front shows the hair on top; it goes on down the back). Rest pose:
    anny's frame, +z up, the face towards -y. Nothing unless enough hair is seen (a few pixels
    may be mislabelled)."""
    rest = np.asarray(rest_vertices, np.float64)
    if (seen_hair & head).sum() < MIN_HAIR_SEEN or not head.any():
        return np.zeros(len(rest), bool)
    level = np.percentile(rest[seen_hair & head, 2], 10.0)
    if hairline is not None:
        level = min(level, hairline)
    middle = 0.5 * (rest[head, 1].min() + rest[head, 1].max())
    return head & (rest[:, 2] >= level) & (rest[:, 1] >= middle)


def relax(values: np.ndarray, edges: np.ndarray, iterations: int) -> np.ndarray:
    """``values`` ([V] or [V,C]) moved halfway to their neighbours' mean ``iterations`` times."""
    out = np.asarray(values, np.float64).copy()
    degree = np.maximum(np.bincount(edges.ravel(), minlength=len(out)), 1).astype(np.float64)
    degree = degree[:, None] if out.ndim == 2 else degree
    for _ in range(iterations):
        out = 0.5 * out + 0.5 * _neighbour_sum(out, edges, len(out)) / degree
    return out


def dress(vertices: np.ndarray, faces: np.ndarray, thickness: np.ndarray, over=None) -> np.ndarray:
    """The body with its clothing layer: each vertex moved out by its thickness along the normals
    of the body relaxed ``DRESSING_RELAX`` times, so that cloth bridges narrow grooves (the spine,
    between the buttocks) instead of pushing a groove's sides through each other as the raw
    normals would. Where ``over`` (``Dressing.over``: the head), the layer lies instead over the
    body relaxed ``OVER_RELAX`` times, at the same height above it on average: hair lies over
    the ears rather than following (and sharpening) their folds, which crumpled into flaps under
    the demo's hair. Where hair is thinner than an ear stands out it could come inside the ear's
    rim (none did on the demo or the tests).
    """
    v = np.asarray(vertices, np.float64)
    t = np.asarray(thickness, np.float64)
    edges = mesh_edges(faces)
    layer = v + t[:, None] * vertex_normals(relax(v, edges, DRESSING_RELAX), faces)
    if over is None or not (np.asarray(over) & (t > 0)).any():
        return layer
    base = relax(v, edges, OVER_RELAX)
    normal = vertex_normals(base, faces)
    height = relax(np.einsum("ij,ij->i", v - base, normal), edges, OVER_RELAX)  # the features, averaged out
    weight = (np.asarray(over, np.float64) * np.clip(t / OVER_THICKNESS, 0.0, 1.0))[:, None]
    return layer + weight * (base + (height + t)[:, None] * normal - layer)
