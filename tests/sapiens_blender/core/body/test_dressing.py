# SPDX-License-Identifier: GPL-3.0-or-later
"""The clothed layer: thicker where clothing is labelled and never inside, hair carried over the
head's hidden back and over the ears, slopes limited.

On bodies made by the fit's own body model (tests/support/body_scenes.py).
"""

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

from sapiens_blender.core.body import dressing as dr
from sapiens_blender.core.body import surface as bs, texture as bt

pytestmark = [pytest.mark.anny]


def test_clothed_layer_is_thicker_where_clothing_is_labelled_and_never_inside(body_scene):
    import trimesh

    from body_scenes import DRESS

    scene = body_scene("dressed")
    t, f = scene.template, scene.fit
    posed = f.vertices[0].astype(np.float64)
    worn = dr.dressing(scene.maps, 1, posed, t.faces, t.vertex_parts)
    thickness, report = worn.thickness, worn.report
    names, parts = t.part_names, t.vertex_parts
    facing = np.einsum("ij,ij->i", bs.vertex_normals(posed, t.faces), -posed / np.linalg.norm(posed, axis=1)[:, None])
    torso = parts == names.index("Torso")
    front, back = thickness[torso & (facing > 0.5)], thickness[torso & (facing < -0.3)]
    assert 0.7 * DRESS < np.median(front) < 1.2 * DRESS, np.median(front)
    assert np.median(back) > 0.5 * DRESS, "the hidden side of the shirt is dressed too"
    for skin in ("Left_Lower_Arm", "Right_Lower_Arm", "Left_Lower_Leg", "Face_Neck"):
        assert np.median(thickness[parts == names.index(skin)]) < 0.002, skin
    assert thickness.min() >= 0 and report["dressed_vertices"] > 100
    # A bare body gets (almost) nothing.
    bare = body_scene("standing")
    bare_thickness = dr.dressing(bare.maps, 1, bare.fit.vertices[0], t.faces, t.vertex_parts).thickness
    assert bare_thickness.max() == 0.0
    # Never inside: the dressed rest body's vertices lie outside (or on) the bare rest body.
    rest = f.rest_vertices[0].astype(np.float64)
    dressed = dr.dress(rest, t.faces, thickness)
    moved = np.flatnonzero(thickness > 5e-4)
    signed = trimesh.proximity.signed_distance(trimesh.Trimesh(rest, t.faces, process=False), dressed[moved])
    assert signed.max() < 1e-4, f"{int((signed >= 1e-4).sum())} clothed vertices inside the body"


def _facing_camera(vertices, faces):
    return np.einsum("ij,ij->i", bs.vertex_normals(vertices, faces), -vertices / np.linalg.norm(vertices, axis=1)[:, None])


def test_hair_seen_on_the_head_covers_its_hidden_back_in_shape_and_colour(body_scene):
    """A head-and-shoulders photo shows the hair on top; the true hair (1.5 cm) also covers the
    back of the head down to the ears. The continuation alone left that back bald, in shape and
    colour (the head's fill was the median of face and hair: skin)."""
    from body_scenes import HAIR, hair_region

    scene = body_scene("haired")
    t, f, maps = scene.template, scene.fit, scene.maps
    posed, rest = f.vertices[0].astype(np.float64), f.rest_vertices[0].astype(np.float64)
    landmarks = dr.head_landmarks(t, f, 0)
    hair = hair_region(t, rest)
    facing = _facing_camera(posed, t.faces)
    hidden_hair = hair & (facing < -0.2)
    face = (t.vertex_parts == landmarks["head_part"]) & ~hair & (facing > 0.5)
    assert hidden_hair.sum() > 100 and face.sum() > 100
    worn = dr.dressing(maps, 1, posed, t.faces, t.vertex_parts, rest_vertices=rest, **landmarks)
    alone = dr.dressing(maps, 1, posed, t.faces, t.vertex_parts, rest_vertices=rest)  # no head landmarks
    assert np.median(worn.dressed[hidden_hair]) > 0.9 and np.median(alone.dressed[hidden_hair]) < 0.5
    assert 0.4 * HAIR < np.median(worn.thickness[hidden_hair]) < 1.3 * HAIR, np.median(worn.thickness[hidden_hair])
    assert np.median(worn.thickness[face]) < 1e-3 and worn.dressed[face].max() < 0.5  # the face stays bare

    photo_hair = np.median(maps.image[maps.parts == list(maps.part_names).index("Hair")].astype(float), axis=0)
    rows, cols, face_of, _ = bs.rasterize(np.stack([t.uv[:, 0] * 256, (1 - t.uv[:, 1]) * 256], 1)[t.face_uv], 256, 256)
    back = hidden_hair[t.faces].all(axis=1)[face_of]
    per_face = bs.face_parts(t.faces, t.vertex_parts)

    def back_colour(dressed):
        tex, _ = bt.bake_texture(maps, 1, posed, t.faces, t.uv, t.face_uv, per_face, size=256, dressed=dressed)
        return np.median(tex[rows[back], cols[back]].astype(float), axis=0)

    assert np.abs(back_colour(worn.dressed) - photo_hair).max() < 25, (back_colour(worn.dressed), photo_hair)
    assert np.abs(back_colour(None) - photo_hair).max() > 40  # without the dressing: the skin-ish mix


