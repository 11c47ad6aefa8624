# SPDX-License-Identifier: GPL-3.0-or-later
"""The build pipeline / Python API in bpy: degraded input, undo, the user's data, joints files,
normal textures."""

from __future__ import annotations

import json

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from sapiens_blender import api  # noqa: E402
from sapiens_blender.blender import skinning  # noqa: E402
from sapiens_blender.core.geometry import joints_io  # noqa: E402
from sapiens_blender.core.geometry.joints import lift_joints  # noqa: E402
from sapiens_blender.core.geometry.skeleton import BODY_BONES  # noqa: E402
from sapiens_blender.core.geometry.types import GeometryError, camera_to_blender  # noqa: E402
from sapiens_blender.core.maps.goliath import KEYPOINT_INDEX  # noqa: E402

from synthetic_scene import ellipsoid_maps  # noqa: E402

pytestmark = [pytest.mark.bpy]


@pytest.fixture()
def empty():
    api.new_scene()


def image_pixels(image) -> np.ndarray:
    w, h = image.size
    px = np.empty(w * h * 4, np.float32)
    image.pixels.foreach_get(px)
    return px.reshape(h, w, 4)[::-1, :, :3]  # row 0 at the top, like the maps


def test_degraded_input_still_builds_and_says_what_was_filled(empty):
    maps = ellipsoid_maps(128, 96, people=2)
    rng = np.random.default_rng(0)
    person = maps.mask > 0
    maps.depth[person] += rng.normal(0, 0.01, person.sum()).astype(np.float32)  # 1 cm noise
    holes = person & (rng.random(maps.mask.shape) < 0.03)
    maps.mask[holes] = 0  # holes in the mask
    maps.depth[holes] = np.nan
    for name in ("right_elbow", "right_wrist"):  # missing keypoints
        maps.keypoints[0, KEYPOINT_INDEX[name], 2] = 0.0
    result = api.build_from_maps(maps, name="degraded")
    assert [p.person_id for p in result.people] == [1, 2]
    first = result.people[0]
    assert {"right_elbow", "right_wrist"} <= set(first.report.joints["filled"])
    assert first.report.estimated_bones > 0
    # said once: the estimated bones and the joints behind them, as a note (not a warning)
    notes = [line for line in result.summary().splitlines() if "estimated" in line]
    assert len(notes) == 1 and notes[0].startswith("    note: ") and "right_wrist" in notes[0]
    assert f"{first.report.estimated_bones} of {first.report.bones} bones" in notes[0]
    for p in result.people:
        assert not skinning.unweighted_vertices(p.mesh, p.armature).any()
    stored = json.loads(json.dumps(result.to_dict()))  # what the batch stores: JSON-ready
    assert [p["person_id"] for p in stored["people"]] == [1, 2]
    assert stored["people"][0]["estimated_bones"] == first.report.estimated_bones
    assert stored["people"][0]["skinning"]["method"] == first.report.skinning.method


def test_undo_removes_a_build_and_redo_restores_it(empty):
    bpy.ops.mesh.primitive_cube_add()
    bpy.ops.ed.undo_push(message="before build")
    api.build_from_maps(ellipsoid_maps(96, 72), name="u")
    bpy.ops.ed.undo_push(message="build")
    built = {o.name for o in bpy.data.objects}
    assert {"Sapiens u camera", "Sapiens u person 1", "Sapiens u person 1 armature"} <= built
    bpy.ops.ed.undo()
    assert {o.name for o in bpy.data.objects} == {"Cube"}
    bpy.ops.ed.redo()
    assert {o.name for o in bpy.data.objects} == built


def test_users_collections_materials_and_objects_are_untouched(empty):
    user_coll = bpy.data.collections.new("Sapiens photo person 1")
    bpy.context.scene.collection.children.link(user_coll)
    user_mat = bpy.data.materials.new("Sapiens photo person 1 Torso")
    user_mat.diffuse_color = (1, 0, 0, 1)
    bpy.ops.mesh.primitive_uv_sphere_add()
    sphere = bpy.context.active_object
    user_coll.objects.link(sphere)
    verts_before = len(sphere.data.vertices)
    result = api.build_from_maps(ellipsoid_maps(96, 72), name="photo")
    assert result.people[0].collection.name == "Sapiens photo person 1.001"
    assert list(user_coll.objects) == [sphere] and len(sphere.data.vertices) == verts_before
    assert user_mat.name == "Sapiens photo person 1 Torso" and tuple(user_mat.diffuse_color) == (1, 0, 0, 1)
    assert user_mat.users == 0  # not used by our mesh: ours got its own name
    assert bpy.context.view_layer.objects.active == sphere and bpy.context.mode == "OBJECT"


