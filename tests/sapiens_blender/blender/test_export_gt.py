# SPDX-License-Identifier: GPL-3.0-or-later
"""Exports of ground-truth (anny) scenes: metres, axes and camera proven against exact maps.

Through the exported camera (the .blend reloaded, and the .glb read independently), every mesh
vertex, skinned at rest, lands within 1 px of the pixel it came from; the .glb's vertices, turned
back into the camera frame, sit on the ground-truth surface points; the .glb passes the Khronos
glTF-Validator; bones follow the documented hierarchy; skinning covers every vertex.
"""

from __future__ import annotations


import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

bpy = pytest.importorskip("bpy")

from sapiens_blender import api  # noqa: E402
from sapiens_blender.blender import camera, mesh, skinning  # noqa: E402
from sapiens_blender.core.geometry.skeleton import BODY_BONES, BONE_HIERARCHY  # noqa: E402

from gltf_reader import Glb, project_through_camera, validate_gltf  # noqa: E402
from repo_paths import REPO  # noqa: E402

pytestmark = [pytest.mark.groundtruth, pytest.mark.bpy, pytest.mark.anny]
GLTF_TO_CAMERA = np.diag([1.0, -1.0, -1.0])  # glTF (Y up, camera looking down -Z) -> OpenCV camera frame



@pytest.fixture(scope="module", params=["arms_raised_heavy", "two_people"])
def exported(request, gt_scene, tmp_path_factory):
    scene = gt_scene(request.param)
    tmp = tmp_path_factory.mktemp(request.param)
    api.new_scene()
    result = api.build_from_maps(scene.maps, name="gt", normal_space="TANGENT")
    api.export(tmp / "gt.glb", result)
    api.export(tmp / "gt.blend", result)
    return scene, tmp, result.summary()


def test_blend_vertices_reproject_within_1px_and_rig_is_complete(exported):
    scene, tmp, _ = exported
    bpy.ops.wm.open_mainfile(filepath=str(tmp / "gt.blend"))
    bl_scene = bpy.context.scene
    assert [o.type for o in bl_scene.objects].count("CAMERA") == 1
    for pid in scene.maps.person_ids:
        body = bpy.data.objects[f"Sapiens gt person {pid}"]
        rig = bpy.data.objects[f"Sapiens gt person {pid} armature"]
        world = mesh.mesh_vertices(body, evaluated=True)  # through the Armature modifier, at rest
        px = camera.project_to_pixels(bl_scene, bl_scene.camera, world)
        err = np.abs(px - (mesh.mesh_pixels(body)[:, ::-1] + 0.5))
        assert err.max() < 1.0, f"person {pid}: {err.max():.3f} px"
        assert not skinning.unweighted_vertices(body, rig).any()
        hierarchy = dict(BONE_HIERARCHY)
        bones = {b.name: b.parent.name if b.parent else None for b in rig.data.bones}
        assert {b for b, *_ in BODY_BONES} <= set(bones)
        assert all(hierarchy[b] == p for b, p in bones.items())


def test_glb_is_valid_metric_and_reprojects_within_1px(exported):
    scene, tmp, _ = exported
    report = validate_gltf(tmp / "gt.glb")
    assert report["issues"]["numErrors"] == 0, report["issues"]["messages"][:5]
    glb = Glb(tmp / "gt.glb")
    nodes = glb.json["nodes"]
    cams = [i for i, n in enumerate(nodes) if "camera" in n]
    bodies = [i for i, n in enumerate(nodes) if "mesh" in n]
    assert len(cams) == 1 and len(bodies) == len(scene.maps.person_ids) == len(glb.json["skins"])
    h, w = scene.maps.height, scene.maps.width
    for i in bodies:
        for world, uv in glb.skinned_primitives(i):
            px, _ = project_through_camera(glb, cams[0], world, w, h)
            pixel_uv = uv * [w, h]
            assert np.abs(px - pixel_uv).max() < 1.0
            # Metres and axes: back in the camera frame, each vertex is the exact surface point.
            rows, cols = np.floor(pixel_uv[:, 1]).astype(int), np.floor(pixel_uv[:, 0]).astype(int)
            truth = scene.maps.pointmap[rows, cols]
            assert np.nanmax(np.linalg.norm(world @ GLTF_TO_CAMERA.T - truth, axis=1)) < 1e-3
