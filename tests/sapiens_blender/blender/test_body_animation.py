# SPDX-License-Identifier: GPL-3.0-or-later
"""A clip drives the fitted body: anny moving through 12 ray-cast frames (maps folder) ->
the real server fits the body once and poses it per frame -> Blender bakes it -> exports.
The baked armature must show, in every frame, exactly the pose the server solved."""

import json
import os
import secrets

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

bpy = pytest.importorskip("bpy")


from gltf_reader import Glb, validate_gltf  # noqa: E402
from motion_clip import make_clip  # noqa: E402
from server_harness import server_env, start_server  # noqa: E402

from sapiens_blender import api  # noqa: E402
from sapiens_blender.blender import mesh as blender_mesh  # noqa: E402
from sapiens_blender.blender.body import camera_to_blender_4x4  # noqa: E402
from sapiens_blender.core.body.rig_names import retarget_rig  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.bpy, pytest.mark.anny]
FRAMES = 12


@pytest.fixture(scope="module")
def maps_dir(tmp_path_factory):
    clip = make_clip(frames=FRAMES, size=(160, 120))
    folder = tmp_path_factory.mktemp("clip") / "maps"
    for i, m in enumerate(clip.maps):
        m.save(folder / f"frame{i:03d}.npz")
    return folder


def _animate(maps_dir, fit_server, outputs, **kw):
    api.new_scene()
    return api.animate(maps_dir, outputs, maps_dir=True, server=f"http://{fit_server.url}",
                       token=fit_server.token, **kw)


def _assert_baked_pose_is_the_servers(result, frames=(0, 5, FRAMES - 1)):
    track = result.animation.tracks[0]
    tb = track.body
    arm = result.armatures[0]
    names, _ = retarget_rig(tb.template.bone_names, tb.template.bone_parents, arm["sapiens_rig_names"])
    placement = tb.fit.placement[tb.index].astype(np.float64)
    world = camera_to_blender_4x4() @ placement
    scene = bpy.context.scene
    for t in frames:
        scene.frame_set(result.frame_range[0] + t)
        got = np.array([np.array(arm.matrix_world @ arm.pose.bones[n].matrix) for n in names])
        want = world @ tb.bone_matrices[t]
        np.testing.assert_allclose(got[:, :3, 3], want[:, :3, 3], atol=1e-4)  # heads
        np.testing.assert_allclose(got[:, :3, :3], want[:, :3, :3], atol=1e-4)  # axes


def test_a_clip_drives_the_fitted_body(maps_dir, fit_server, tmp_path):
    outputs = [tmp_path / "walk.glb", tmp_path / "walk.fbx", tmp_path / "walk.blend"]
    result = _animate(maps_dir, fit_server, outputs, save_joints=tmp_path / "walk.json", body_mode="minimal")
    animation = result.animation
    assert animation.source == "fitted body" and len(animation.tracks) == 1, animation.notes
    track = animation.tracks[0]
    assert track.body.bone_matrices.shape == (FRAMES, track.body.template.num_bones, 4, 4)
    _assert_baked_pose_is_the_servers(result)
    # The body mesh follows: its skinned vertices move between the first and last frames.
    body = result.meshes[0]
    bpy.context.scene.frame_set(result.frame_range[0])
    first = blender_mesh.mesh_vertices(body, evaluated=True)
    bpy.context.scene.frame_set(result.frame_range[1])
    last = blender_mesh.mesh_vertices(body, evaluated=True)
    assert len(first) == track.body.template.num_vertices and np.abs(last - first).max() > 0.05
    # Exports carry the animation of every bone.
    report = validate_gltf(tmp_path / "walk.glb")
    assert report["issues"]["numErrors"] == 0, report["issues"]
    anim = Glb(tmp_path / "walk.glb").json["animations"][0]
    rotations = {c["target"]["node"] for c in anim["channels"] if c["target"]["path"] == "rotation"}
    assert len(rotations) >= 100
    doc = json.loads((tmp_path / "walk.json").read_text())
    assert doc["source"] == "fitted body" and len(doc["frames"]) == FRAMES
    joints = doc["frames"][3]["people"][0]["joints"]
    assert {"left_wrist", "right_ankle", "nose"} <= set(joints)
    np.testing.assert_allclose(joints["left_knee"]["xyz"],
                               track.body.joints[3, list(track.body.template.joint_names).index("left_knee")], atol=1e-4)
    # The FBX carries a take with every frame; the .blend keeps the action.
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_scene.fbx(filepath=str(tmp_path / "walk.fbx"))
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE")
    assert len(arm.data.bones) >= 100 and arm.animation_data and arm.animation_data.action
    start, end = arm.animation_data.action.frame_range
    assert end - start == pytest.approx(FRAMES - 1, abs=1)
    bpy.ops.wm.open_mainfile(filepath=str(tmp_path / "walk.blend"))
    arm = next(o for o in bpy.data.objects if o.type == "ARMATURE" and "sapiens_track" in o)
    assert arm.animation_data.action.frame_range[1] - arm.animation_data.action.frame_range[0] == FRAMES - 1


