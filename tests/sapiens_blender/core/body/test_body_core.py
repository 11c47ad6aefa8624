# SPDX-License-Identifier: GPL-3.0-or-later
"""The numpy side of the fitted body: data round-trips, cache, pose, weights, rig names, the
clothed layer and the texture, on bodies made by the fit's own body model."""

import json

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

from sapiens_blender.core.body import cache as body_cache, pose as body_pose, records as body_records
from sapiens_blender.core.body import dressing as dr
from sapiens_blender.core.body import surface as bs
from sapiens_blender.core.geometry.rotations import matrix_to_quaternion
from sapiens_blender.core.body.records import BodyError, BodyFit, BodyTemplate
from sapiens_blender.core.body.rig_names import RIG_NAMES, rename_table, retarget_rig
from sapiens_blender.core.geometry import joints_io
from sapiens_blender.core.maps.canonical import Maps

pytestmark = [pytest.mark.anny]


def test_template_and_fit_round_trip_through_a_maps_npz(body_scene, tmp_path):
    scene = body_scene("two")
    path = scene.maps.save(tmp_path / "two.npz")
    template, fit = body_records.body_from_maps(Maps.load(path))
    assert template.body_version == scene.template.body_version and template.bone_names == scene.template.bone_names
    for name in ("faces", "uv", "face_uv", "weight_bones", "weight_values", "vertex_parts"):
        assert np.array_equal(getattr(template, name), getattr(scene.template, name)), name
    for name in ("person_ids", "rest_bone_matrices", "bone_matrices", "placement", "vertices", "joints"):
        assert np.array_equal(getattr(fit, name), getattr(scene.fit, name)), name
    assert fit.report(2) == {"scene": "two"}
    assert "body_version" in np.load(path).files and "fit_body_version" in np.load(path).files


def test_malformed_fits_get_clear_errors(body_scene):
    scene = body_scene("standing")
    arrays = scene.fit.to_arrays()
    bad = dict(arrays, vertices=arrays["vertices"][:, :100])
    with pytest.raises(BodyError, match="vertices must have shape"):
        BodyFit.from_arrays(bad)
    with pytest.raises(BodyError, match="made for body model"):
        BodyFit.from_arrays(dict(arrays, body_version=np.array("other/1")), template=scene.template)
    with pytest.raises(BodyError, match="missing: rest_vertices"):
        BodyFit.from_arrays({k: v for k, v in arrays.items() if k != "rest_vertices"})
    t = scene.template.to_arrays()
    with pytest.raises(BodyError, match="parent must come before"):
        BodyTemplate.from_arrays(dict(t, bone_parents=np.roll(t["bone_parents"], 1)))
    with pytest.raises(BodyError, match="no person 7"):
        scene.fit.index(7)


def test_template_cache_is_keyed_by_version_and_written_atomically(body_scene, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    template = body_scene("standing").template
    assert body_cache.load_cached_template(template.body_version) is None
    path = body_cache.save_cached_template(template)
    assert path.parent == tmp_path / "sapiens_blender" / "body" and "/" not in path.name
    assert [p.name for p in path.parent.iterdir()] == [path.name]  # no temporary file left
    cached = body_cache.load_cached_template(template.body_version)
    assert np.array_equal(cached.faces, template.faces) and cached.joint_names == template.joint_names
    assert body_cache.load_cached_template("anny-9/anny/9") is None
    path.write_bytes(b"damaged")
    assert body_cache.load_cached_template(template.body_version) is None  # fetched again, no crash


def test_local_quaternions_rebuild_the_pose_and_keep_continuous_signs(body_scene):
    scene = body_scene("standing")
    t, f = scene.template, scene.fit
    rest, pose = f.rest_bone_matrices[0].astype(np.float64), f.bone_matrices[0].astype(np.float64)
    quats, locs = body_pose.local_pose_quaternions(rest, pose, t.bone_parents)
    assert np.all(quats[:, 0] >= 0) and np.allclose(np.linalg.norm(quats, axis=1), 1)
    # Forward kinematics with the quaternions (as Blender does) gives the pose back.
    w, x, y, z = quats.T
    rot = np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w),
                    2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w),
                    2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)], 1).reshape(-1, 3, 3)
    basis = np.tile(np.eye(4), (len(rot), 1, 1))
    basis[:, :3, :3], basis[:, :3, 3] = rot, locs
    world = np.zeros_like(pose)
    for b, p in enumerate(t.bone_parents):
        world[b] = (rest[b] if p < 0 else world[p] @ np.linalg.inv(rest[p]) @ rest[b]) @ basis[b]
    assert np.abs(world - pose).max() < 1e-5
    # A rotation by nearly 360 degrees about an axis comes out the short way (w >= 0).
    angle = np.radians(350.0)
    r = np.array([[1, 0, 0], [0, np.cos(angle), -np.sin(angle)], [0, np.sin(angle), np.cos(angle)]])
    q = matrix_to_quaternion(r)
    assert q[0] > 0 and np.isclose(q[0], np.cos(np.radians(5.0)))