def _haired_head(body_scene):
    """The haired scene's rest body: (vertices, faces, edges, head landmarks, head [V] bool)."""
    scene = body_scene("haired")
    t, f = scene.template, scene.fit
    faces = t.faces.astype(np.int64)
    landmarks = dr.head_landmarks(t, f, 0)
    return (f.rest_vertices[0].astype(np.float64), faces, bs.mesh_edges(faces), landmarks,
            t.vertex_parts == landmarks["head_part"])


def test_clothing_rises_no_steeper_than_the_slope_limit(body_scene):
    """A 4 cm puff of hair measured beside a bare cheek, laid on along the normals, folds the
    layer through itself (the demo's crumpled flaps at the ears); limited to MAX_SLOPE it does
    not. The dressing keeps to the limit on every edge."""
    rest, faces, edges, landmarks, head = _haired_head(body_scene)
    ear = np.array([rest[head, 0].max(), 0.5 * (rest[head, 1].min() + rest[head, 1].max()), landmarks["hairline"]])
    puff = np.where(head & (np.linalg.norm(rest - ear, axis=1) < 0.03), 0.04, 0.0)

    def turned(thickness):
        layer = dr.dress(rest, faces, thickness)
        return int((np.einsum("ij,ij->i", bs.face_normals(layer, faces), bs.face_normals(rest, faces)) < 0).sum())

    limited = dr.limit_slope(puff, rest, edges)
    assert turned(puff) > 100 and turned(limited) == 0, (turned(puff), turned(limited))
    # Only lowered, and no more than needed: a lowered vertex rises exactly the limit above a neighbour.
    reach = dr.MAX_SLOPE * np.linalg.norm(rest[edges[:, 0]] - rest[edges[:, 1]], axis=1)
    tight = np.zeros(len(rest), bool)
    for a, b in ((0, 1), (1, 0)):
        tight[edges[np.abs(limited[edges[:, a]] - limited[edges[:, b]] - reach) < 1e-9, a]] = True
    lowered = limited < puff - 1e-12
    assert (limited <= puff).all() and lowered.any() and tight[lowered].all() and limited.max() > 0.01
    dressed = body_scene("dressed")
    thickness = dr.dressing(dressed.maps, 1, dressed.fit.vertices[0], faces, dressed.template.vertex_parts).thickness
    length = np.linalg.norm(dressed.fit.vertices[0][edges[:, 0]] - dressed.fit.vertices[0][edges[:, 1]], axis=1)
    assert (np.abs(thickness[edges[:, 0]] - thickness[edges[:, 1]]) <= dr.MAX_SLOPE * length + 1e-9).all()


def test_hair_lies_over_the_ears_instead_of_following_their_folds(body_scene):
    """2 cm of hair over the back of the head, ears included: laid on along the normals the layer keeps (and
    sharpens) the ear's folds, rougher than the bare ear; laid over the relaxed head
    (``Dressing.over``) it is smoother than the ear, and still outside the body."""
    import trimesh

    rest, faces, edges, landmarks, head = _haired_head(body_scene)
    ear = head & (np.abs(rest[:, 0]) > rest[head, 0].max() - 0.025) & (np.abs(rest[:, 2] - landmarks["hairline"]) < 0.04)
    assert ear.sum() > 300
    behind_face = rest[:, 1] >= 0.5 * (rest[head, 1].min() + rest[head, 1].max()) - 0.03  # the ears, not the nose
    covered = head & behind_face & (rest[:, 2] >= landmarks["hairline"] - 0.04)
    hair = dr.limit_slope(np.where(covered, 0.02, 0.0), rest, edges)

    def roughness(points):  # mean distance of the ear's vertices from their neighbours' mean
        return float(np.linalg.norm(points - dr.relax(points, edges, 1), axis=1)[ear].mean())

    along, over = dr.dress(rest, faces, hair), dr.dress(rest, faces, hair, head)
    assert roughness(along) > roughness(rest) > 1.2 * roughness(over), (roughness(along), roughness(rest), roughness(over))
    moved = hair > 5e-4
    signed = trimesh.proximity.signed_distance(trimesh.Trimesh(rest, faces, process=False), over[moved])
    assert (signed > 1e-3).sum() < 0.01 * moved.sum(), "over the ears, not inside the head"
