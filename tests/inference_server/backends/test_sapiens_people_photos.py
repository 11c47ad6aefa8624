# SPDX-License-Identifier: GPL-3.0-or-later
"""Two people who touch or overlap, on real photo content: the bundled astronaut and her mirror
image composed side by side (touching) and overlapping (the mirror in front). The foreground is
what the offline `mediapipe` backend segments; person boxes split it into the two people, where
connected components (the fallback without a detector) make them one."""

from __future__ import annotations

import cv2
import numpy as np
import pytest
from PIL import Image
from test_mediapipe_photos import ASTRONAUT_OUTLINE, PHOTO_SIDE

from inference_server.dataplane.base import AnalyzeOptions
from inference_server.backends.mediapipe_cpu import MediaPipeBackend
from inference_server.processing import instances
from sapiens_blender.data import sample_photo_path

# where the mirror image starts: the bodies touch (outlines 22 px into each other) or overlap (82 px)
SHIFTS = {"touching": 190, "overlapping": 130}


def _outline(shift: int, mirrored: bool, width: int) -> np.ndarray:
    pts = np.array(ASTRONAUT_OUTLINE, np.float64)
    if mirrored:
        pts[:, 0] = PHOTO_SIDE - pts[:, 0]
    pts[:, 0] += shift
    out = np.zeros((PHOTO_SIDE, width), np.uint8)
    cv2.fillPoly(out, [np.round(pts).astype(np.int32)], 1)
    return out.astype(bool)


def compose(case: str):
    """(photo [512, 512+shift, 3], truth instance masks [back person, front person])."""
    shift = SHIFTS[case]
    original = np.asarray(Image.open(sample_photo_path()).convert("RGB"))
    mirror = original[:, ::-1]
    width = PHOTO_SIDE + shift
    canvas = np.zeros((PHOTO_SIDE, width, 3), np.uint8)
    canvas[:, :PHOTO_SIDE] = original
    canvas[:, PHOTO_SIDE:] = mirror[:, PHOTO_SIDE - shift:]
    front = _outline(shift, True, width)
    shifted = np.zeros_like(canvas)
    shifted[:, shift:] = mirror
    canvas[front] = shifted[front]
    back = _outline(0, False, width) & ~front
    return canvas, [back, front]


def _iou(a, b) -> float:
    return float((a & b).sum() / max((a | b).sum(), 1))


@pytest.fixture(scope="module")
def backend():
    b = MediaPipeBackend()
    b.load()
    yield b
    b.unload()


def _boxes(masks) -> np.ndarray:
    return np.asarray([[xs.min(), ys.min(), xs.max(), ys.max()] for ys, xs in (np.nonzero(m) for m in masks)],
                      np.float64)


def _assert_people_match(people: np.ndarray, truth: list, case: str, threshold: float) -> None:
    assert people.max() == 2, f"{case}: {people.max()} people"
    for person in (1, 2):
        match = max(_iou(people == person, t) for t in truth)
        assert match > threshold, f"{case}: person {person} IoU {match:.2f} against its own body"


@pytest.mark.parametrize("case", list(SHIFTS))
def test_the_offline_backend_keeps_two_touching_people_apart(backend, case):
    image, truth = compose(case)
    maps = backend.analyze(image, AnalyzeOptions(tasks=("seg", "pose")))
    _assert_people_match(maps["mask"], truth, case, 0.7)
    assert maps["keypoints"].shape[0] == 2


@pytest.mark.parametrize("case", list(SHIFTS))
def test_detector_boxes_split_the_one_foreground_of_two_touching_people(backend, case):
    """A semantic segmentation gives the two bodies as one foreground blob: connected components
    make them one person; the people's boxes (what the detector gives) split it again. Checked on
    the composed bodies and on the offline backend's foreground of the composed photo."""
    image, truth = compose(case)
    union = truth[0] | truth[1]
    assert instances.label_people(union).max() == 1  # the fallback merges them
    people, kept = instances.split_by_boxes(union, _boxes(truth))
    _assert_people_match(people, truth, case, 0.95)
    foreground = backend.analyze(image, AnalyzeOptions(tasks=("seg",)))["mask"] > 0
    assert _iou(foreground, union) > 0.75
    people, _ = instances.split_by_boxes(foreground, _boxes(truth))
    _assert_people_match(people, [t & foreground for t in truth], case, 0.9)
