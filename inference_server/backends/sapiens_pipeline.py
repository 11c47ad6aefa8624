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

from ..processing import depth_scale, heatmaps, instances, intrinsics, normals
from ..processing.goliath import FLIP_PAIRS, KEYPOINT_NAMES
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
    """Run the requested tasks and convert to the canonical maps dict (keys of MAP_OUTPUTS + extras)."""
    times = times or StageTimes()
    tasks = tuple(t for t in options.tasks if t in TASKS)
    unknown = [t for t in options.tasks if t not in TASKS]
    if unknown:
        from .base import BackendError

        raise BackendError(f"unknown task(s) {', '.join(unknown)}; choose from {', '.join(TASKS)}", status=400)
    check = cancel.check if cancel is not None else (lambda: None)
    notes: list[str] = []
    steps = 1 + sum(t in tasks for t in ("depth", "normal", "pose"))
    done = [0]

    def step(stage, message):
        progress(stage, done[0] / steps, message)
        done[0] += 1

    t0 = time.perf_counter()
    photo, grid = maps_grid(image, options.max_side, device)
    h, w = grid.shape[:2]
    times.add("preprocess", t0)

    # The mask comes from the segmentation, so it always runs (even when "seg" is not asked for).
    check()
    step("seg", "body-part segmentation")
    t0 = time.perf_counter()
    parts = runner.segment(photo, (h, w))
    times.add("forward_seg", t0)
    t0 = time.perf_counter()
    people = instances.label_people(parts > 0)
    parts = np.where(people > 0, parts, 0).astype(np.uint8)
    count = int(people.max(initial=0))
    times.add("postprocess", t0)

    k = intrinsics.default_intrinsics(h, w)
    depth = np.full((h, w), np.nan, np.float32)
    normal = np.full((h, w, 3), np.nan, np.float32)
    pointmap = None
    keypoints = empty_keypoints(count)
    agreement = float("nan")
    signs = normal_signs_hint or (1.0, 1.0, 1.0)
    if count == 0:
        notes.append("no person found in the photo: the maps are empty")
        log.warning("%s: no person found (%dx%d photo)", runner.source, w, h)
        progress("done", 1.0, "no person found in the photo")
        return _outputs(runner, grid, people, parts, normal, depth, pointmap, k, keypoints, agreement, notes)

    fg = people > 0
    from scipy import ndimage

    inner = ndimage.binary_erosion(fg, iterations=FIT_EROSION_PX) if min(h, w) > 4 * FIT_EROSION_PX else fg
    if inner.sum() < intrinsics.MIN_FIT_POINTS:
        inner = fg
    points = None
    if "depth" in tasks:
        check()
        step("depth", "depth" if not runner.metric else "pointmap")
        t0 = time.perf_counter()
        raw = runner.depth(photo, (h, w))
        times.add("forward_depth", t0)
        t0 = time.perf_counter()
        if runner.metric:
            points = np.asarray(raw, np.float32)
            fitted, rms = intrinsics.fit_intrinsics(points, inner)
            if fitted is not None:
                k = fitted
                log.info("%s: intrinsics from the pointmap fx=%.1f fy=%.1f cx=%.1f cy=%.1f (rms %.2f px)",
                         runner.source, k[0, 0], k[1, 1], k[0, 2], k[1, 2], rms)
            else:
                notes.append("intrinsics: pointmap fit failed, default field of view used")
            depth = np.where(fg, points[..., 2], np.nan).astype(np.float32)
            pointmap = np.where(fg[..., None], points, np.nan).astype(np.float32)
        else:
            depth = depth_scale.relative_depth_to_z(raw, people, float(k[1, 1]))
            points = _points_from_depth(depth, k)
        times.add("postprocess", t0)

    if "normal" in tasks:
        check()
        step("normal", "surface normals")
        t0 = time.perf_counter()
        predicted = runner.normals(photo, (h, w))
        times.add("forward_normal", t0)
        t0 = time.perf_counter()
        if points is not None:
            reference = normals.normals_from_points(points, inner)
            cal = normals.calibrate_normal_signs(predicted, reference, inner)
            log.info("%s: %s", runner.source, cal.describe())
            notes.append(cal.describe())
            if cal.pixels >= normals.MIN_CALIBRATION_PIXELS:
                signs, agreement = cal.signs, cal.agreement_deg
        else:
            notes.append("normal self-calibration needs depth; axis signs from the last calibration"
                         if normal_signs_hint else "normal self-calibration needs depth; model axes kept")
        normal = predicted * np.asarray(signs, np.float32)
        normal = np.where(fg[..., None], normal, np.nan).astype(np.float32)
        runner.last_normal_signs = tuple(signs) if np.isfinite(agreement) else normal_signs_hint
        times.add("postprocess", t0)

    if "pose" in tasks:
        check()
        step("pose", f"keypoints of {count} {'person' if count == 1 else 'people'}")
        keypoints = _pose(runner, photo, people, options.flip_test, times, check)

    progress("done", 1.0, "analysis complete")
    return _outputs(runner, grid, people, parts, normal, depth, pointmap, k, keypoints, agreement, notes,
                    signs)


def _points_from_depth(depth: np.ndarray, k: np.ndarray) -> np.ndarray:
    h, w = depth.shape
    u = np.arange(w, dtype=np.float32) + 0.5
    v = np.arange(h, dtype=np.float32) + 0.5
    x = (u[None, :] - k[0, 2]) * depth / k[0, 0]
    y = (v[:, None] - k[1, 2]) * depth / k[1, 1]
    return np.stack([x, y, depth], -1).astype(np.float32)


def _pose(runner: TaskRunner, photo, people, flip: bool, times: StageTimes, check) -> np.ndarray:
    from ..processing.resize_pad import crop_people

    boxes = instances.person_boxes(people)
    mh, mw = runner.pose_input_hw
    centres, sizes = heatmaps.crop_params(boxes, aspect_wh=mw / mh)
    out = empty_keypoints(len(boxes))
    for start in range(0, len(boxes), POSE_BATCH):
        check()
        sl = slice(start, start + POSE_BATCH)
        t0 = time.perf_counter()
        crops = crop_people(photo, centres[sl], sizes[sl], runner.pose_input_hw, runner.mean, runner.std)
        times.add("preprocess", t0)
        t0 = time.perf_counter()
        hm = runner.pose(crops)
        if flip:
            flipped = crops.flip(-1)
            hm = 0.5 * (hm + heatmaps.flip_back(runner.pose(flipped), FLIP_PAIRS))
        times.add("forward_pose", t0)
        t0 = time.perf_counter()
        xy, score = heatmaps.decode_heatmaps(hm)
        xy_img = heatmaps.heatmap_to_image(xy, centres[sl], sizes[sl], hm.shape[-2:])
        absent = score <= 0
        xy_img = xy_img + 0.5  # pixel-index -> canonical pixel-centre convention (u = col + 0.5)
        xy_img[absent] = 0.0
        out[sl, :, :2] = xy_img
        out[sl, :, 2] = np.clip(np.nan_to_num(score, nan=0.0), 0.0, 1.0)
        times.add("postprocess", t0)
    return out


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

