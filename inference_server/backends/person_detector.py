# SPDX-License-Identifier: GPL-3.0-or-later
"""Person boxes for the Sapiens path: a transformers object detector, as the official top-down
pipeline runs a detector before pose.

Default: ``PekingU/rtdetr_r18vd`` (RT-DETR ResNet-18, COCO, Apache-2.0; files ``config.json``,
``model.safetensors``, ``preprocessor_config.json``; class ``RTDetrForObjectDetection``), fetched
like the Sapiens weights (weights.py: local folder, hub cache, offline, tokens, clear errors).
Any repo whose ``config.json`` names a transformers ``*ForObjectDetection`` class, has a "person"
label and a fixed height x width input in its preprocessor config works (RT-DETR v1/v2, D-FINE). Its boxes split the segmentation
foreground into people (processing/instances.py) and are the pose crops' boxes; without a
detector the people are the foreground's connected components, and the maps' notes say which.

Preprocessing follows the repo's ``preprocessor_config.json`` (RT-DETR: plain resize to 640x640,
pixels / 255, no mean/std); post-processing as transformers' ``post_process_object_detection``
(sigmoid scores for focal-loss detectors, softmax without the no-object class otherwise), person
class only, then a light NMS because overlapping people are exactly what this is for.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from . import devices, weights
from ..dataplane.base import BackendError, CancelToken, ProgressFn, no_progress

log = logging.getLogger(__name__)

SCORE_THRESHOLD = 0.5
NMS_IOU = 0.7  # duplicates of one person overlap more than two people side by side do
DEFAULT_INPUT_HW = (640, 640)


@dataclass
class PersonDetector:
    """A loaded detector; ``detect_batch`` gives person boxes per photo on its maps grid."""

    repo: str
    model: object
    input_hw: tuple[int, int]
    rescale: float
    mean: tuple | None
    std: tuple | None
    person_id: int
    sigmoid: bool
    device: str
    threshold: float = SCORE_THRESHOLD

    def detect_batch(self, photos: list, hws: list) -> list[np.ndarray]:
        """Boxes [P,5] (x0, y0, x1, y1 inclusive pixel-index extents on the maps grid, score) per
        photo tensor [1,3,h,w] 0-255, best first."""
        import torch
        import torch.nn.functional as F

        x = torch.cat([F.interpolate(p.float(), size=self.input_hw, mode="bilinear", align_corners=False)
                       for p in photos]).to(self.device) * self.rescale
        if self.mean is not None:
            mean = torch.as_tensor(self.mean, device=x.device).view(1, 3, 1, 1)
            std = torch.as_tensor(self.std, device=x.device).view(1, 3, 1, 1)
            x = (x - mean) / std
        with torch.inference_mode():
            out = self.model(pixel_values=x)
        return [decode_person_boxes(out.logits[i].float().cpu().numpy(), out.pred_boxes[i].float().cpu().numpy(),
                                    hw, self.person_id, self.sigmoid, self.threshold)
                for i, hw in enumerate(hws)]


def decode_person_boxes(logits: np.ndarray, boxes_cxcywh: np.ndarray, hw, person_id: int,
                        sigmoid: bool, threshold: float = SCORE_THRESHOLD) -> np.ndarray:
    """One photo's detections -> person boxes [P,5] on an ``hw`` grid (see detect_batch)."""
    logits = np.asarray(logits, np.float64)
    if sigmoid:
        scores = 1.0 / (1.0 + np.exp(-logits[:, person_id]))
    else:  # softmax over the classes and the trailing no-object class
        e = np.exp(logits - logits.max(-1, keepdims=True))
        probs = e / e.sum(-1, keepdims=True)
        # a query counts as a person only where "person" is its best real class
        best = probs[:, :-1].argmax(-1)
        scores = np.where(best == person_id, probs[:, person_id], 0.0)
    h, w = hw
    cx, cy, bw, bh = np.asarray(boxes_cxcywh, np.float64).T
    # relative centre/size -> continuous pixel edges -> inclusive pixel-index extents
    x0, x1 = (cx - bw / 2) * w, (cx + bw / 2) * w - 1.0
    y0, y1 = (cy - bh / 2) * h, (cy + bh / 2) * h - 1.0
    boxes = np.stack([np.clip(x0, 0, w - 1), np.clip(y0, 0, h - 1), np.clip(x1, 0, w - 1),
                      np.clip(y1, 0, h - 1), scores], -1)
    keep = (scores >= threshold) & (boxes[:, 2] > boxes[:, 0]) & (boxes[:, 3] > boxes[:, 1])
    boxes = boxes[keep]
    return _nms(boxes[np.argsort(-boxes[:, 4], kind="stable")], NMS_IOU)


