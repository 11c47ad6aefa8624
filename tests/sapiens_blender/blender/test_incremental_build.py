# SPDX-License-Identifier: GPL-3.0-or-later
"""The panel's build buttons, in EXEC mode on maps stored in the .blend (as Analyze leaves
them): each click completes ONE camera + mesh + armature per person and never duplicates."""

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")
import addon_utils  # noqa: E402  (ships with bpy)

from sapiens_blender.blender import identity, skinning  # noqa: E402
from sapiens_blender.blender.materials import PART_GROUP_PREFIX  # noqa: E402

from synthetic_scene import ellipsoid_maps  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.bpy]
MAPS = ellipsoid_maps(64, 48, people=2)


@pytest.fixture(scope="module")
def addon():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    addon_utils.enable("sapiens_blender", default_set=True, handle_error=None)
    yield
    addon_utils.disable("sapiens_blender", default_set=True)


@pytest.fixture
def scene(addon):
    """An empty file holding a stored two-person analysis, and one object of the user's."""
    from sapiens_blender.ui import storage

    bpy.ops.wm.read_homefile(use_empty=True)
    scene = bpy.context.scene
    storage.store_analysis(scene, MAPS, photo="/photos/two.png")
    scene.sapiens.person = "ALL"
    bpy.ops.mesh.primitive_cube_add()
    return scene


def click(name):
    """One button in EXEC mode; an ERROR report surfaces as RuntimeError in the bpy module."""
    result = getattr(bpy.ops.sapiens, name)("EXEC_DEFAULT")
    assert result == {"FINISHED"}, name
    from sapiens_blender.ui import state

    return state.SESSION.last_info


def ours(role, person=None):
    key = identity.analysis_key(MAPS)
    return [o for o in bpy.context.scene.objects if identity.is_tagged(o, key, role, person)]


def inventory():
    """Everything a click could duplicate (data-blocks and per-mesh slots/groups)."""
    counts = {kind: len(getattr(bpy.data, kind)) for kind in
              ("objects", "meshes", "armatures", "cameras", "collections", "materials", "images")}
    for ob in bpy.data.objects:
        if ob.type == "MESH":
            counts[ob.name] = (len(ob.data.materials), len(ob.vertex_groups), len(ob.modifiers))
    return counts


def part_slots(ob):
    return [m for m in ob.data.materials if m.get(identity.ROLE) == identity.PART_MATERIAL]


def assert_one_complete_set(space="OBJECT"):
    assert len(ours(identity.CAMERA)) == 1 and len([o for o in bpy.data.objects if o.type == "CAMERA"]) == 1
    for pid in (1, 2):
        (mesh,), (arm,) = ours(identity.MESH, pid), ours(identity.ARMATURE, pid)
        parts = part_slots(mesh)
        assert len(parts) == len(mesh.data.materials) > 3  # the part slots replaced the photo slot
        for mat in mesh.data.materials:
            normal_maps = [n for n in mat.node_tree.nodes if n.type == "NORMAL_MAP"]
            assert len(normal_maps) == 1 and normal_maps[0].space == space
            assert mat.node_tree.nodes["Normal texture"].image.get("sapiens_normal_space") == space
        used = np.empty(len(mesh.data.polygons), np.int32)
        mesh.data.polygons.foreach_get("material_index", used)
        assert set(np.unique(used)) == set(range(len(parts)))  # every part slot holds faces
        groups = [g.name for g in mesh.vertex_groups]
        assert sum(g.startswith(PART_GROUP_PREFIX) for g in groups) > 3
        assert {b.name for b in arm.data.bones} <= set(groups)  # bone weights on THIS mesh
        assert mesh.parent == arm and [m.object for m in mesh.modifiers if m.type == "ARMATURE"] == [arm]
        assert not skinning.unweighted_vertices(mesh, arm).any()
    assert len([o for o in bpy.data.objects if o.type == "MESH"]) == 3  # 2 people + the user's cube
    assert len([o for o in bpy.data.objects if o.type == "ARMATURE"]) == 2


def test_each_button_in_turn_completes_one_set_per_person(scene):
    cube = bpy.data.objects["Cube"]
    cube_before = (tuple(cube.location), len(cube.data.vertices), len(cube.data.materials))
    assert "person 1: mesh built" in click("build_mesh")
    assert len(ours(identity.MESH)) == 2 and not ours(identity.ARMATURE)
    mesh = ours(identity.MESH, 1)[0]
    assert [m.get(identity.ROLE) for m in mesh.data.materials] == [identity.PHOTO_MATERIAL]
    assert "normal texture built (mesh kept)" in click("build_normal_texture")
    click("build_part_materials")
    click("build_armature")
    assert_one_complete_set()
    assert ours(identity.MESH, 1)[0] == mesh  # the very same object all along
    assert (tuple(cube.location), len(cube.data.vertices), len(cube.data.materials)) == cube_before
    assert scene.camera == ours(identity.CAMERA)[0]


def test_clicking_any_button_twice_adds_nothing(scene):
    for button in ("build_mesh", "build_normal_texture", "build_part_materials", "build_armature", "build_all"):
        click(button)
        before = inventory()
        message = click(button)
        assert inventory() == before, button
        assert "nothing new" in message and " built" not in message, message
        if button in ("build_armature", "build_all"):
            assert "delete it and click again" in message, message
    assert_one_complete_set()


