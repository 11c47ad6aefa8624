# SPDX-License-Identifier: GPL-3.0-or-later
"""Blender builders on synthetic data: what lands in bpy, and that nothing else changes."""

from __future__ import annotations

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from sapiens_blender.blender import armature, camera, context, materials, mesh, skinning  # noqa: E402
from sapiens_blender.blender.images import image_from_array  # noqa: E402
from sapiens_blender.core.geometry.types import camera_to_blender  # noqa: E402

from synthetic_scene import PART_NAMES, chain_skeleton, ellipsoid_maps, grid_surface, intrinsics, part_weights  # noqa: E402

pytestmark = [pytest.mark.bpy]


@pytest.fixture()
def scene():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    return bpy.context.scene


@pytest.fixture(scope="module")
def maps():
    return ellipsoid_maps(128, 96)


def test_mesh_has_every_vertex_face_and_uv(scene, maps):
    surface = grid_surface(maps)
    coll = context.new_collection("test")
    obj = mesh.build_mesh_object(surface, "body", coll)
    me = obj.data
    assert len(me.vertices) == len(surface.vertices) and len(me.polygons) == len(surface.faces)
    np.testing.assert_allclose(mesh.mesh_vertices(obj), camera_to_blender(surface.vertices), atol=1e-6)
    uv = np.empty(len(me.loops) * 2, np.float32)
    me.uv_layers["UVMap"].data.foreach_get("uv", uv)
    np.testing.assert_allclose(uv.reshape(-1, 2), surface.uv[surface.faces.ravel()], atol=1e-7)
    np.testing.assert_array_equal(mesh.mesh_pixels(obj), surface.pixel)
    assert all(p.use_smooth for p in me.polygons[:10])
    # Faces point at the camera (which looks along +Y): normals have negative Y.
    normals = np.empty(len(me.polygons) * 3, np.float32)
    me.polygons.foreach_get("normal", normals)
    assert (normals.reshape(-1, 3)[:, 1] < 0).mean() > 0.99
    assert me.validate() is False  # nothing to fix


@pytest.mark.parametrize("k", [intrinsics(128, 96), intrinsics(128, 96, fx=140, fy=175, cx=57.3, cy=52.9),
                               intrinsics(96, 128, fx=160, fy=120, cx=50.0, cy=60.2)],
                         ids=["centred", "landscape-offcentre-fy>fx", "portrait-offcentre-fy<fx"])
def test_every_vertex_projects_onto_its_pixel(scene, k, tmp_path):
    w, h = (128, 96) if k[0, 2] != 50.0 else (96, 128)
    maps = ellipsoid_maps(w, h, k)
    surface = grid_surface(maps)
    coll = context.new_collection("test")
    obj = mesh.build_mesh_object(surface, "body", coll)
    photo = image_from_array("photo", maps.image)
    cam = camera.build_camera(maps.intrinsics, w, h, "cam", coll, background=photo)
    expected = surface.pixel[:, ::-1] + 0.5  # (u, v) of the pixel centres
    got = camera.project_to_pixels(scene, cam, mesh.mesh_vertices(obj))
    assert np.abs(got - expected).max() < 0.01
    # And after a save + reload of the .blend.
    path = tmp_path / "cam.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path), copy=True)
    bpy.ops.wm.open_mainfile(filepath=str(path))
    scene = bpy.context.scene
    got = camera.project_to_pixels(scene, scene.camera, mesh.mesh_vertices(bpy.data.objects["body"]))
    assert np.abs(got - expected).max() < 0.01
    assert scene.camera.data.background_images[0].image.packed_file is not None


def test_part_materials_and_vertex_groups(scene, maps):
    surface = grid_surface(maps)
    coll = context.new_collection("test")
    obj = mesh.build_mesh_object(surface, "body", coll)
    photo = image_from_array("photo", maps.image)
    normal_img = image_from_array("normals", maps.normal * 0.5 + 0.5, non_color=True)
    base = materials.build_photo_material("photo material", photo, normal_img, "OBJECT")
    mats = materials.assign_part_materials(obj, surface.face_parts, PART_NAMES, base)
    present = sorted(set(surface.face_parts.tolist()))
    assert [s.material.name for s in obj.material_slots] == [PART_NAMES[p] for p in present]
    index = np.empty(len(obj.data.polygons), np.int32)
    obj.data.polygons.foreach_get("material_index", index)
    for slot, part in enumerate(present):
        assert np.array_equal(index == slot, surface.face_parts == part)
        tree = mats[part].node_tree
        assert tree.nodes["Photo"].image == photo and tree.nodes["Normal texture"].image == normal_img
        assert next(n for n in tree.nodes if n.type == "NORMAL_MAP").space == "OBJECT"
    groups = materials.add_part_vertex_groups(obj, surface.vertex_parts, PART_NAMES)
    assert groups == [f"part:{PART_NAMES[p]}" for p in sorted(set(surface.vertex_parts.tolist()))]
    torso = obj.vertex_groups["part:Torso"].index
    members = np.array([any(g.group == torso for g in v.groups) for v in obj.data.vertices])  # test-only loop
    assert np.array_equal(members, surface.vertex_parts == 2)


