# SPDX-License-Identifier: GPL-3.0-or-later
"""The photo baked into a fitted body's texture: the photo where seen, the hidden side carried
round each part (from its other side, from the parts round it), fades.

On bodies made by the fit's own body model (tests/support/body_scenes.py).
"""

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

from sapiens_blender.core.body import surface as bs, texture as bt

pytestmark = [pytest.mark.anny]


def test_texture_takes_the_photo_where_seen_and_a_fill_elsewhere(body_scene):
    scene = body_scene("standing")
    t, f, maps = scene.template, scene.fit, scene.maps
    tex, report = bt.bake_texture(maps, 1, f.vertices[0], t.faces, t.uv, t.face_uv, size=256)
    assert tex.shape == (256, 256, 3) and tex.dtype == np.uint8
    assert 0.2 < report["seen_texels"] / report["texels"] < 0.7  # the front of the body, not the back
    body_colour = np.array([200, 170, 150])  # what scenes.render paints the person
    rows, cols, face, bary = bs.rasterize(np.stack([t.uv[:, 0] * 256, (1 - t.uv[:, 1]) * 256], 1)[t.face_uv], 256, 256)
    assert np.abs(tex[rows, cols].astype(int) - body_colour).max(axis=1).mean() < 30


def test_texture_skips_what_is_in_front_of_the_body(body_scene):
    """A metric photo whose surface lies well in front of the body there (a held object counted
    as the person) gives no texture there: the fill shows instead."""
    import copy

    scene = body_scene("standing")
    t, f = scene.template, scene.fit
    maps = copy.deepcopy(scene.maps)
    _, clean = bt.bake_texture(maps, 1, f.vertices[0], t.faces, t.uv, t.face_uv, size=128)
    maps.pointmap[:, :, 2] -= 0.5  # everything observed half a metre nearer than the body
    maps.image[:] = (0, 0, 0)
    tex, blocked = bt.bake_texture(maps, 1, f.vertices[0], t.faces, t.uv, t.face_uv, size=128)
    assert clean["seen_texels"] > 1000 and blocked["seen_texels"] == 0
    assert (tex.reshape(-1, 3) == bt.SKIN_FILL).all(axis=1).mean() > 0.3


def test_texture_fill_fades_between_parts_instead_of_stepping_along_triangles(body_scene):
    """The hidden side takes each part's seen colour (a shirt's blue round the back), and where
    one part's fill meets another's (the shirt's hem on the skin) it fades over a few rings of
    the mesh: per-triangle fills made a saw-tooth hem, 111 colour levels from one texel to the next."""
    scene = body_scene("dressed")
    t, f, maps = scene.template, scene.fit, scene.maps
    faces, size = t.faces.astype(np.int64), 256
    tex, _ = bt.bake_texture(maps, 1, f.vertices[0], faces, t.uv, t.face_uv, bs.face_parts(faces, t.vertex_parts),
                             size=size)
    rows, cols, face, _ = bs.rasterize(np.stack([t.uv[:, 0] * size, (1 - t.uv[:, 1]) * size], 1)[t.face_uv], size, size)
    tri = f.vertices[0].astype(np.float64)[faces]
    normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    away = np.einsum("ij,ij->i", normal, tri.mean(1)) > 0  # turned from the camera: never seen
    face_of = np.full((size, size), -1)
    face_of[rows, cols] = face
    a, b = face_of[:, :-1], face_of[:, 1:]  # texels side by side, in two triangles sharing a corner
    pair = (a >= 0) & (b >= 0) & (a != b)
    pair &= away[a.clip(0)] & away[b.clip(0)]
    pair &= (faces[a.clip(0)][..., :, None] == faces[b.clip(0)][..., None, :]).any((-1, -2))
    colour = tex.astype(int)
    step = np.abs(colour[:, :-1] - colour[:, 1:]).max(-1)[pair]
    assert pair.sum() > 1000 and step.max() <= 40, f"{int((step > 40).sum())} steps over 40 levels (max {step.max()})"
    # Away from the hem the fill is the part's own: the back of the torso is the shirt's blue.
    torso = t.part_names.index("Torso")
    back = tex[rows, cols][away[face] & (bs.face_parts(faces, t.vertex_parts)[face] == torso)].astype(int)
    assert np.median(back[:, 2]) > np.median(back[:, 0]) + 40, "the shirt's blue goes round the back"