def test_rest_pose_is_mirror_symmetric_and_skinning_reproduces_the_fit(body_scene):
    scene = body_scene("standing")
    t, f = scene.template, scene.fit
    heads = f.rest_bone_matrices[0, :, :3, 3]
    assert body_pose.mirror_asymmetry(heads, t.bone_names) < 0.01
    skinned = body_pose.skin_vertices(f.rest_vertices[0], f.rest_bone_matrices[0], f.bone_matrices[0],
                                      t.weight_bones, t.weight_values)
    placed = skinned @ f.placement[0, :3, :3].T.astype(np.float64) + f.placement[0, :3, 3]
    assert np.abs(placed - f.vertices[0]).max() < 1e-4


def test_weights_pruned_to_four_and_renormalised(body_scene):
    t = body_scene("standing").template
    assert t.weight_bones.shape[1] > 4 and (np.count_nonzero(t.weight_values, axis=1) > 4).any()
    bones, values = body_pose.prune_weights(t.weight_bones, t.weight_values)
    assert bones.shape == (t.num_vertices, 4) and np.allclose(values.sum(1), 1, atol=1e-6)
    assert np.all(np.diff(values, axis=1) <= 1e-7)  # largest first
    # The kept weights are each vertex's four largest, all scaled by the same factor.
    top = -np.sort(-t.weight_values, axis=1)[:, :4]
    assert np.allclose(values, top / top.sum(1, keepdims=True), atol=1e-6)
    rows = np.arange(t.num_vertices)[:, None]
    dense = np.zeros((t.num_vertices, t.num_bones))
    np.add.at(dense, (np.broadcast_to(rows, t.weight_bones.shape), t.weight_bones), t.weight_values)
    assert np.allclose(dense[np.broadcast_to(rows, bones.shape), bones][values > 0],
                       (values * top.sum(1, keepdims=True))[values > 0], atol=1e-6)


MAIN = ["root", "spine05", "spine03", "spine01", "neck01", "head", "clavicle", "upperarm01", "lowerarm01", "wrist",
        "upperleg01", "lowerleg01", "foot", "toe3-1"] + [f"finger{n}-{k}" for n in range(1, 6) for k in (1, 2, 3)]
# Hierarchies of the targets, written from their published skeletons (child: parent, left side).
MIXAMO_PARENTS = {"Spine": "Hips", "Spine1": "Spine", "Spine2": "Spine1", "Neck": "Spine2", "Head": "Neck",
                  "LeftShoulder": "Spine2", "LeftArm": "LeftShoulder", "LeftForeArm": "LeftArm",
                  "LeftHand": "LeftForeArm", "LeftUpLeg": "Hips", "LeftLeg": "LeftUpLeg", "LeftFoot": "LeftLeg",
                  "LeftToeBase": "LeftFoot", "LeftEye": "Head",
                  **{f"LeftHand{f}{k}": (f"LeftHand{f}{k - 1}" if k > 1 else "LeftHand")
                     for f in ("Thumb", "Index", "Middle", "Ring", "Pinky") for k in (1, 2, 3)}}
