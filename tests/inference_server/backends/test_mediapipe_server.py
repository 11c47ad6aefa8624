# SPDX-License-Identifier: GPL-3.0-or-later
"""The offline backend and `auto` served by the real server, called by the real client."""

from __future__ import annotations

import numpy as np
from test_mediapipe_photos import _outline_mask

from sapiens_blender.core.remote.analysis import analyze_photo
from sapiens_blender.core.remote.client import V2Client
from sapiens_blender.data import sample_photo_path


def test_mediapipe_maps_through_the_server(server):
    with V2Client(f"http://{server.url}", server.token) as client:
        maps = analyze_photo(client, sample_photo_path(), "mediapipe")
        meta = client.model_metadata("mediapipe")
    assert maps.source == "mediapipe-0.10.21" and maps.metric
    assert maps.person_ids == [1] and maps.keypoints.shape == (1, 308, 3)
    truth, found = _outline_mask("original", maps.mask.shape), maps.mask > 0
    assert (truth & found).sum() / (truth | found).sum() >= 0.8
    person = maps.mask > 0
    assert np.isfinite(maps.depth[person]).all() and np.isfinite(maps.normal[person]).all()
    assert meta["parameters"]["backend"]["device"] == "cpu"


def test_auto_says_which_model_and_why(server):
    with V2Client(f"http://{server.url}", server.token) as client:
        maps = analyze_photo(client, sample_photo_path(), "auto", max_side=256)
        facts = client.model_metadata("auto")["parameters"]["backend"]
    # This machine has no GPU (and tests are offline): the offline backend, with the reason.
    assert facts["resolved"] == "mediapipe" and facts["reason"]
    assert maps.source == f"mediapipe-0.10.21 (auto: {facts['reason']})"
    assert maps.mask.shape == (256, 256) and maps.person_ids == [1]


def test_a_clip_frame_takes_each_3d_pose_from_one_look(server):
    """Parameter clip_frame (what animate sends for every frame): the offline backend skips the
    six looks averaged into each person's 3D pose (the clip's smoothing replaces them); the body's
    2D keypoints are the same either way (the hands' and face's move by a pixel from call to call)."""
    from inference_server.backends.mediapipe_landmarks import POSE_TO_GOLIATH
    from inference_server.processing.goliath import KEYPOINT_INDEX

    with V2Client(f"http://{server.url}", server.token) as client:
        photo = analyze_photo(client, sample_photo_path(), "mediapipe")
        frame = analyze_photo(client, sample_photo_path(), "mediapipe", clip_frame=True)
    body = [KEYPOINT_INDEX[g] for g in POSE_TO_GOLIATH.values()]
    assert np.array_equal(photo.keypoints[:, body], frame.keypoints[:, body])
    seen = np.isfinite(photo.keypoints_3d[..., 0]) & np.isfinite(frame.keypoints_3d[..., 0])
    assert seen.sum() >= 12
    assert np.abs(photo.keypoints_3d[..., :3][seen] - frame.keypoints_3d[..., :3][seen]).max() > 1e-3