def test_renamed_and_moved_objects_are_still_found(scene):
    click("build_mesh")
    mesh = ours(identity.MESH, 1)[0]
    mesh.name = "My hero"
    mesh.data.name = "hero mesh"
    mine = bpy.data.collections.new("My collection")
    scene.collection.children.link(mine)
    for coll in list(mesh.users_collection):
        coll.objects.unlink(mesh)
    mine.objects.link(mesh)
    for coll in bpy.data.collections:
        if coll.get(identity.ROLE):
            coll.name = f"renamed {coll.name}"
    ours(identity.CAMERA)[0].name = "Shot cam"
    click("build_all")
    assert_one_complete_set()
    assert ours(identity.MESH, 1)[0] == bpy.data.objects["My hero"]
    assert list(mine.objects) == [bpy.data.objects["My hero"]]  # left where the user put it


def test_a_users_duplicate_does_not_take_the_originals_place(scene):
    click("build_mesh")
    original = ours(identity.MESH, 1)[0]
    copy = original.copy()  # Shift+D: the copy carries the same custom properties
    copy.data = original.data.copy()
    copy.name = "A copy"  # sorts before the original's name
    original.users_collection[0].objects.link(copy)
    click("build_part_materials")
    assert part_slots(original) and not part_slots(copy)


def test_build_all_after_partial_builds(scene):
    scene.sapiens.person = "2"
    click("build_mesh")
    click("build_normal_texture")
    assert not ours(identity.MESH, 1) and len(ours(identity.MESH, 2)) == 1
    scene.sapiens.person = "1"
    click("build_armature")  # builds person 1's mesh first
    assert len(ours(identity.MESH, 1)) == 1 and len(ours(identity.ARMATURE, 1)) == 1
    scene.sapiens.person = "ALL"
    message = click("build_all")
    assert "person 1: normal texture, part materials built" in message, message
    assert "person 2: part materials, armature, skinning built" in message, message
    assert_one_complete_set()


def test_parts_first_then_normal_texture_in_either_space(scene):
    click("build_part_materials")
    assert bpy.ops.sapiens.build_normal_texture("EXEC_DEFAULT", normal_space="TANGENT") == {"FINISHED"}
    for mesh in ours(identity.MESH):
        for mat in mesh.data.materials:
            assert next(n for n in mat.node_tree.nodes if n.type == "NORMAL_MAP").space == "TANGENT"
    before = inventory()
    click("build_normal_texture")  # back to object space: swapped in place, one more image only
    after = inventory()
    assert after.pop("images") == before.pop("images") + 2 and after == before
    click("build_armature")
    assert_one_complete_set("OBJECT")


def test_undo_takes_back_one_click(scene):
    click("build_mesh")  # each click pushes one undo step when its build has finished
    click("build_part_materials")
    assert part_slots(ours(identity.MESH, 1)[0])
    bpy.ops.ed.undo()
    mesh = ours(identity.MESH, 1)[0]
    assert not part_slots(mesh) and not any(g.name.startswith(PART_GROUP_PREFIX) for g in mesh.vertex_groups)
    bpy.ops.ed.redo()
    assert part_slots(ours(identity.MESH, 1)[0])


def test_deleted_armature_is_rebuilt_and_the_mesh_reskinned(scene):
    click("build_armature")
    old = ours(identity.ARMATURE, 1)[0]
    bpy.data.objects.remove(old)
    click("build_armature")
    mesh, (arm,) = ours(identity.MESH, 1)[0], ours(identity.ARMATURE, 1)
    assert [m.object for m in mesh.modifiers if m.type == "ARMATURE"] == [arm] and mesh.parent == arm
    assert not skinning.unweighted_vertices(mesh, arm).any()


def test_an_edited_mesh_gives_a_clear_error_and_is_left_alone(scene):
    import bmesh

    click("build_mesh")
    mesh = ours(identity.MESH, 1)[0]
    bm = bmesh.new()
    bm.from_mesh(mesh.data)
    bmesh.ops.delete(bm, geom=bm.verts[:10], context="VERTS")
    bm.to_mesh(mesh.data)
    bm.free()
    n_verts = len(mesh.data.vertices)
    with pytest.raises(RuntimeError, match="was edited.*Delete it"):
        bpy.ops.sapiens.build_part_materials("EXEC_DEFAULT")
    assert len(mesh.data.vertices) == n_verts and not part_slots(mesh)


def test_a_users_own_material_slot_is_kept(scene):
    click("build_mesh")
    mesh = ours(identity.MESH, 1)[0]
    mine = bpy.data.materials.new("my skin")
    mesh.data.materials[0] = mine  # the user replaced our photo material
    click("build_part_materials")
    assert mesh.data.materials[0] == mine and len(part_slots(mesh)) == len(mesh.data.materials) - 1
    used = np.empty(len(mesh.data.polygons), np.int32)
    mesh.data.polygons.foreach_get("material_index", used)
    assert used.min() >= 1  # the faces show the part materials that follow the user's slot


def test_a_new_analysis_gets_its_own_set(scene):
    from sapiens_blender.ui import storage

    click("build_mesh")
    other = ellipsoid_maps(64, 48, people=1)
    storage.store_analysis(scene, other, photo="/photos/one.png")
    click("build_mesh")
    key = identity.analysis_key(other)
    assert len([o for o in scene.objects if identity.is_tagged(o, key, identity.MESH)]) == 1
    assert len(ours(identity.MESH)) == 2 and len([o for o in scene.objects if o.type == "CAMERA"]) == 2
