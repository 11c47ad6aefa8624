# SPDX-License-Identifier: GPL-3.0-or-later
"""A real clip through the real server and the offline backend: the panned astronaut (JPEG
frames with flicker). Her joints must follow the known pan; smoothing must beat per-frame."""

from __future__ import annotations

import pytest
from astronaut_clip import follow_error_px, write_clip

from sapiens_blender.core.remote.client import V2Client
from sapiens_blender.core.motion.clip import AnimateOptions
from sapiens_blender.core.motion.smoothing import SmoothingOptions
from sapiens_blender.core.motion.sources import ImageFolder
from sapiens_blender.core.motion.stream import run_clip, server_analyzer

pytest.importorskip("cv2")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    folder = tmp_path_factory.mktemp("astronaut_clip")
    return folder, write_clip(folder, frames=40)


def test_panned_astronaut_joints_follow_the_known_motion(server, clip):
    folder, shifts = clip
    with V2Client(f"http://{server.url}", server.token) as client:
        analyze = server_analyzer(client, "mediapipe")
        cache = {}

        def cached(frame):  # analyse once, animate three ways
            if frame.index not in cache:
                cache[frame.index] = analyze(frame)
            return cache[frame.index]

        results = {}
        for label, options in (("per frame", AnimateOptions(smooth=False, planting=None)),
                               ("lag 2", AnimateOptions()),
                               ("offline", AnimateOptions(smoothing=SmoothingOptions(lag=None)))):
            animation = run_clip(ImageFolder(folder), cached, parallel=4, options=options)
            assert len(animation.tracks) == 1 and animation.tracks[0].seen.all()
            results[label], names = follow_error_px(animation, shifts)
    print({k: round(v, 2) for k, v in results.items()}, "px over", names)
    assert {"left_shoulder", "right_shoulder", "left_elbow", "right_elbow"} <= set(names)
    # Measured: per frame 9.33 px, lag 2 2.14 px, offline 1.26 px (goal 3 px; before the global
    # motion was the least noisy mean of the joints, per axis, with every joint tracked relative
    # to it: 3.71 and 2.95 px). Other flicker seeds of this clip: lag 2 2.78 and 3.40 px.
    assert results["lag 2"] <= 2.7 and results["offline"] <= 1.8
    assert results["lag 2"] < results["per frame"] / 3


def test_animate_cli_on_a_video_through_the_server(server, clip, tmp_path):
    """`sapiens-blender animate clip.avi -o x.fbx` end to end against the running server."""
    import json
    import subprocess
    import sys

    import cv2

    pytest.importorskip("bpy")
    folder, _ = clip
    video = tmp_path / "pan.avi"
    writer = cv2.VideoWriter(str(video), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (512, 512))
    for f in sorted(folder.iterdir())[:12]:
        writer.write(cv2.imread(str(f)))
    writer.release()
    entry = "import sys; from sapiens_blender.cli import main; sys.exit(main())"
    out = subprocess.run([sys.executable, "-c", entry, "animate", str(video), "-o", str(tmp_path / "pan.fbx"),
                          "--model", "mediapipe", "--server", f"http://{server.url}", "--token", server.token,
                          "--start", "2", "--stride", "2", "--save-joints", str(tmp_path / "pan.json"),
                          "-q"], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert "5 frames at 12.5 fps, 1 track(s), driving the fitted body" in out.stdout
    doc = json.loads((tmp_path / "pan.json").read_text())
    assert [f["frame"] for f in doc["frames"]] == [2, 4, 6, 8, 10]
    assert doc["source"] == "fitted body"
    joints = doc["frames"][0]["people"][0]["joints"]
    assert {"left_wrist", "right_knee", "nose"} <= set(joints)  # the body's joints, joints-file names
    assert (tmp_path / "pan.fbx").stat().st_size > 10000
