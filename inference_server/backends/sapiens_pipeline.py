# SPDX-License-Identifier: GPL-3.0-or-later
"""One photo -> canonical maps, shared by the Sapiens2 and Sapiens v1 backends.

A family supplies a ``TaskRunner`` (how to call its models and undo its preprocessing); this
module does everything family-independent, in one place: the maps grid, people from the
segmentation foreground, camera intrinsics, depth/pointmap in the camera frame, normal axis
self-calibration, top-down pose per person and the keypoint pixel convention.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..processing.goliath import KEYPOINT_NAMES
from .base import AnalyzeOptions, CancelToken, ProgressFn, no_progress

log = logging.getLogger(__name__)

NUM_KEYPOINTS = len(KEYPOINT_NAMES)
TASKS = ("seg", "normal", "depth", "pose")
POSE_BATCH = 8  # people per pose forward pass
# Pixels at the mask border mix person and background depth: keep them out of the fits.
FIT_EROSION_PX = 2


class TaskRunner(Protocol):
    source: str
    part_names: tuple[str, ...]
    metric: bool  # True: depth() returns metric camera-frame points
    pose_input_hw: tuple[int, int]

    def segment(self, photo, hw) -> np.ndarray: ...  # uint8 class ids [H,W]

    def depth(self, photo, hw) -> np.ndarray: ...  # metric: points [H,W,3]; else relative depth [H,W]

    def normals(self, photo, hw) -> np.ndarray: ...  # unit vectors [H,W,3], model's own axes

    def pose(self, crops) -> np.ndarray: ...  # heatmaps [N,K,h,w] for normalised crops


@dataclass
class StageTimes:
    """Seconds per stage of the last analysis (for logs and the benchmark)."""

    seconds: dict = field(default_factory=dict)

    def add(self, stage: str, start: float) -> None:
        self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start


def maps_grid(image: np.ndarray, max_side: int, device="cpu"):
    """(photo tensor [1,3,h,w] 0-255 on device, uint8 RGB [h,w,3]) with long side <= max_side."""
    import torch.nn.functional as F

    from ..processing.resize_pad import photo_tensor

    photo = photo_tensor(image, device)
    h, w = image.shape[:2]
    scale = min(1.0, float(max_side) / max(h, w)) if max_side and max_side > 0 else 1.0
    if scale < 1.0:
        hw = (max(1, round(h * scale)), max(1, round(w * scale)))
        photo = F.interpolate(photo, size=hw, mode="bilinear", align_corners=False, antialias=True)
        photo = photo.round().clamp(0, 255)
        grid = photo[0].permute(1, 2, 0).to("cpu", dtype=photo.dtype).numpy().astype(np.uint8)
        return photo, grid
    return photo, np.ascontiguousarray(image, dtype=np.uint8)


def empty_keypoints(people: int) -> np.ndarray:
    return np.zeros((people, NUM_KEYPOINTS, 3), np.float32)


def run_pipeline(runner: TaskRunner, image: np.ndarray, options: AnalyzeOptions,
                 progress: ProgressFn = no_progress, cancel: CancelToken | None = None,
                 device="cpu", times: StageTimes | None = None,
                 normal_signs_hint: tuple | None = None) -> dict:
    """Run the requested tasks and convert to the canonical maps dict (keys of MAP_OUTPUTS).

    One photo is a batch of one (sapiens_batch.py): the single and batched paths cannot drift."""
    from .sapiens_batch import run_pipeline_batch

    (result,) = run_pipeline_batch(runner, [image], [options], [progress], [cancel], device, times,
                                   normal_signs_hint)
    if isinstance(result, BaseException):
        raise result
    return result


def _points_from_depth(depth: np.ndarray, k: np.ndarray) -> np.ndarray:
    h, w = depth.shape
    u = np.arange(w, dtype=np.float32) + 0.5
    v = np.arange(h, dtype=np.float32) + 0.5
    x = (u[None, :] - k[0, 2]) * depth / k[0, 0]
    y = (v[:, None] - k[1, 2]) * depth / k[1, 1]
    return np.stack([x, y, depth], -1).astype(np.float32)


def _source(name: str, agreement: float, signs) -> str:
    """``source`` carries the normal self-check too: the v2 outputs are fixed to the contract's."""
    if not np.isfinite(agreement):
        return name
    flipped = "".join(a for a, s in zip("xyz", signs or (1, 1, 1)) if s < 0) or "none"
    return f"{name}; normal self-check {agreement:.1f} deg, flipped axes {flipped}"


def _outputs(runner, grid, people, parts, normal, depth, pointmap, k, keypoints, agreement, notes,
             signs=None) -> dict:
    out = {
        "image": grid,
        "mask": people.astype(np.uint8),
        "parts": parts.astype(np.uint8),
        "part_names": np.asarray(runner.part_names, dtype=object),
        "normal": normal.astype(np.float32),
        "depth": depth.astype(np.float32),
        "metric": np.asarray([bool(runner.metric)]),
        "intrinsics": np.asarray(k, np.float32),
        "keypoints": keypoints.astype(np.float32),
        "source": np.asarray([_source(runner.source, agreement, signs)], dtype=object),
        # Optional diagnostics (base.OPTIONAL_OUTPUTS); clients keep them in Maps.extras.
        "normal_agreement_deg": np.asarray([agreement], np.float32),
        "notes": np.asarray(["; ".join(notes)], dtype=object),
    }
    if pointmap is not None:
        out["pointmap"] = pointmap.astype(np.float32)
    return out

