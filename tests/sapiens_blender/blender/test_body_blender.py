# SPDX-License-Identifier: GPL-3.0-or-later
"""The fitted body in Blender: the armature modifier reproduces the fit, it overlays the photo,
the rest pose is the bind pose, and exports keep a valid 4-influence skin."""


import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

bpy = pytest.importorskip("bpy")

from sapiens_blender import api  # noqa: E402
from sapiens_blender.blender import camera, mesh  # noqa: E402
from sapiens_blender.core.body import pose as body_pose  # noqa: E402
from sapiens_blender.core.body.surface import project  # noqa: E402
from sapiens_blender.core.geometry import joints_io  # noqa: E402
from sapiens_blender.core.geometry.types import camera_to_blender  # noqa: E402

from gltf_reader import Glb, validate_gltf  # noqa: E402

pytestmark = [pytest.mark.bpy, pytest.mark.anny]

GLTF_TO_BLENDER = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])  # glTF Y up -> Blender Z up


def edge_face_counts(obj) -> np.ndarray:
    me = obj.data
    edge_index = np.empty(len(me.loops), np.int64)
    me.loops.foreach_get("edge_index", edge_index)
    return np.bincount(edge_index, minlength=len(me.edges))


@pytest.fixture(scope="module")
def built(body_scene):
    scene = body_scene("two")
    api.new_scene()
    result = api.build_from_maps(scene.maps, name="fit", body="minimal")
    return scene, result


def test_posed_body_is_the_fit_and_overlays_the_photo(built):
    scene, result = built
    bl_scene = bpy.context.scene
    assert len(result.people) == 2 and [o.type for o in bl_scene.objects].count("CAMERA") == 1
    for person in result.people:
        i = scene.fit.index(person.person_id)
        world = mesh.mesh_vertices(person.body_mesh, evaluated=True)  # through the Armature modifier
        truth = scene.fit.vertices[i].astype(np.float64)
        assert np.abs(world - camera_to_blender(truth)).max() < 1e-4
        pixels = camera.project_to_pixels(bl_scene, bl_scene.camera, world)
        assert np.abs(pixels - project(truth, scene.maps.intrinsics)).max() < 0.05
        # The body covers its person in the mask (where not hidden by the other one).
        px = np.floor(pixels).astype(int)
        inside = (px[:, 0] >= 0) & (px[:, 0] < scene.maps.width) & (px[:, 1] >= 0) & (px[:, 1] < scene.maps.height)
        assert inside.all()


def test_body_is_watertight_with_anny_topology_uvs_rig_and_parts(built):
    scene, result = built
    t = scene.template
    person = result.people[0]
    obj, arm = person.body_mesh, person.body_armature
    assert len(obj.data.vertices) == t.num_vertices and len(obj.data.polygons) == len(t.faces)
    assert np.all(edge_face_counts(obj) == 2), "every edge is shared by exactly two faces"
    assert len(arm.data.bones) == t.num_bones >= 60
    uv = np.empty(2 * len(obj.data.loops), np.float32)
    obj.data.uv_layers[0].data.foreach_get("uv", uv)
    assert np.allclose(uv.reshape(-1, 2), t.uv[t.face_uv.ravel()])
    parts = {m.name.split(" body ")[-1] for m in obj.data.materials}
    assert {"Torso", "Face_Neck", "Left_Hand", "Right_Upper_Leg"} <= parts <= set(t.part_names)
    assert all(m.node_tree.nodes["Photo"].image.size[0] == 1024 for m in obj.data.materials)
    assert set(g.name for g in obj.vertex_groups) <= set(arm.data.bones.keys())
    assert obj.parent == arm and obj.modifiers[0].type == "ARMATURE"


def test_rest_pose_is_the_fits_bind_pose_and_mirror_symmetric(built):
    scene, result = built
    for person in result.people:
        i = scene.fit.index(person.person_id)
        bones = person.body_armature.data.bones
        local = np.array([np.array(b.matrix_local) for b in bones])
        assert np.abs(local - scene.fit.rest_bone_matrices[i]).max() < 1e-4
        tails = np.array([tuple(b.tail_local) for b in bones])
        assert np.abs(tails - scene.fit.rest_bone_tails[i]).max() < 1e-4
        heads = local[:, :3, 3]
        assert body_pose.mirror_asymmetry(heads, list(bones.keys())) < 0.01
        rest = mesh.mesh_vertices(person.body_mesh)  # the mesh data itself: the bind pose
        model = (rest - np.array(person.body_armature.matrix_world)[:3, 3]) @ np.array(
            person.body_armature.matrix_world)[:3, :3]
        assert np.abs(model - scene.fit.rest_vertices[i]).max() < 1e-4


def test_raising_an_arm_moves_only_the_arm(built):
    _, result = built
    person = result.people[0]
    arm, obj = person.body_armature, person.body_mesh
    before = mesh.mesh_vertices(obj, evaluated=True)
    pb = arm.pose.bones["upperarm01.L"]
    from mathutils import Quaternion

    saved = pb.rotation_quaternion.copy()
    pb.rotation_quaternion = saved @ Quaternion((1.0, 0.0, 0.0), np.radians(45.0))  # 45 degrees more
    bpy.context.view_layer.update()
    try:
        moved = np.linalg.norm(mesh.mesh_vertices(obj, evaluated=True) - before, axis=1)
    finally:
        pb.rotation_quaternion = saved
        bpy.context.view_layer.update()
    groups = {g.index: g.name for g in obj.vertex_groups}
    hand = [g for g, n in groups.items() if n.endswith(".L") and n.startswith(("finger", "wrist", "lowerarm"))]
    assert moved.max() > 0.2 and np.median(moved) < 1e-4  # the arm swings, the rest stays
    assert len(hand) > 5


