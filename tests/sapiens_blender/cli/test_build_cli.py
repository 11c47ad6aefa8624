# SPDX-License-Identifier: GPL-3.0-or-later
"""`sapiens-blender build` end to end (real CLI subprocess, real bpy), and its exports checked:
the .blend reloaded, the .glb read independently + Khronos glTF-Validator, the .fbx re-imported."""

from __future__ import annotations

import json

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from sapiens_blender.blender import camera, mesh, skinning  # noqa: E402
from sapiens_blender.core.geometry.skeleton import BODY_BONES, BONE_HIERARCHY  # noqa: E402
from sapiens_blender.core.maps.goliath import PART_NAMES_SAPIENS1  # noqa: E402

from cli_runner import run_cli  # noqa: E402
from gltf_reader import Glb, project_through_camera, validate_gltf  # noqa: E402
from synthetic_scene import ellipsoid_maps, intrinsics  # noqa: E402

pytestmark = [pytest.mark.bpy]

W, H = 128, 96


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Two people, off-centre principal point and fx != fy, built once into all three formats."""
    tmp = tmp_path_factory.mktemp("build")
    maps = ellipsoid_maps(W, H, intrinsics(W, H, fx=150, fy=160, cx=61.2, cy=50.7), people=2)
    maps.save(tmp / "two.npz")
    proc = run_cli("build", "--maps", tmp / "two.npz", "-o", tmp / "two.blend", "-o", tmp / "two.glb",
                   "-o", tmp / "two.fbx", "--stride", "1", "--report", tmp / "two.json")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    return tmp, maps, proc.stdout


def test_summary_lists_people_parts_bones_and_stage_times(built):
    _, _, out = built
    assert "people: 2" in out and out.count("vertices,") == 2 and "bones" in out
    for stage in ("mesh", "normal texture", "parts", "armature", "skinning", "export"):
        assert f"{stage} " in out.split("seconds:")[1]
    assert not list(built[0].glob(".*sapiens-tmp*"))  # no temporary files left


def test_report_json_holds_what_the_summary_says(built):
    tmp, maps, out = built
    report = json.loads((tmp / "two.json").read_text())
    assert report["size"] == [W, H] and report["metric"] is True
    assert [p["person_id"] for p in report["people"]] == maps.person_ids
    for person in report["people"]:
        assert f"person {person['person_id']}: {person['vertices']} vertices, {person['faces']} faces" in out
        assert person["built"][:2] == ["mesh", "normal texture"] and person["skinning"]["unweighted_vertices"] == 0
    assert set(report["timings"]) >= {"mesh", "skinning", "export"}
    assert f"wrote {tmp / 'two.json'}" in out


def test_blend_has_one_camera_and_a_skinned_rig_per_person_on_its_pixels(built):
    tmp, maps, _ = built
    bpy.ops.wm.open_mainfile(filepath=str(tmp / "two.blend"))
    scene = bpy.context.scene
    cameras = [o for o in scene.objects if o.type == "CAMERA"]
    assert len(cameras) == 1 and scene.camera == cameras[0]
    assert (scene.render.resolution_x, scene.render.resolution_y) == (W, H)
    for pid in (1, 2):
        coll = bpy.data.collections[f"Sapiens two person {pid}"]
        body = bpy.data.objects[f"Sapiens two person {pid}"]
        rig = bpy.data.objects[f"Sapiens two person {pid} armature"]
        assert {body.name, rig.name} == {o.name for o in coll.objects}
        assert body.parent == rig and body.modifiers[0].type == "ARMATURE"
        # Every vertex (skinned, at rest) lands on its source pixel through the camera.
        world = mesh.mesh_vertices(body, evaluated=True)
        got = camera.project_to_pixels(scene, scene.camera, world)
        expected = mesh.mesh_pixels(body)[:, ::-1] + 0.5
        assert np.abs(got - expected).max() < 1.0
        assert not skinning.unweighted_vertices(body, rig).any()
        # Bones: the documented hierarchy, body complete.
        bones = {b.name: (b.parent.name if b.parent else None) for b in rig.data.bones}
        hierarchy = {b: p for b, p in BONE_HIERARCHY}
        assert {b for b, *_ in BODY_BONES} <= set(bones)
        assert all(hierarchy[b] == p for b, p in bones.items())
        # One material slot per part present, named after it.
        slots = [s.material.name for s in body.material_slots]
        assert slots and all(name.startswith(f"Sapiens two person {pid} ") for name in slots)
        assert body.data.materials[0].node_tree.nodes["Normal texture"].image is not None


def test_glb_is_valid_and_reprojects_through_its_camera(built):
    tmp, maps, _ = built
    report = validate_gltf(tmp / "two.glb")
    assert report["issues"]["numErrors"] == 0, report["issues"]["messages"][:5]
    glb = Glb(tmp / "two.glb")
    nodes = glb.json["nodes"]
    cams = [i for i, n in enumerate(nodes) if "camera" in n]
    bodies = [i for i, n in enumerate(nodes) if "mesh" in n]
    assert len(cams) == 1 and len(glb.json["cameras"]) == 1
    assert sorted(nodes[i]["name"] for i in bodies) == ["Sapiens two person 1", "Sapiens two person 2"]
    assert all("skin" in nodes[i] for i in bodies) and len(glb.json["skins"]) == 2
    k = maps.intrinsics
    for i in bodies:
        for world, uv in glb.skinned_primitives(i):
            px, (fx, fy) = project_through_camera(glb, cams[0], world, W, H)
            assert abs(fx - k[0, 0]) < 1e-3 and abs(fy - k[1, 1]) < 1e-3
            assert np.abs(px - uv * [W, H]).max() < 1.0  # glTF UV = photo position, v down


def test_fbx_reimports_with_camera_meshes_and_armatures(built):
    tmp, maps, _ = built
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_scene.fbx(filepath=str(tmp / "two.fbx"))
    kinds = [o.type for o in bpy.context.scene.objects]
    assert kinds.count("CAMERA") == 1 and kinds.count("ARMATURE") == 2 and kinds.count("MESH") == 2
    rig = next(o for o in bpy.context.scene.objects if o.type == "ARMATURE")
    assert {b for b, *_ in BODY_BONES} <= {b.name for b in rig.data.bones}
    body = next(o for o in bpy.context.scene.objects if o.type == "MESH")
    assert any(m.type == "ARMATURE" for m in body.modifiers) or body.parent is not None
    # The camera reproduces the photo: FBX carries lens, sensor and shift but not the render
    # size, which the importer leaves at its default; give it the photo's.
    scene = bpy.context.scene
    scene.render.resolution_x, scene.render.resolution_y = W, H
    scene.render.pixel_aspect_x = float(maps.intrinsics[1, 1] / maps.intrinsics[0, 0])
    cam = next(o for o in scene.objects if o.type == "CAMERA")
    for obj in (o for o in scene.objects if o.type == "MESH"):
        me = obj.data
        corners = np.empty(len(me.loops), np.int32)
        me.attributes[".corner_vert"].data.foreach_get("value", corners)
        uv = np.empty(len(me.loops) * 2, np.float32)
        me.uv_layers[0].data.foreach_get("uv", uv)
        uv = uv.reshape(-1, 2)
        got = camera.project_to_pixels(scene, cam, mesh.mesh_vertices(obj, evaluated=True)[corners])
        assert np.abs(got - np.stack([uv[:, 0] * W, (1 - uv[:, 1]) * H], 1)).max() < 1.0


def test_lite_outputs_build(tmp_path):
    """Sapiens-lite demo files (relative depth, seg ids, normals, pose json) build a person."""
    from PIL import Image

    maps = ellipsoid_maps(W, H)
    Image.fromarray(maps.image).save(tmp_path / "shot.png")
    for sub in ("depth", "normal", "seg", "pose"):
        (tmp_path / "lite" / sub).mkdir(parents=True)
    fg = maps.mask > 0
    d = maps.depth.copy()
    rel = np.where(fg, (d - np.nanmin(d)) / (np.nanmax(d) - np.nanmin(d)), -1.0)
    np.save(tmp_path / "lite/depth/shot.npy", rel.astype(np.float32))
    n = np.nan_to_num(maps.normal) * np.array([1, -1, -1], np.float32)  # v1's undocumented signs
    np.save(tmp_path / "lite/normal/shot.npy", n)
    to_v1 = np.array([PART_NAMES_SAPIENS1.index(name) for name in maps.part_names])
    np.save(tmp_path / "lite/seg/shot_seg.npy", to_v1[maps.parts].astype(np.int64))
    np.save(tmp_path / "lite/seg/shot.npy", fg)
    kp = maps.keypoints[0]
    pose = {"instance_info": [{"keypoints": kp[:, :2].tolist(), "keypoint_scores": kp[:, 2].tolist()}]}
    (tmp_path / "lite/pose/shot.json").write_text(json.dumps(pose))
    proc = run_cli("build", tmp_path / "shot.png", "--lite-dir", tmp_path / "lite", "-o", tmp_path / "shot.blend",
                   "--save-maps", tmp_path / "shot.npz")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "people: 1" in proc.stdout and "relative depth" in proc.stdout
    assert (tmp_path / "shot.blend").stat().st_size > 0
    # --save-maps keeps the converted lite files as canonical maps (it wrote nothing without --body)
    from sapiens_blender.core.maps.canonical import Maps

    assert not Maps.load(tmp_path / "shot.npz").metric


def test_save_maps_without_a_body_keeps_a_copy_of_maps_read(built, tmp_path):
    """build --maps X --save-maps Y without --body silently wrote nothing (issue 37)."""
    from sapiens_blender.core.maps.canonical import Maps

    tmp, maps, _ = built
    proc = run_cli("build", "--maps", tmp / "two.npz", "--save-maps", tmp_path / "copy.npz", "-o", tmp_path / "c.glb")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert f"wrote {tmp_path / 'copy.npz'}" in proc.stdout  # said, as every output is
    copy = Maps.load(tmp_path / "copy.npz")
    assert copy.person_ids == maps.person_ids and np.array_equal(copy.depth, maps.depth, equal_nan=True)


@pytest.mark.parametrize("args, code, message", [
    ([], 2, "give exactly one input"),
    (["--maps", "x.npz", "-o", "out.obj"], 2, "unsupported output"),
    (["--maps", "missing.npz", "-o", "out.glb"], 1, "missing.npz"),
    (["--lite-dir", "somewhere", "-o", "out.glb"], 2, "needs PHOTO"),
])
def test_bad_invocations_say_why(tmp_path, args, code, message):
    proc = run_cli("build", *(args or ["-o", "out.glb"]), cwd=tmp_path)
    assert proc.returncode == code and message in proc.stderr