UNREAL_PARENTS = {"spine_01": "pelvis", "spine_02": "spine_01", "spine_03": "spine_02", "spine_04": "spine_03",
                  "spine_05": "spine_04", "neck_01": "spine_05", "neck_02": "neck_01", "head": "neck_02",
                  "clavicle_l": "spine_05", "upperarm_l": "clavicle_l", "upperarm_twist_01_l": "upperarm_l",
                  "lowerarm_l": "upperarm_l", "lowerarm_twist_01_l": "lowerarm_l", "hand_l": "lowerarm_l",
                  "thigh_l": "pelvis", "thigh_twist_01_l": "thigh_l", "calf_l": "thigh_l",
                  "calf_twist_01_l": "calf_l", "foot_l": "calf_l", "ball_l": "foot_l",
                  "thumb_01_l": "hand_l", "thumb_02_l": "thumb_01_l", "thumb_03_l": "thumb_02_l",
                  **{f"{f}_metacarpal_l": "hand_l" for f in ("index", "middle", "ring", "pinky")},
                  **{f"{f}_0{k}_l": (f"{f}_0{k - 1}_l" if k > 1 else f"{f}_metacarpal_l")
                     for f in ("index", "middle", "ring", "pinky") for k in (1, 2, 3)}}


@pytest.mark.parametrize("rig,expected", [("mixamo", MIXAMO_PARENTS), ("unreal", UNREAL_PARENTS)])
def test_rig_names_map_every_main_bone_onto_the_target_hierarchy(body_scene, rig, expected):
    t = body_scene("standing").template
    names, parents = retarget_rig(t.bone_names, t.bone_parents, rig)
    table = rename_table(rig)
    for bone in MAIN:
        for side in (".L", ".R") if bone[0] in "cuwlft" and bone not in ("head",) else ("",):
            assert bone + side in table, f"{bone + side} is not mapped for {rig}"
    prefix = "mixamorig:" if rig == "mixamo" else ""
    parent_of = {n: (names[p] if p >= 0 else None) for n, p in zip(names, parents)}
    for child, parent in expected.items():
        assert parent_of[prefix + child] == prefix + parent, child
        mirrored = child.replace("Left", "Right").replace("_l", "_r")
        assert mirrored in [n.removeprefix(prefix) for n in names]
    assert all(parents[i] < i for i in range(len(parents)))  # still parents before children
    same_names, same_parents = retarget_rig(t.bone_names, t.bone_parents, "anny")
    assert same_names == list(t.bone_names) and np.array_equal(same_parents, t.bone_parents)
    with pytest.raises(ValueError, match="unknown rig names"):
        rename_table("maya")
    assert set(RIG_NAMES) == {"anny", "rigify", "mixamo", "unreal"}


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
        tex, _ = bs.bake_texture(maps, 1, posed, t.faces, t.uv, t.face_uv, per_face, size=256, dressed=dressed)
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


def test_texture_takes_the_photo_where_seen_and_a_fill_elsewhere(body_scene):
    scene = body_scene("standing")
    t, f, maps = scene.template, scene.fit, scene.maps
    tex, report = bs.bake_texture(maps, 1, f.vertices[0], t.faces, t.uv, t.face_uv, size=256)
    assert tex.shape == (256, 256, 3) and tex.dtype == np.uint8
    assert 0.2 < report["seen_texels"] / report["texels"] < 0.7  # the front of the body, not the back
    body_colour = np.array([200, 170, 150])  # what scenes.render paints the person
    rows, cols, face, bary = bs.rasterize(np.stack([t.uv[:, 0] * 256, (1 - t.uv[:, 1]) * 256], 1)[t.face_uv], 256, 256)
    assert np.abs(tex[rows, cols].astype(int) - body_colour).max(axis=1).mean() < 30


def test_joints_of_a_fit_write_a_joints_file_that_reads_back(body_scene, tmp_path):
    scene = body_scene("two")
    people = {pid: body_pose.fit_joints(scene.template, scene.fit, pid) for pid in (1, 2)}
    assert len(people[1]) == len(scene.template.joint_names)
    path = joints_io.write(tmp_path / "joints.json", people)
    back = joints_io.read(path, complete=False)
    assert np.allclose(back[2]["left_wrist"].xyz, scene.fit.joints[1, scene.template.joint_names.index("left_wrist")])
    assert json.loads(path.read_text())["people"][0]["id"] == 1