def test_rebuilding_keeps_the_body_and_save_joints_writes_it(built, tmp_path):
    scene, result = built
    again = api.build_products(scene.maps, ["body"], api.BuildOptions(name="fit", body="minimal"), reuse=True,
                               key=None)
    assert [p.body_mesh for p in again.people] == [p.body_mesh for p in result.people]
    assert "body" in again.people[0].report.kept
    path = api.save_joints(tmp_path / "joints.json", result)
    back = joints_io.read(path, complete=False)
    j = scene.template.joint_names.index("right_knee")
    assert np.allclose(back[2]["right_knee"].xyz, scene.fit.joints[1, j], atol=1e-6)


def test_glb_skin_has_four_normalised_influences_and_reproduces_the_pose(built, tmp_path):
    scene, result = built
    path = api.export(tmp_path / "body.glb", result)
    report = validate_gltf(path)
    assert report["issues"]["numErrors"] == 0, report["issues"]["messages"][:5]
    glb = Glb(path)
    t = scene.template
    # The scene keeps Anny's exact weights (up to 9 per vertex) after the export.
    obj = result.people[0].body_mesh
    assert np.abs(mesh.mesh_vertices(obj, evaluated=True) - camera_to_blender(scene.fit.vertices[0])).max() < 1e-4
    meshes = [i for i, n in enumerate(glb.json["nodes"]) if "mesh" in n]
    assert len(meshes) == 2 and len(glb.json["skins"]) == 2
    for node_index in meshes:
        node = glb.json["nodes"][node_index]
        pid = 1 if "person 1" in node["name"] else 2
        i = scene.fit.index(pid)
        prims = glb.json["meshes"][node["mesh"]]["primitives"]
        assert all("JOINTS_1" not in p["attributes"] for p in prims)
        weights = np.concatenate([glb.accessor(p["attributes"]["WEIGHTS_0"]) for p in prims]).astype(np.float64)
        assert np.allclose(weights.sum(1), 1.0, atol=1e-3)
        world = np.concatenate([w for w, _ in glb.skinned_primitives(node_index)]) @ GLTF_TO_BLENDER.T
        # glTF splits vertices at UV seams: compare each exported vertex with its nearest truth.
        bones, values = body_pose.prune_weights(t.weight_bones, t.weight_values)
        pruned = body_pose.skin_vertices(scene.fit.rest_vertices[i], scene.fit.rest_bone_matrices[i],
                                         scene.fit.bone_matrices[i], bones, values)
        pruned = camera_to_blender(pruned @ scene.fit.placement[i, :3, :3].T.astype(np.float64)
                                   + scene.fit.placement[i, :3, 3])
        exact = camera_to_blender(scene.fit.vertices[i].astype(np.float64))
        # Exported positions are the bind pose placed in the world: match them to our vertices.
        from scipy.spatial import cKDTree  # test-only dependency of trimesh

        rest_positions = np.concatenate([glb.accessor(p["attributes"]["POSITION"]) for p in prims]) @ GLTF_TO_BLENDER.T
        arm_world = np.array(result.people[i].body_armature.matrix_world)
        rest_truth = scene.fit.rest_vertices[i].astype(np.float64) @ arm_world[:3, :3].T + arm_world[:3, 3]
        dist, idx = cKDTree(rest_truth).query(rest_positions)
        assert dist.max() < 1e-5
        assert np.abs(world - pruned[idx]).max() < 1e-4, "the exported skin is our pruned, renormalised skin"
        assert np.linalg.norm(world - exact[idx], axis=1).mean() < 1e-3


def test_rigify_names_match_the_metarig_that_blender_ships(body_scene):
    import addon_utils

    scene = body_scene("standing")
    api.new_scene()
    result = api.build_from_maps(scene.maps, name="rigify", body="minimal", rig_names="rigify")
    arm, obj = result.people[0].body_armature, result.people[0].body_mesh
    assert np.abs(mesh.mesh_vertices(obj, evaluated=True) - camera_to_blender(scene.fit.vertices[0])).max() < 1e-4
    addon_utils.enable("rigify", default_set=False)
    bpy.ops.object.armature_human_metarig_add()
    metarig = bpy.context.active_object
    ours = {b.name: b.parent.name if b.parent else None for b in arm.data.bones}
    main = ["spine", "spine.001", "spine.002", "spine.003", "spine.004", "spine.005", "spine.006"] + [
        f"{n}{s}" for s in (".L", ".R") for n in
        ["shoulder", "upper_arm", "forearm", "hand", "thigh", "shin", "foot", "toe"]
        + [f"palm.0{k}" for k in (1, 2, 3, 4)]
        + [f"{f}.0{k}" for f in ("thumb", "f_index", "f_middle", "f_ring", "f_pinky") for k in (1, 2, 3)]]
    for name in main:
        bone = metarig.data.bones[name]
        assert name in ours, f"the metarig's {name} has no bone of ours"
        assert ours[name] == (bone.parent.name if bone.parent else None), name
