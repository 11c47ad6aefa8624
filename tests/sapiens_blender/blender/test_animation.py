# SPDX-License-Identifier: GPL-3.0-or-later
"""Animation in Blender: baked actions reproduce the rig's poses exactly, the scene takes the
clip's fps and range, and .glb/.fbx/.blend carry the animation; `animate` on the command line."""

from __future__ import annotations

import json

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from sapiens_blender.blender import export as blender_export  # noqa: E402
from sapiens_blender.blender.animation import build_animation  # noqa: E402
from sapiens_blender.core.motion.clip import Animation, TrackAnimation  # noqa: E402
from sapiens_blender.core.motion.rig import BONE_NAMES, MOTION_JOINTS, pose_frames, rest_pose  # noqa: E402

from synthetic_scene import ellipsoid_maps  # noqa: E402
from cli_runner import run_cli  # noqa: E402

from gltf_reader import Glb, validate_gltf  # noqa: E402
from motion_fixtures import moving_person  # noqa: E402

pytestmark = [pytest.mark.bpy]

T = 24


def _animation(fps=29.97) -> Animation:
    joints = moving_person(T)
    rest = rest_pose(joints)
    posed = pose_frames(joints, rest.lengths, rest)
    frames = np.arange(5, 5 + 2 * T, 2)  # every other input frame from frame 5
    track = TrackAnimation(3, frames, joints, np.zeros(joints.shape[:2], bool), np.ones(T, bool), rest, posed)
    k = np.array([[150.0, 0, 64], [0, 150.0, 48], [0, 0, 1]])
    return Animation(fps, k, 128, 96, list(frames), [track], "relief armature", MOTION_JOINTS)


@pytest.fixture(scope="module")
def baked():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    animation = _animation()
    return animation, build_animation(animation, "walk")


def test_baked_action_reproduces_the_rig_pose_in_every_frame(baked):
    animation, result = baked
    scene = bpy.context.scene
    assert (scene.frame_start, scene.frame_end) == (1, T) == result.frame_range
    assert scene.render.fps / scene.render.fps_base == pytest.approx(29.97)
    arm, = result.armatures
    posed = animation.tracks[0].posed
    for t in (0, 7, T - 1):
        scene.frame_set(1 + t)
        heads = np.array([arm.pose.bones[b].head for b in BONE_NAMES])
        tails = np.array([arm.pose.bones[b].tail for b in BONE_NAMES])
        np.testing.assert_allclose(heads, posed.heads[t], atol=1e-4)
        axes = np.array([np.array(arm.pose.bones[b].matrix)[:3, :3] for b in BONE_NAMES])
        np.testing.assert_allclose(axes, posed.matrices[t], atol=1e-4)
        assert np.abs(tails - heads).sum() > 0
    action = arm.animation_data.action
    curves = [fc for layer in action.layers for strip in layer.strips for bag in strip.channelbags
              for fc in bag.fcurves]
    assert len(curves) == 4 * len(BONE_NAMES) + 3
    assert all(len(fc.keyframe_points) == T for fc in curves)
    assert all(kp.interpolation == "LINEAR" for kp in curves[0].keyframe_points)


def test_exports_carry_the_animation(baked, tmp_path):
    animation, result = baked
    glb_path = blender_export.export(tmp_path / "walk.glb", result.objects, animation=True)
    report = validate_gltf(glb_path)
    assert report["issues"]["numErrors"] == 0, report["issues"]
    glb = Glb(glb_path)
    anims = glb.json["animations"]
    assert len(anims) == 1
    rot = [c for c in anims[0]["channels"] if c["target"]["path"] == "rotation"]
    assert len(rot) >= len(BONE_NAMES)
    times = glb.accessor(anims[0]["samplers"][rot[0]["sampler"]]["input"]).reshape(-1)
    assert len(times) == T
    # Blender's glTF exporter times keys at the integer scene fps (it ignores fps_base): 30 here.
    np.testing.assert_allclose(np.diff(times), 1 / 29.97, rtol=2.5e-3)

    fbx_path = blender_export.export(tmp_path / "walk.fbx", result.objects, animation=True)
    blend_path = blender_export.export(tmp_path / "walk.blend", animation=True)
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_scene.fbx(filepath=str(fbx_path))
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    assert arm.animation_data and arm.animation_data.action
    start, end = arm.animation_data.action.frame_range
    assert end - start == pytest.approx(T - 1, abs=1)
    bpy.ops.wm.open_mainfile(filepath=str(blend_path))
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    assert arm.animation_data.action.name == "Sapiens walk track 3"
    assert arm.animation_data.action.frame_range[1] == T