def test_texture_skips_what_is_in_front_of_the_body(body_scene):
    """A metric photo whose surface lies well in front of the body there (a held object counted
    as the person) gives no texture there: the fill shows instead."""
    import copy

    scene = body_scene("standing")
    t, f = scene.template, scene.fit
    maps = copy.deepcopy(scene.maps)
    _, clean = bs.bake_texture(maps, 1, f.vertices[0], t.faces, t.uv, t.face_uv, size=128)
    maps.pointmap[:, :, 2] -= 0.5  # everything observed half a metre nearer than the body
    maps.image[:] = (0, 0, 0)
    tex, blocked = bs.bake_texture(maps, 1, f.vertices[0], t.faces, t.uv, t.face_uv, size=128)
    assert clean["seen_texels"] > 1000 and blocked["seen_texels"] == 0
    assert (tex.reshape(-1, 3) == bs.SKIN_FILL).all(axis=1).mean() > 0.3


def test_texture_fill_fades_between_parts_instead_of_stepping_along_triangles(body_scene):
    """The hidden side takes each part's seen colour (a shirt's blue round the back), and where
    one part's fill meets another's (the shirt's hem on the skin) it fades over a few rings of
    the mesh: per-triangle fills made a saw-tooth hem, 111 colour levels from one texel to the next."""
    scene = body_scene("dressed")
    t, f, maps = scene.template, scene.fit, scene.maps
    faces, size = t.faces.astype(np.int64), 256
    tex, _ = bs.bake_texture(maps, 1, f.vertices[0], faces, t.uv, t.face_uv, bs.face_parts(faces, t.vertex_parts),
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


def test_texture_fades_what_the_camera_sees_edge_on_into_the_fill(body_scene, monkeypatch):
    """A photo pixel seen nearly edge-on is smeared over much of the surface (and, in a real
    photo, mixes in what lies beside the person): such texels fade into the part's fill. Here
    the pixels whose true surface is within 9 degrees of edge-on (under 2 % of the person) are
    painted green; faded, under 0.75x the green reaches the texture (0.68x), and the surfaces
    facing the camera keep the photo's colour exactly."""
    import copy

    from sapiens_blender.core.maps.canonical import points_from_depth

    scene = body_scene("standing")
    t, f = scene.template, scene.fit
    maps = copy.deepcopy(scene.maps)
    person = maps.mask == 1
    points = points_from_depth(maps.depth, maps.intrinsics)
    view = -points / np.linalg.norm(points, axis=-1, keepdims=True)
    cosine = np.einsum("hwc,hwc->hw", np.nan_to_num(maps.normal), np.nan_to_num(view))
    edge_on = person & (cosine < 0.15)
    assert 0 < edge_on.sum() < 0.03 * person.sum()
    skin, green = np.array([200.0, 170.0, 150.0]), np.array([20.0, 200.0, 40.0])
    maps.image[person], maps.image[edge_on] = skin, green

    def bake():
        tex, _ = bs.bake_texture(maps, 1, f.vertices[0], t.faces, t.uv, t.face_uv, size=256)
        share = ((tex.astype(float) - skin) @ (green - skin)) / ((green - skin) @ (green - skin))
        return share.clip(0, 1).sum(), (np.abs(tex.astype(int) - skin).max(-1) == 0).sum()

    faded_green, faded_skin = bake()
    monkeypatch.setattr(bs, "FADE_FACING", bs.FACING_MIN + 1e-9)  # no fade
    sharp_green, sharp_skin = bake()
    assert faded_green < 0.75 * sharp_green, (faded_green, sharp_green)
    assert abs(faded_skin - sharp_skin) < 0.15 * sharp_skin


def test_mesh_edges_are_each_undirected_edge_once_in_order(body_scene):
    """The edges the clothing's diffusions and the fill's blend walk: every triangle side once,
    as (low, high) rows sorted, on anny's mesh and on a mesh with unused vertex numbers."""
    faces = body_scene("standing").template.faces
    sides = {tuple(sorted(map(int, pair))) for tri in faces for pair in ((tri[0], tri[1]), (tri[1], tri[2]), (tri[2], tri[0]))}
    edges = bs.mesh_edges(faces)
    assert edges.tolist() == [list(side) for side in sorted(sides)]
    assert bs.mesh_edges(np.array([[7, 2, 9], [9, 2, 4]])).tolist() == [[2, 4], [2, 7], [2, 9], [4, 9], [7, 9]]
    assert bs.mesh_edges(np.zeros((0, 3), np.int64)).shape == (0, 2)