def _hidden_texels(t, f, size):
    """Per texel of the baked layout: (rows, cols, its face, the face turned from the camera)."""
    faces = t.faces.astype(np.int64)
    rows, cols, face, _ = bs.rasterize(np.stack([t.uv[:, 0] * size, (1 - t.uv[:, 1]) * size], 1)[t.face_uv], size, size)
    tri = f.vertices[0].astype(np.float64)[faces]
    normal = np.cross(tri[:, 1] - tri[:, 0], tri[:, 2] - tri[:, 0])
    return rows, cols, face, (np.einsum("ij,ij->i", normal, tri.mean(1)) > 0)[face]


def test_texture_carries_each_parts_colours_round_its_hidden_side(body_scene, monkeypatch):
    """A light shirt over dark shorts, both on the torso part: the hidden back takes the shirt's
    colour at the chest and the shorts' at the hips (carried round the part from the sides the
    camera sees), where one median per part painted the whole back one colour."""
    import copy

    from sapiens_blender.core.geometry.surface import unproject

    scene = body_scene("standing")
    t, f = scene.template, scene.fit
    maps = copy.deepcopy(scene.maps)
    faces, size = t.faces.astype(np.int64), 256
    posed = f.vertices[0].astype(np.float64)
    torso_v = t.vertex_parts == t.part_names.index("Torso")
    top, bottom = posed[torso_v, 1].min(), posed[torso_v, 1].max()  # camera y points down
    middle = 0.5 * (top + bottom)
    h, w = maps.depth.shape
    points = unproject(np.arange(h)[:, None], np.arange(w)[None, :], maps.depth, maps.intrinsics)
    person = maps.mask == 1
    light, dark = np.array([225, 225, 215]), np.array([35, 40, 60])
    maps.image[person & (np.nan_to_num(points[..., 1], nan=1e9) < middle)] = light
    maps.image[person & (np.nan_to_num(points[..., 1], nan=-1e9) >= middle)] = dark
    per_face = bs.face_parts(faces, t.vertex_parts)
    rows, cols, face, hidden = _hidden_texels(t, f, size)
    of_torso = hidden & (per_face[face] == t.part_names.index("Torso"))
    height = posed[faces[face], 1].mean(1)
    chest = of_torso & (height < top + 0.3 * (bottom - top))
    hips = of_torso & (height > bottom - 0.3 * (bottom - top))
    assert chest.sum() > 500 and hips.sum() > 500

    def back(**names):
        tex, _ = bt.bake_texture(maps, 1, posed, faces, t.uv, t.face_uv, per_face, size=size, **names)
        return (np.median(tex[rows[chest], cols[chest]].astype(float), axis=0),
                np.median(tex[rows[hips], cols[hips]].astype(float), axis=0))

    chest_colour, hips_colour = back(part_names=t.part_names)
    assert np.abs(chest_colour - light).max() < 40, chest_colour
    assert np.abs(hips_colour - dark).max() < 40, hips_colour
    monkeypatch.setattr(bt, "carry_colours", lambda *a, **k: a[5])  # the part's median alone (before)
    _, hips_before = back()
    assert np.abs(hips_before - dark).max() > 100, hips_before  # the shirt painted down over the shorts


def _trousers_with_hidden(body_scene, hidden_parts):
    """The standing scene in trousers (legs and feet one colour), ``hidden_parts`` out of sight (not
    the person's pixels): (scene, maps, the trousers' colour, the median texel colour of the hidden
    parts baked with the given extras)."""
    import copy

    scene = body_scene("standing")
    t = scene.template
    maps = copy.deepcopy(scene.maps)
    trousers = np.array([40, 60, 120])
    legs = [t.part_names.index(f"{side}_{p}") for side in ("Left", "Right") for p in ("Upper_Leg", "Lower_Leg", "Foot")]
    maps.image[np.isin(maps.parts, legs)] = trousers
    maps.mask[np.isin(maps.parts, [t.part_names.index(p) for p in hidden_parts])] = 0
    faces, size = t.faces.astype(np.int64), 256
    per_face = bs.face_parts(faces, t.vertex_parts)
    rows, cols, face, _ = _hidden_texels(t, scene.fit, size)
    hidden = np.isin(per_face[face], [t.part_names.index(p) for p in hidden_parts])

    def colour(**extra):
        tex, _ = bt.bake_texture(maps, 1, scene.fit.vertices[0], faces, t.uv, t.face_uv, per_face, size=size, **extra)
        return np.median(tex[rows[hidden], cols[hidden]].astype(float), axis=0)

    return scene, trousers, colour