def _nms(boxes: np.ndarray, iou: float) -> np.ndarray:
    kept: list[np.ndarray] = []
    for box in boxes:
        if all(_iou(box, k) < iou for k in kept):
            kept.append(box)
    return np.asarray(kept, np.float64).reshape(-1, 5)


def _iou(a, b) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]) + 1)
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]) + 1)
    inter = ix * iy
    area = lambda r: (r[2] - r[0] + 1) * (r[3] - r[1] + 1)  # noqa: E731
    return inter / max(area(a) + area(b) - inter, 1e-9)


def load_detector(repo: str, placement: devices.Placement, weights_dir: Path | None = None,
                  progress: ProgressFn = no_progress, cancel: CancelToken | None = None) -> PersonDetector:
    """Fetch and build ``repo``'s detector; BackendError (clear message) when that cannot be done."""
    import transformers

    folder = weights.fetch_transformers_repo(repo, progress, cancel, weights_dir)
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise weights.corrupt_weights_error(folder / "config.json", exc) from exc
    arch = (config.get("architectures") or [""])[0]
    cls = getattr(transformers, arch, None) if arch.endswith("ForObjectDetection") else None
    if cls is None:
        raise BackendError(f"{repo} is not a transformers object detector (config.json architectures: "
                           f"{arch or 'none'}); set SAPIENS_DETECTOR to one, or to 'none'", status=400)
    labels = {int(k): str(v).lower() for k, v in (config.get("id2label") or {}).items()}
    person = [k for k, v in labels.items() if v == "person"]
    if not person:
        raise BackendError(f"{repo} has no 'person' class in its labels; set SAPIENS_DETECTOR to a "
                           "detector trained on people (e.g. a COCO one) or to 'none'", status=400)
    try:
        model = cls.from_pretrained(str(folder)).eval()
    except Exception as exc:
        raise weights.corrupt_weights_error(folder, exc) from exc
    model = model.to(placement.device)  # small: fp32 everywhere (boxes need no terracing either)
    hw, rescale, mean, std = _preprocessing(folder)
    sigmoid = bool(getattr(model.config, "use_focal_loss", False)) or model.config.model_type.startswith(
        ("rt_detr", "d_fine", "deformable_detr"))
    log.info("person detector %s (%s) on %s", repo, arch, placement.device)
    return PersonDetector(repo, model, hw, rescale, mean, std, person[0], sigmoid, placement.device)


def _preprocessing(folder: Path):
    """(input hw, rescale factor, mean or None, std or None) from preprocessor_config.json."""
    try:
        pre = json.loads((folder / "preprocessor_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        pre = {}
    size = pre.get("size") or {}
    hw = (int(size.get("height", DEFAULT_INPUT_HW[0])), int(size.get("width", DEFAULT_INPUT_HW[1])))
    rescale = float(pre.get("rescale_factor", 1 / 255)) if pre.get("do_rescale", True) else 1.0
    if pre.get("do_normalize", False):
        return hw, rescale, tuple(pre.get("image_mean")), tuple(pre.get("image_std"))
    return hw, rescale, None, None
