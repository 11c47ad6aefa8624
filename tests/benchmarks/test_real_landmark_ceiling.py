# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/real_landmark_ceiling.py on the bundled astronaut (no real data, no network): its
raw graph of the landmark model answers as the wheel's own graph does, and a label's box is the
detector's kind of box."""

import numpy as np
import pytest
from benchmark_modules import benchmark_module

from inference_server.backends.mediapipe_landmarker import PersonLandmarker
from inference_server.processing.image_io import decode_image
from sapiens_blender.data import sample_photo_path


@pytest.fixture(scope="module")
def ceiling():
    with benchmark_module("real_landmark_ceiling") as module:
        yield module


def test_label_box_is_the_hips_centre_and_a_circle_towards_the_shoulders(ceiling):
    points = {"left_hip": (110, 200), "right_hip": (90, 200), "left_shoulder": (120, 120),
              "right_shoulder": (80, 120), "left_ankle": (110, 330), "nose": (100, 90)}
    hips, top = ceiling.label_box(points, (70, 80, 60, 260), scale=0.5)
    assert np.allclose(hips, (50, 100))
    # straight up, one body-circle radius: the ankle is the farthest point
    assert np.allclose(top, (50, 100 - 1.05 * np.hypot(10, 130) / 2))
    # a person lying on their side: the circle turns with the torso
    lying = {"left_hip": (200, 110), "right_hip": (200, 90), "left_shoulder": (120, 120), "right_shoulder": (120, 80)}
    hips, top = ceiling.label_box(lying, (100, 60, 200, 80), scale=1.0)
    assert top[0] < hips[0] and abs(top[1] - hips[1]) < 1e-6


def test_raw_look_answers_as_the_wheels_graph(ceiling):
    photo = decode_image(sample_photo_path().read_bytes())
    h, w = photo.shape[:2]
    hips, top = np.array([0.5 * w, 0.62 * h]), np.array([0.5 * w, 0.05 * h])
    wheel = PersonLandmarker(hands_and_face=False).process(photo, hips, top)
    raw = ceiling.RawLook()
    try:
        presence, xy = raw(photo, hips, top)
    finally:
        raw.close()
    assert wheel.pose_landmarks is not None and presence >= ceiling.PRESENT
    expected = np.array([(p.x * w, p.y * h) for p in wheel.pose_landmarks.landmark])
    assert np.abs(xy - expected).max() < 1e-3, np.abs(xy - expected).max()  # the same look, ungated
    # and an empty wall is nobody
    wall = np.full_like(photo, 128)
    raw = ceiling.RawLook()
    try:
        assert raw(wall, hips, top)[0] < ceiling.PRESENT
    finally:
        raw.close()