def test_joints_file_places_the_bones(empty, tmp_path):
    maps = ellipsoid_maps(128, 96)
    joints = lift_joints(maps, 1)
    joints["left_elbow"].xyz = np.asarray(joints["left_elbow"].xyz) + [0.03, 0.0, 0.02]  # distinguishable
    path = joints_io.write(tmp_path / "joints.json", {1: joints})
    result = api.build_from_maps(maps, name="j", joints=joints_io.read(path))
    bones = result.people[0].armature.data.bones
    expected = camera_to_blender(np.asarray(joints["left_elbow"].xyz))
    head_of = {bone: head for bone, head, _, _ in BODY_BONES}
    elbow_bone = next(b for b, h in head_of.items() if h == "left_elbow")
    np.testing.assert_allclose(bones[elbow_bone].head_local, expected, atol=1e-5)
    assert result.people[0].report.joints["source"] == "joints file"


def test_normal_textures_object_and_tangent(empty):
    maps = ellipsoid_maps(128, 96)
    obj_result = api.build_from_maps(maps, name="o", normal_space="OBJECT", part_materials=False, armature=False)
    tree = obj_result.people[0].mesh.data.materials[0].node_tree
    assert next(n for n in tree.nodes if n.type == "NORMAL_MAP").space == "OBJECT"
    px = image_pixels(tree.nodes["Normal texture"].image)
    person = maps.mask == 1
    expected = camera_to_blender(maps.normal[person]) * 0.5 + 0.5
    assert np.abs(px[person] - expected).max() < 0.5 / 255 + 1e-6  # 8-bit texture
    tan_result = api.build_from_maps(maps, name="t", normal_space="TANGENT", part_materials=False, armature=False)
    tree = tan_result.people[0].mesh.data.materials[0].node_tree
    assert next(n for n in tree.nodes if n.type == "NORMAL_MAP").space == "TANGENT"
    tpx = image_pixels(tree.nodes["Normal texture"].image) * 2 - 1
    # The mesh is the exact surface, so the tangent-space normals are close to "straight up".
    assert np.median(tpx[person][:, 2]) > 0.98


def test_part_weights_only_and_closed_body(empty):
    maps = ellipsoid_maps(128, 96)
    result = api.build_from_maps(maps, name="c", closed=True, skinning="parts")
    person = result.people[0]
    assert person.report.skinning.method == "parts"
    assert person.report.skinning.fallback_vertices == len(person.mesh.data.vertices)
    assert not skinning.unweighted_vertices(person.mesh, person.armature).any()
    me = person.mesh.data
    corners = np.empty(len(me.loops), np.int32)
    me.attributes[".corner_vert"].data.foreach_get("value", corners)
    tri = corners.reshape(-1, 3)
    edges = np.sort(np.concatenate([tri[:, [0, 1]], tri[:, [1, 2]], tri[:, [2, 0]]]), axis=1)
    _, counts = np.unique(edges, axis=0, return_counts=True)
    assert (counts == 2).all()  # watertight: every edge shared by exactly two triangles


def test_bone_heat_on_a_proxy_covers_every_vertex_with_the_right_bones(empty):
    maps = ellipsoid_maps(128, 96)
    direct = api.build_from_maps(maps, name="d").people[0]
    result = api.build_from_maps(maps, name="p", bone_heat_max_vertices=200)
    person = result.people[0]
    assert person.report.skinning.proxy_vertices < len(person.mesh.data.vertices) / 3
    assert not any("weight proxy" in o.name for o in bpy.data.objects)  # temporary, removed
    assert not skinning.unweighted_vertices(person.mesh, person.armature).any()
    # The dominant bone per vertex mostly agrees with bone heat on the full mesh.
    def dominant(obj):
        names = [g.name for g in obj.vertex_groups]
        bones = {g.index for g in obj.vertex_groups if not g.name.startswith("part:")}
        return np.array([names[max((g for g in v.groups if g.group in bones), key=lambda g: g.weight).group]
                         for v in obj.data.vertices])
    agree = (dominant(direct.mesh) == dominant(person.mesh)).mean()  # test-only per-vertex read
    assert agree > 0.8, agree


def test_a_person_without_keypoints_is_skipped_and_the_rest_is_built(empty):
    maps = ellipsoid_maps(128, 96, people=2)
    maps.keypoints[1, :, 2] = 0.0  # person 2: every keypoint score 0, no skeleton possible
    result = api.build_from_maps(maps, name="skip")
    assert [p.person_id for p in result.people] == [1]
    assert len(result.report.skipped) == 1 and result.report.skipped[0].startswith("person 2 skipped: ")
    assert "warning: person 2 skipped" in result.summary()
    # nothing half-built of person 2 is left in the scene
    assert not [o.name for o in bpy.data.objects if "person 2" in o.name]
    assert not [c.name for c in bpy.data.collections if "person 2" in c.name]
    assert not [d.name for d in (*bpy.data.materials, *bpy.data.images, *bpy.data.meshes) if "person 2" in d.name]
    assert result.to_dict()["skipped"] == result.report.skipped


def test_a_build_where_nobody_can_be_built_still_fails(empty):
    maps = ellipsoid_maps(128, 96, people=2)
    maps.keypoints[:, :, 2] = 0.0
    with pytest.raises(GeometryError, match="cannot build the body skeleton of person 1"):
        api.build_from_maps(maps, name="none")