def test_a_part_the_camera_barely_sees_is_dressed_like_its_other_side(body_scene, monkeypatch):
    """Trousers (a bare torso), one thigh hidden behind something: it takes the mean of its
    mirror image's colour on the seen thigh (the trousers) and of the colours round it (trousers
    below, skin above), not the neutral skin a part barely seen took before."""
    scene, trousers, thigh_colour = _trousers_with_hidden(body_scene, ["Right_Upper_Leg"])
    names = dict(part_names=scene.template.part_names, rest_vertices=scene.fit.rest_vertices[0])
    around = thigh_colour(part_names=scene.template.part_names)  # no rest pose: no mirror image
    assert np.abs(around - trousers).max() > 60  # the skin above pulls it away
    assert np.abs(thigh_colour(**names) - 0.5 * (around + trousers)).max() < 15
    monkeypatch.setattr(bt, "carry_colours", lambda *a, **k: a[5])  # before: one fill per part
    assert np.abs(thigh_colour(**names) - bt.SKIN_FILL).max() < 25


def test_parts_unseen_on_both_sides_continue_the_colours_round_them(body_scene, monkeypatch):
    """Trousers, both shins out of sight (a table's edge): they continue the thighs' and feet's
    colour, not the neutral skin of before."""
    scene, trousers, shins_colour = _trousers_with_hidden(body_scene, ["Left_Lower_Leg", "Right_Lower_Leg"])
    names = dict(part_names=scene.template.part_names, rest_vertices=scene.fit.rest_vertices[0])
    assert np.abs(shins_colour(**names) - trousers).max() < 25
    monkeypatch.setattr(bt, "carry_colours", lambda *a, **k: a[5])
    assert np.abs(shins_colour(**names) - bt.SKIN_FILL).max() < 25


def test_texture_fades_what_the_camera_sees_edge_on_into_the_fill(body_scene, monkeypatch):
    """A photo pixel seen nearly edge-on is smeared over much of the surface (and, in a real
    photo, mixes in what lies beside the person): such texels fade into the part's fill. Here
    the pixels whose true surface is within 9 degrees of edge-on (under 2 % of the person) are
    painted green; faded, under 0.75x the green reaches the texture (0.68x), and the surfaces
    facing the camera keep the photo's colour exactly."""
    import copy

    from sapiens_blender.core.geometry.surface import unproject

    scene = body_scene("standing")
    t, f = scene.template, scene.fit
    maps = copy.deepcopy(scene.maps)
    person = maps.mask == 1
    h, w = maps.depth.shape
    points = unproject(np.arange(h)[:, None], np.arange(w)[None, :], maps.depth, maps.intrinsics)
    view = -points / np.linalg.norm(points, axis=-1, keepdims=True)
    cosine = np.einsum("hwc,hwc->hw", np.nan_to_num(maps.normal), np.nan_to_num(view))
    edge_on = person & (cosine < 0.15)
    assert 0 < edge_on.sum() < 0.03 * person.sum()
    skin, green = np.array([200.0, 170.0, 150.0]), np.array([20.0, 200.0, 40.0])
    maps.image[person], maps.image[edge_on] = skin, green

    def bake():
        tex, _ = bt.bake_texture(maps, 1, f.vertices[0], t.faces, t.uv, t.face_uv, size=256)
        share = ((tex.astype(float) - skin) @ (green - skin)) / ((green - skin) @ (green - skin))
        return share.clip(0, 1).sum(), (np.abs(tex.astype(int) - skin).max(-1) == 0).sum()

    faded_green, faded_skin = bake()
    monkeypatch.setattr(bt, "FADE_FACING", bs.FACING_MIN + 1e-9)  # no fade
    sharp_green, sharp_skin = bake()
    assert faded_green < 0.75 * sharp_green, (faded_green, sharp_green)
    assert abs(faded_skin - sharp_skin) < 0.15 * sharp_skin