def test_armature_bones_parents_roll(scene):
    skel = chain_skeleton()
    skel.rolls = np.array([0.0, 0.3, -0.2])
    coll = context.new_collection("test")
    arm = armature.build_armature(skel, "rig", coll)
    bones = arm.data.bones
    assert [b.name for b in bones] == skel.names
    assert bones["spine"].parent.name == "pelvis" and bones["pelvis"].parent is None
    for i, name in enumerate(skel.names):
        np.testing.assert_allclose(bones[name].head_local, camera_to_blender(skel.heads[i]), atol=1e-5)
        np.testing.assert_allclose(bones[name].tail_local, camera_to_blender(skel.tails[i]), atol=1e-5)
    assert bones["spine"].use_connect and not bones["thigh.L"].use_connect
    assert bones["thigh.L"]["sapiens_estimated"] is True or bones["thigh.L"]["sapiens_estimated"] == 1
    bpy.context.view_layer.objects.active = arm
    bpy.ops.object.mode_set(mode="EDIT")
    np.testing.assert_allclose([arm.data.edit_bones[n].roll for n in skel.names], skel.rolls, atol=1e-5)
    bpy.ops.object.mode_set(mode="OBJECT")
    assert bpy.context.mode == "OBJECT"


def test_skinning_covers_every_vertex_and_fallback_fills_gaps(scene, maps):
    surface = grid_surface(maps)
    coll = context.new_collection("test")
    obj = mesh.build_mesh_object(surface, "body", coll)
    skel = chain_skeleton()
    arm = armature.build_armature(skel, "rig", coll)
    report = skinning.skin(obj, arm, part_weights(surface), skel.names, method="auto")
    assert report.unweighted_vertices == 0
    assert obj.parent == arm and any(m.type == "ARMATURE" and m.object == arm for m in obj.modifiers)

    # Detection is exact: weight half the vertices of a fresh copy, the other half is reported.
    obj2 = mesh.build_mesh_object(surface, "body2", coll)
    skinning.parent_with_armature(obj2, arm)
    half = np.arange(len(surface.vertices)) % 2 == 0
    weights = part_weights(surface)
    skinning.write_weights(obj2, skel.names, weights, np.flatnonzero(half))
    assert np.array_equal(skinning.unweighted_vertices(obj2, arm), ~half)
    report = skinning.skin(obj2, arm, weights, skel.names, method="parts")
    assert report.fallback_vertices == int((~half).sum()) and report.unweighted_vertices == 0
    group = obj2.vertex_groups["thigh.L"]
    legs = np.flatnonzero(surface.vertex_parts == 3)
    assert all(group.weight(int(i)) == 1.0 for i in legs[:20])


def test_bones_with_no_weight_anywhere_are_written_as_nothing(scene, maps):
    """A half-body photo under a full rig (the animation's): the legs' bones weigh nothing on any
    vertex, so a whole batch of bones may have no weight to write."""
    surface = grid_surface(maps)
    coll = context.new_collection("test")
    obj = mesh.build_mesh_object(surface, "body", coll)
    skel = chain_skeleton()
    names = list(skel.names)
    dense = np.zeros((len(surface.vertices), len(names)), np.float32)
    dense[:, 0] = 1.0  # everything on the first bone: the other batches (one bone each) weigh nothing
    skinning.write_weights(obj, names, np.zeros_like(dense))
    assert len(obj.vertex_groups) == 0
    assert list(skinning.replace_weights_steps(obj, names, dense, bones_per_step=1)) == ["1/3", "2/3", "3/3"]
    np.testing.assert_array_equal(skinning.read_weights(obj, names), dense)


def test_builders_leave_user_data_alone(scene, maps):
    # The user's things, with the names our builders would like to use.
    user_mat = bpy.data.materials.new("Torso")
    user_mat.diffuse_color = (0.1, 0.2, 0.3, 1.0)
    user_coll = context.new_collection("test")
    bpy.ops.mesh.primitive_cube_add()
    cube = bpy.context.active_object
    cube.name = "body"
    cube.select_set(True)
    before = {(t, d.name) for t in ("objects", "materials", "collections", "images", "meshes")
              for d in getattr(bpy.data, t)}
    surface = grid_surface(maps)
    coll = context.new_collection("test")
    obj = mesh.build_mesh_object(surface, "body", coll)
    base = materials.build_photo_material("m", image_from_array("photo", maps.image))
    materials.assign_part_materials(obj, surface.face_parts, PART_NAMES, base)
    arm = armature.build_armature(chain_skeleton(), "rig", coll)
    skinning.skin(obj, arm, part_weights(surface), chain_skeleton().names)
    after = {(t, d.name) for t in ("objects", "materials", "collections", "images", "meshes")
             for d in getattr(bpy.data, t)}
    assert before <= after  # nothing renamed or removed
    assert cube.name == "body" and obj.name == "body.001" and coll.name == "test.001"
    assert tuple(user_mat.diffuse_color) == pytest.approx((0.1, 0.2, 0.3, 1.0))
    assert len(user_coll.objects) == 0 or cube.name in user_coll.objects
    assert bpy.context.view_layer.objects.active == cube and cube.select_get() and not obj.select_get()


def test_images_are_packed_and_exact(scene, tmp_path):
    rng = np.random.default_rng(1)
    rgb = rng.integers(0, 256, (24, 40, 3), dtype=np.uint8)
    img = image_from_array("photo", rgb)
    floats = image_from_array("data", rng.random((24, 40, 3)).astype(np.float32), non_color=True, float_buffer=True)
    img.use_fake_user = floats.use_fake_user = True  # unused data-blocks are not saved
    path = tmp_path / "img.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path), copy=True)
    bpy.ops.wm.open_mainfile(filepath=str(path))
    for image in (bpy.data.images["photo"], bpy.data.images["data"]):
        assert image.packed_file is not None and tuple(image.size) == (40, 24)
    px = np.empty(40 * 24 * 4, np.float32)
    bpy.data.images["photo"].pixels.foreach_get(px)
    np.testing.assert_array_equal(np.rint(px.reshape(24, 40, 4)[::-1, :, :3] * 255).astype(np.uint8), rgb)
    assert bpy.data.images["data"].colorspace_settings.name == "Non-Color" and img and floats
