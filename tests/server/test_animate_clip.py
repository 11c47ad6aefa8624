# SPDX-License-Identifier: GPL-3.0-or-later
"""A real clip through the real server and the offline backend: the panned astronaut (JPEG
frames with flicker). Her joints must follow the known pan; smoothing must beat per-frame."""

from __future__ import annotations

import pytest
from astronaut_clip import follow_error_px, write_clip

from sapiens_blender.core.client import V2Client
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
    # Measured: per frame 9.3 px, lag 2 4.3 px, offline 3.6 px. The goal is 3 px: what
    # is left is the backend's slow keypoint drift as the photo moves (shoulders ~6 px), which
    # no temporal filter can tell from motion (docs/performance.md).
    assert results["lag 2"] <= 5.0 and results["offline"] <= 4.0
    assert results["lag 2"] < results["per frame"] / 2
