# SPDX-License-Identifier: GPL-3.0-or-later
"""Photos -> canonical maps, shared by the Sapiens2 and Sapiens v1 backends, batch first.

A family supplies a ``TaskRunner`` (how to call its models and undo its preprocessing); this
module does everything family-independent, in one place: the maps grid, people from the
segmentation foreground, camera intrinsics, depth/pointmap in the camera frame, normal axis
self-calibration, top-down pose per person and the keypoint pixel convention.

Every photo is resized/padded to the model's fixed input size anyway, so the model inputs of
several photos stack into one batch: each task runs once for the whole batch, everything else
(grid, people, intrinsics, self-calibration, keypoint decoding) stays per photo. Each photo keeps
its own progress and cancel token: a cancelled photo leaves the batch at the next task boundary
(its result is a :class:`Cancelled`) and the others go on. One photo is a batch of one.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np

from ..dataplane.base import AnalyzeOptions, BackendError, Cancelled, CancelToken, ProgressFn, no_progress
from ..processing import dense_torch, depth_scale, instances, intrinsics, normals
from ..processing.goliath import KEYPOINT_NAMES
from .sapiens_pose import run_pose

log = logging.getLogger(__name__)

NUM_KEYPOINTS = len(KEYPOINT_NAMES)
TASKS = ("seg", "normal", "depth", "pose")
# Pixels at the mask border mix person and background depth: keep them out of the fits.
FIT_EROSION_PX = 2


class TaskRunner(Protocol):
    """One family's models; every call takes a batch (photo tensors [1,3,h,w] 0-255 and their
    maps-grid sizes) and returns one array per photo."""

    source: str
    part_names: tuple[str, ...]
    metric: bool  # True: depth_batch() returns metric camera-frame points
    pose_input_hw: tuple[int, int]
    mean: tuple
    std: tuple

    def segment_batch(self, photos, hws) -> list: ...  # uint8 class ids [H,W]

    # depth and normals: torch tensors on the model's device (or numpy arrays)
    def depth_batch(self, photos, hws) -> list: ...  # metric: points [H,W,3]; else relative depth [H,W]

    def normals_batch(self, photos, hws) -> list: ...  # unit vectors [H,W,3], model's own axes

    def pose(self, crops): ...  # heatmaps [N,K,h,w] for normalised crops: a tensor on the model's device


@dataclass
class StageTimes:
    """Seconds per stage of the last analysis (for logs and the benchmark).

    On a GPU, work is queued: a stage's clock stops before its kernels finish and the wait lands
    in whichever later stage copies a result back. ``synchronize`` (e.g. torch.cuda.synchronize)
    makes each stage wait for its own work: exact per-stage times, at the price of the overlap
    of host and device work (the benchmark's per-image modes use it, its stream mode does not)."""

    seconds: dict = field(default_factory=dict)
    synchronize: object = None

    def add(self, stage: str, start: float) -> None:
        if self.synchronize is not None:
            self.synchronize()
        self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start


def device_synchronizer(device):
    """A callable that waits for the queued work of ``device`` (None on the CPU: nothing queues)."""
    if str(device).startswith("cuda"):
        import torch

        return lambda: torch.cuda.synchronize(device)
    return None


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


@dataclass
class _Photo:
    """One photo's state while it moves through the batch."""

    image: np.ndarray
    options: AnalyzeOptions
    progress: ProgressFn
    cancel: CancelToken | None
    tasks: tuple = ()
    notes: list = field(default_factory=list)
    result: object = None  # the maps dict or the exception that ended this photo
    steps: int = 1
    done: int = 0

    def step(self, stage: str, message: str) -> None:
        self.progress(stage, self.done / self.steps, message)
        self.done += 1


def _unknown_tasks(options: AnalyzeOptions) -> BackendError | None:
    unknown = [t for t in options.tasks if t not in TASKS]
    if unknown:
        return BackendError(f"unknown task(s) {', '.join(unknown)}; choose from {', '.join(TASKS)}", status=400)
    return None


def _still_running(photos: list[_Photo]) -> list[_Photo]:
    """Drop the photos whose request was cancelled: the rest of the batch goes on without them."""
    live = []
    for p in photos:
        if p.result is None and p.cancel is not None and p.cancel.cancelled:
            p.result = Cancelled("request cancelled")
        if p.result is None:
            live.append(p)
    return live


def _batched(runner, method: str, photos: list[_Photo]) -> list:
    """One forward of ``runner.<method>_batch`` for the whole batch."""
    return list(getattr(runner, method + "_batch")([p.photo for p in photos], [p.grid.shape[:2] for p in photos]))


def run_pipeline(runner, images: list, options_list: list, progress_list: list | None = None,
                 cancel_list: list | None = None, device="cpu", times: StageTimes | None = None,
                 detector=None, no_detector_reason: str = "no person detector configured",
                 depth_available: bool = True, queue_forwards: bool | None = None) -> list:
    """Maps dicts for ``images`` (same order); an entry is the exception when that photo failed or was
    cancelled. A failing forward pass fails the whole batch (raised).

    ``detector`` (person_detector.PersonDetector or None) splits the foreground into people and
    gives the pose boxes; without it (``no_detector_reason`` says why, in the notes) people are
    connected components. ``depth_available``: the runner can run depth, so normals asked for
    without depth are still calibrated against it (the depth itself is then not returned).
    ``queue_forwards``: run the depth and normal forwards before the segmentation's
    post-processing (default: on an accelerator, where they then overlap with it)."""
    times = times if times is not None else StageTimes()
    n = len(images)
    photos = [_Photo(img, opt, (progress_list or [no_progress] * n)[i] or no_progress,
                     (cancel_list or [None] * n)[i]) for i, (img, opt) in enumerate(zip(images, options_list))]
    for p in photos:
        p.result = _unknown_tasks(p.options)
        p.tasks = tuple(t for t in p.options.tasks if t in TASKS)
        # normals are calibrated against depth: it runs for them even when not asked for
        p.depth_for_normals = "normal" in p.tasks and "depth" not in p.tasks and depth_available
        p.steps = 1 + sum(t in p.tasks for t in ("depth", "normal", "pose")) + int(p.depth_for_normals)

    live = _still_running(photos)
    t0 = time.perf_counter()
    for p in live:
        p.photo, p.grid = maps_grid(p.image, p.options.max_side, device)
        p.boxes = None
    times.add("preprocess", t0)
    if detector is not None and live:
        t0 = time.perf_counter()
        for p, boxes in zip(live, detector.detect_batch([p.photo for p in live], [p.grid.shape[:2] for p in live])):
            p.boxes = boxes
        times.add("forward_detect", t0)

    # The mask comes from the segmentation, so it always runs (even when "seg" is not asked for).
    live = _still_running(live)
    parts = _forward(runner, live, "seg", "segment", "forward_seg", times, lambda p: "body-part segmentation")
    needs_depth = lambda p: "depth" in p.tasks or p.depth_for_normals  # noqa: E731
    depth_message = lambda p: (("depth" if not runner.metric else "pointmap")  # noqa: E731
                               + (" (to calibrate the normals)" if p.depth_for_normals else ""))
    # The depth and normal forwards do not need the segmentation's post-processing. On an
    # accelerator they are queued before it, so the device computes them while the host finds the
    # people; on the CPU they wait for it (photos without people, or cancelled, skip them).
    queued = str(device) != "cpu" if queue_forwards is None else queue_forwards
    run_depth = lambda ps: _forward(runner, [p for p in ps if needs_depth(p)], "depth", "depth",  # noqa: E731
                                    "forward_depth", times, depth_message)
    run_normals = lambda ps: _forward(runner, [p for p in ps if "normal" in p.tasks], "normal",  # noqa: E731
                                      "normals", "forward_normal", times, lambda p: "surface normals")
    if queued:
        points, predicted = run_depth(live), run_normals(live)
    _postprocess(live, parts, times, lambda p, out: _after_segmentation(runner, p, out, detector, no_detector_reason))

    live = [p for p in _still_running(live) if p.count > 0]
    if not queued:
        points = run_depth(live)
    _postprocess([p for p in live if needs_depth(p)], points, times, lambda p, raw: _after_depth(runner, p, raw))

    live = _still_running(live)
    if not queued:
        predicted = run_normals(live)
    _postprocess([p for p in live if "normal" in p.tasks], predicted, times,
                 lambda p, out: _after_normals(runner, p, out))
    del points, predicted

    live = _still_running(live)
    pose_photos = [p for p in live if "pose" in p.tasks]
    for p in pose_photos:
        p.step("pose", f"keypoints of {p.count} {'person' if p.count == 1 else 'people'}")
    run_pose(runner, pose_photos, times)

    for p in _still_running(live):
        p.progress("done", 1.0, "analysis complete")
        p.result = _outputs(runner, p.grid, p.people, p.parts, p.normal, p.depth, p.pointmap, p.k,
                            p.keypoints, p.agreement, p.notes, p.signs)
    return [p.result for p in photos]


def _forward(runner, photos: list, step: str, head: str, timer: str, times, message) -> dict:
    """One dense head on ``photos``: their progress step and one batched forward; its outputs by
    photo (id), for the post-processing."""
    for p in photos:
        p.step(step, message(p))
    t0 = time.perf_counter()
    outputs = _batched(runner, head, photos) if photos else []
    times.add(timer, t0)
    return {id(p): out for p, out in zip(photos, outputs)}


def _postprocess(photos: list, outputs: dict, times, after) -> None:
    """``after`` (post-processing) for each photo with its forward's output."""
    t0 = time.perf_counter()
    for p in photos:
        after(p, outputs[id(p)])
    times.add("postprocess", t0)


def _find_people(p: _Photo, foreground: np.ndarray, detector, no_detector_reason: str) -> None:
    """p.people (instance map) and p.boxes (pose boxes), from the detector when it found people in
    the foreground, else connected components; the notes say which."""
    if p.boxes is not None and len(p.boxes):
        people, kept = instances.split_by_boxes(foreground, p.boxes[:, :4])
        if len(kept):
            p.people, p.boxes = people, kept
            p.notes.append(f"people: {len(kept)} from the person detector {detector.repo}")
            return
        why = f"the person detector {detector.repo} found no person on the segmented foreground"
    elif p.boxes is not None:
        why = f"the person detector {detector.repo} found no person"
    else:
        why = no_detector_reason
    p.people = instances.label_people(foreground)
    p.boxes = instances.person_boxes(p.people)
    p.notes.append(f"people: connected components of the segmentation ({why}); people who touch "
                   "are one person")


def _after_segmentation(runner, p: _Photo, parts: np.ndarray, detector, no_detector_reason: str) -> None:
    h, w = p.grid.shape[:2]
    _find_people(p, parts > 0, detector, no_detector_reason)
    p.parts = np.where(p.people > 0, parts, 0).astype(np.uint8)
    p.count = int(p.people.max(initial=0))
    p.k = intrinsics.default_intrinsics(h, w)
    p.depth = np.full((h, w), np.nan, np.float32)
    p.normal = np.full((h, w, 3), np.nan, np.float32)
    p.pointmap = p.points = None
    p.keypoints = empty_keypoints(p.count)
    p.agreement = float("nan")
    p.signs = None
    if p.count == 0:
        p.notes.append("no person found in the photo: the maps are empty")
        log.warning("%s: no person found (%dx%d photo)", runner.source, w, h)
        p.progress("done", 1.0, "no person found in the photo")
        p.result = _outputs(runner, p.grid, p.people, p.parts, p.normal, p.depth, None, p.k, p.keypoints,
                            p.agreement, p.notes)
        return
    p.fg = p.people > 0
    if "depth" in p.tasks or "normal" in p.tasks:
        _fit_masks(p)


def _fit_masks(p: _Photo) -> None:
    """The foreground and its inner part (without its border pixels: they mix person and
    background depth) for the fits, on the maps' device (1 byte a pixel): the depth and normal
    post-processing runs there (processing/dense_torch.py) and only the final maps come back.
    Only photos that run depth or normals need them."""
    import torch

    h, w = p.fg.shape
    p.fg_t = dense_torch.mask_tensor(p.fg, p.photo.device)
    inner = dense_torch.erode(p.fg_t, FIT_EROSION_PX) if min(h, w) > 4 * FIT_EROSION_PX else p.fg_t
    # decided on the device (no sync: the host goes on while queued forwards run)
    p.inner_t = torch.where(inner.sum() < intrinsics.MIN_FIT_POINTS, p.fg_t, inner)


def _after_depth(runner, p: _Photo, raw) -> None:
    if runner.metric:
        points = dense_torch.as_device_tensor(raw, p.photo.device)  # [H,W,3] camera-frame points
        fitted, rms = dense_torch.fit_intrinsics(points, p.inner_t)
        if fitted is not None:
            p.k = fitted
            log.info("%s: intrinsics from the pointmap fx=%.1f fy=%.1f cx=%.1f cy=%.1f (rms %.2f px)",
                     runner.source, p.k[0, 0], p.k[1, 1], p.k[0, 2], p.k[1, 2], rms)
        else:
            p.notes.append("intrinsics: pointmap fit failed, default field of view used")
        p.points = points
        if not p.depth_for_normals:
            p.pointmap = dense_torch.masked_to_host(points, p.fg_t)
            p.depth = np.ascontiguousarray(p.pointmap[..., 2])
    else:
        raw = raw.cpu().numpy() if hasattr(raw, "cpu") else raw  # percentiles: on the host
        depth = depth_scale.relative_depth_to_z(raw, p.people, float(p.k[1, 1]))
        p.points = intrinsics.points_from_depth(depth, p.k)
        if not p.depth_for_normals:
            p.depth = depth


def _after_normals(runner, p: _Photo, predicted: np.ndarray) -> None:
    """Normals into the canonical frame: the family's fixed axis convention (runner.normal_signs,
    evidence in processing/normals.py), checked per photo against the depth-derived normals (an
    axis flips only when the geometry clearly says so). Without depth they are NOT calibrated and
    the notes say so."""
    convention = np.asarray(runner.normal_signs, np.float32)
    signs = convention
    why = "no depth model to check them against"
    predicted = dense_torch.as_device_tensor(predicted, p.photo.device)  # [H,W,3]
    if p.points is not None:
        reference = dense_torch.normals_from_points(dense_torch.as_device_tensor(p.points, predicted.device),
                                                    p.inner_t)
        cal = dense_torch.calibrate_normal_signs(predicted * _on(convention, predicted), reference, p.inner_t)
        del reference
        log.info("%s: %s", runner.source, cal.describe())
        p.notes.append(cal.describe())
        if cal.pixels >= normals.MIN_CALIBRATION_PIXELS:
            signs, p.agreement, why = convention * np.asarray(cal.signs, np.float32), cal.agreement_deg, None
        else:
            why = f"the depth gave {cal.pixels} comparable pixels"
    if why:
        p.notes.append(f"normals NOT calibrated ({why}): the model's axes taken with the fixed "
                       f"convention {normals.describe_signs(convention)}")
    p.signs = tuple(float(v) for v in signs)
    p.normal = dense_torch.masked_to_host(predicted * _on(signs, predicted), p.fg_t)


def _on(values, like):
    import torch

    return torch.as_tensor(np.asarray(values, np.float32), device=like.device)


def _source(name: str, agreement: float, signs) -> str:
    """``source`` carries the normal self-check too: the v2 outputs are fixed to the contract's."""
    if not np.isfinite(agreement):
        return name
    flipped = "".join(a for a, s in zip("xyz", signs or (1, 1, 1)) if s < 0) or "none"
    return f"{name}; normal self-check {agreement:.1f} deg, flipped axes {flipped}"


def _outputs(runner, grid, people, parts, normal, depth, pointmap, k, keypoints, agreement, notes,
             signs=None) -> dict:
    out = {  # the arrays are this photo's own: no copies when they already have the right type
        "image": grid,
        "mask": people.astype(np.uint8, copy=False),
        "parts": parts.astype(np.uint8, copy=False),
        "part_names": np.asarray(runner.part_names, dtype=object),
        "normal": normal.astype(np.float32, copy=False),
        "depth": depth.astype(np.float32, copy=False),
        "metric": np.asarray([bool(runner.metric)]),
        "intrinsics": np.asarray(k, np.float32),
        "keypoints": keypoints.astype(np.float32, copy=False),
        "source": np.asarray([_source(runner.source, agreement, signs)], dtype=object),
        # Optional diagnostics (base.OPTIONAL_OUTPUTS); clients keep them in Maps.extras.
        "normal_agreement_deg": np.asarray([agreement], np.float32),
        "notes": np.asarray(["; ".join(notes)], dtype=object),
    }
    if pointmap is not None:
        out["pointmap"] = pointmap.astype(np.float32, copy=False)
    return out