def test_renamed_rig_bakes_the_same_motion(maps_dir, fit_server, tmp_path):
    """Mixamo names re-parent some bones: the baked channels follow the new hierarchy."""
    result = _animate(maps_dir, fit_server, [tmp_path / "m.glb"], rig_names="mixamo")
    assert result.armatures[0]["sapiens_rig_names"] == "mixamo"
    assert "mixamorig:Hips" in result.armatures[0].pose.bones
    _assert_baked_pose_is_the_servers(result, frames=(2, FRAMES - 2))
    assert validate_gltf(tmp_path / "m.glb")["issues"]["numErrors"] == 0


def test_a_server_without_the_fit_keeps_the_relief_armature(maps_dir, tmp_path):
    """No anny in the server's environment: the clip is still animated, on the relief armature,
    and the note says why."""
    blocker = tmp_path / "no_anny"
    blocker.mkdir()
    (blocker / "anny.py").write_text('raise ImportError("No module named anny (hidden by the test)")\n')
    token = secrets.token_hex(24)
    env = server_env(token)
    env["PYTHONPATH"] = os.pathsep.join([str(blocker), env["PYTHONPATH"]])
    srv = start_server(tmp_path, "--parent-pid", str(os.getpid()), token=token, env=env)
    try:
        api.new_scene()
        result = api.animate(maps_dir, [tmp_path / "r.glb"], maps_dir=True, server=f"http://{srv.url}", token=token)
    finally:
        srv.stop()
    assert result.animation.source == "relief armature"
    assert any("no body fit" in n and "anny" in n for n in result.animation.notes), result.animation.notes
    assert result.armatures[0]["sapiens_animation_source"] == "relief armature"
    assert validate_gltf(tmp_path / "r.glb")["issues"]["numErrors"] == 0


def test_two_people_each_get_their_body(fit_server, tmp_path):
    """Two people in 6 frames (one waving, one standing further back): two tracks, two bodies
    fitted once each (on one frame when both are best seen there), each baked on its own rig."""
    import scenes
    from motion_clip import motion_pose

    folder = tmp_path / "maps"
    for i in range(6):
        pose, yaw, _ = motion_pose(i / 12)
        a = scenes.pose_body(pose, "average", yaw, (-0.45, 0.0, 3.2))
        b = scenes.pose_body("arms_bent", "slim_short", -10.0, (0.6, 0.1, 3.9))
        scenes.render([a, b], (200, 150), focal=240.0).maps.save(folder / f"f{i}.npz")
    result = _animate(folder, fit_server, [tmp_path / "two.glb"], body_mode="minimal")
    animation = result.animation
    assert animation.source == "fitted body" and len(animation.tracks) == 2, animation.notes
    # Every frame analysed and both people followed through all six (the baked frames below).
    assert list(animation.frames) == list(range(6)), animation.notes
    assert [list(t.frames) for t in animation.tracks] == [list(range(6))] * 2, animation.notes
    a, b = animation.tracks
    # Tracks whose best-seen frame is the same frame share one fit of it (one request, both people).
    assert (a.reference_maps is b.reference_maps) == (a.body.fit is b.body.fit)
    assert a.body.fit.index(a.body.person_id) != b.body.fit.index(b.body.person_id) or a.body.fit is not b.body.fit
    heights = sorted(float(np.ptp(t.body.fit.rest_vertices[t.body.index][:, 2])) for t in animation.tracks)
    assert heights[1] - heights[0] > 0.05  # the slim short person and the average one kept apart
    for k in range(2):
        single = type(result)(result.camera, result.collection, [result.armatures[k]], [result.meshes[k]],
                              result.source, result.frame_range)
        single.animation = type(animation)(animation.fps, animation.intrinsics, animation.width, animation.height,
                                           animation.frames, [animation.tracks[k]], animation.source,
                                           animation.joint_names)
        _assert_baked_pose_is_the_servers(single, frames=(0, 5))
    assert validate_gltf(tmp_path / "two.glb")["issues"]["numErrors"] == 0