def test_animate_cli_from_a_maps_folder(tmp_path):
    """A still person in 8 frames of maps: one track, keys on every frame, the joints file."""
    maps_dir = tmp_path / "maps"
    maps = ellipsoid_maps()
    for i in range(8):
        maps.save(maps_dir / f"frame{i}.npz")
    out = run_cli("animate", "--maps-dir", maps_dir, "-o", tmp_path / "a.glb", "--stride", "2",
                  "--fps", "24", "--save-joints", tmp_path / "a.json", "-q", "--rig", "relief")
    assert out.returncode == 0, out.stderr
    assert "4 frames at 12 fps, 1 track(s), driving the relief armature" in out.stdout
    doc = json.loads((tmp_path / "a.json").read_text())
    assert doc["fps"] == 12.0 and [f["frame"] for f in doc["frames"]] == [0, 2, 4, 6]
    glb = Glb(tmp_path / "a.glb")
    assert glb.json["animations"] and any("skin" in n for n in glb.json["nodes"])  # the relief mesh
    report = validate_gltf(tmp_path / "a.glb")
    assert report["issues"]["numErrors"] == 0, report["issues"]


@pytest.mark.parametrize("args, code, message", [
    ((), 2, "exactly one input"),
    (("--maps-dir", "{tmp}", "-o", "{tmp}/x.obj"), 2, "unsupported output"),
    (("--maps-dir", "{tmp}", "-o", "{tmp}/x.glb"), 1, "holds no maps files"),
    (("{tmp}/missing.mp4", "-o", "{tmp}/x.glb"), 1, "no such video"),
])
def test_animate_cli_errors(tmp_path, args, code, message):
    out = run_cli("animate", *[a.format(tmp=tmp_path) for a in args], *(() if args else ("-o", "x.glb")))
    assert out.returncode == code and message in out.stderr, out.stderr


def test_relief_mesh_rides_on_the_animated_armature():
    """With the rest frame's maps, each track's armature is a relief build's: its rest bones are
    the rig's (so the bake is exact) and the skinned mesh moves with the action."""
    bpy.ops.wm.read_factory_settings(use_empty=True)
    animation = _animation()
    animation.tracks[0].reference_maps, animation.tracks[0].reference_person = ellipsoid_maps(), 1
    result = build_animation(animation, "walk")
    arm, = result.armatures
    body, = result.meshes
    # One camera, armature and mesh (and the light a build gives a scene that has none).
    kinds = sorted(o.type for o in bpy.data.objects if o.type != "LIGHT")
    assert body.find_armature() == arm and kinds == ["ARMATURE", "CAMERA", "MESH"]
    posed = animation.tracks[0].posed
    scene = bpy.context.scene
    shapes = []
    for t in (0, T // 2):
        scene.frame_set(1 + t)
        heads = np.array([arm.pose.bones[b].head for b in BONE_NAMES])
        np.testing.assert_allclose(heads, posed.heads[t], atol=1e-4)
        evaluated = body.evaluated_get(bpy.context.evaluated_depsgraph_get()).to_mesh()
        co = np.empty(len(evaluated.vertices) * 3)
        evaluated.vertices.foreach_get("co", co)
        shapes.append(co.reshape(-1, 3))
        body.evaluated_get(bpy.context.evaluated_depsgraph_get()).to_mesh_clear()
    assert np.abs(shapes[1] - shapes[0]).max() > 0.05  # the waving forearm / the walk moved it


def test_animate_leaves_no_joints_file_when_the_glb_cannot_be_written(tmp_path, monkeypatch):
    """The disk fills up during the .glb (after the joints file, 10 KB, was written): neither
    is left, and the error says in one line that the disk is full."""
    from full_disk import FullDisk
    from sapiens_blender import api

    maps = ellipsoid_maps()
    for i in range(6):
        maps.save(tmp_path / "maps" / f"f{i}.npz")
    out = tmp_path / "out"
    bpy.ops.wm.read_factory_settings(use_empty=True)
    FullDisk(30_000).patch(monkeypatch)  # the joints file fits, the .glb (80 KB) does not
    with pytest.raises(blender_export.ExportError) as info:
        api.animate(tmp_path / "maps", [out / "a.glb", out / "a.fbx"], maps_dir=True, rig="relief",
                    save_joints=out / "a.json")
    assert str(info.value) == f"cannot write a.glb: the disk holding {out} is full"
    assert list(out.iterdir()) == []  # no joints file, no .fbx, no temporary file
