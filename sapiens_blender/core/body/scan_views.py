# SPDX-License-Identifier: GPL-3.0-or-later
"""Which views of a scan to use (numpy only): frames that add nothing are skipped, and said why.

- **half out of frame**: the person's mask runs along the image border over more than
  ``BORDER_SHARE`` of its outline, or fewer than ``MIN_INSIDE`` of the 17 body keypoints fall
  inside the image (seen or not: a profile hides half of them, yet shows the whole person);
- **blurred**: the person's image detail (mean absolute Laplacian inside the mask) is under
  ``BLUR_SHARE`` of the sharpest view's;
- **repeated**: the person's mask overlaps the last kept view's by ``REPEAT_IOU`` or more and
  their keypoints moved less than ``REPEAT_PX`` (a turn-around clip lingers at its ends);
- then ``max_views`` of what is left, evenly spaced.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ..errors import SapiensError
from ..maps.canonical import Maps

BORDER_SHARE = 0.15
MIN_INSIDE = 13  # of the 17 COCO body keypoints (the first 17 Goliath points), inside the image
BLUR_SHARE = 0.35
REPEAT_IOU = 0.985
REPEAT_PX = 1.0
MIN_VIEWS = 2


class ScanError(SapiensError, ValueError):
    """The views cannot make a scan (the message says why)."""


@dataclass
class Selection:
    kept: list  # indices into the views given
    skipped: dict = field(default_factory=dict)  # index -> reason

    def lines(self, names=None) -> list[str]:
        name = (lambda i: names[i]) if names else (lambda i: f"view {i + 1}")
        return [f"skipped {name(i)}: {why}" for i, why in sorted(self.skipped.items())]


def person_of(maps: Maps) -> int:
    """The scanned person's mask id in a view: the one with the most pixels."""
    ids, counts = np.unique(np.asarray(maps.mask)[np.asarray(maps.mask) > 0], return_counts=True)
    if not len(ids):
        raise ScanError("a view shows no person")
    return int(ids[np.argmax(counts)])


def _border_share(mine: np.ndarray) -> float:
    """Of the mask's outline pixels, the share on the image's border."""
    padded = np.pad(mine, 1, constant_values=False)
    inner = mine & padded[:-2, 1:-1] & padded[2:, 1:-1] & padded[1:-1, :-2] & padded[1:-1, 2:]
    outline = mine & ~inner
    border = np.zeros_like(mine)
    border[[0, -1], :] = True
    border[:, [0, -1]] = True
    return float((outline & border).sum() / max(outline.sum(), 1))


def _detail(maps: Maps, mine: np.ndarray) -> float:
    g = np.asarray(maps.image, np.float32).mean(axis=2)
    lap = np.abs(4 * g[1:-1, 1:-1] - g[:-2, 1:-1] - g[2:, 1:-1] - g[1:-1, :-2] - g[1:-1, 2:])
    m = mine[1:-1, 1:-1]
    # away from the outline: the person against the background is not detail
    m = m & np.roll(m, 2, 0) & np.roll(m, -2, 0) & np.roll(m, 2, 1) & np.roll(m, -2, 1)
    return float(lap[m].mean()) if m.any() else 0.0


def select_views(views: list, max_views: int | None = None) -> Selection:
    """The views worth fitting (``views``: Maps), in their order."""
    kept, skipped = [], {}
    details, last = {}, None
    for i, maps in enumerate(views):
        try:
            pid = person_of(maps)
        except ScanError as exc:
            skipped[i] = str(exc)
            continue
        mine = np.asarray(maps.mask) == pid
        kp = np.asarray(maps.keypoints)[pid - 1] if pid - 1 < len(maps.keypoints) else np.zeros((308, 3))
        h, w = mine.shape
        xy = kp[:17, :2]
        inside = int(((kp[:17, 2] > 0) & (xy[:, 0] >= 0) & (xy[:, 0] < w) & (xy[:, 1] >= 0) & (xy[:, 1] < h)).sum())
        if _border_share(mine) > BORDER_SHARE or inside < MIN_INSIDE:
            skipped[i] = f"the person is half out of frame ({inside} of 17 body keypoints in the image)"
            continue
        if last is not None and mine.shape == last[0].shape:
            iou = (mine & last[0]).sum() / max((mine | last[0]).sum(), 1)
            moved = np.nanmedian(np.linalg.norm(kp[:17, :2] - last[1][:17, :2], axis=1))
            if iou >= REPEAT_IOU and moved < REPEAT_PX:
                skipped[i] = f"repeats the view before it (silhouette overlap {iou:.3f})"
                continue
        details[i] = _detail(maps, mine)
        kept.append(i)
        last = (mine, kp)
    if details:
        sharpest = max(details.values())
        for i in list(kept):
            if sharpest > 0 and details[i] < BLUR_SHARE * sharpest:
                kept.remove(i)
                skipped[i] = f"blurred ({100 * details[i] / sharpest:.0f} % of the sharpest view's detail)"
    if max_views and len(kept) > max_views:
        pick = np.unique(np.round(np.linspace(0, len(kept) - 1, max_views)).astype(int))
        for j, i in enumerate(list(kept)):
            if j not in pick:
                skipped[i] = f"beyond --max-views {max_views}"
        kept = [kept[j] for j in pick]
    if len(kept) < MIN_VIEWS:
        why = "; ".join(f"view {i + 1}: {r}" for i, r in sorted(skipped.items())[:4])
        raise ScanError(f"a scan needs at least {MIN_VIEWS} usable views, {len(kept)} of {len(views)} are"
                        + (f" ({why})" if why else ""))
    return Selection(kept, skipped)


def scan_frames(inputs, maps_dir, stride: int) -> tuple[list, list]:
    """The scan's frames (core.motion.sources.Frame) and their names, before analysis."""
    from ..motion.sources import Frame, FrameRange, open_source

    inputs = [Path(p) for p in ([inputs] if isinstance(inputs, (str, os.PathLike)) else inputs)]
    if stride < 1:
        raise ScanError(f"stride must be 1 or more, got {stride}")
    if maps_dir is not None:
        if inputs:
            raise ScanError("give either INPUT... or --maps-dir, not both")
        frames = list(open_source(maps_dir, FrameRange(stride=stride), maps=True))
    elif len(inputs) == 1:
        frames = list(open_source(inputs[0], FrameRange(stride=stride)))
    elif len(inputs) >= 2:
        missing = [str(p) for p in inputs if not p.is_file()]
        if missing:
            raise ScanError(f"no such photo: {missing[0]}")
        frames = [Frame(i, p.name, data=p.read_bytes()) for i, p in enumerate(inputs) if i % stride == 0]
    else:
        raise ScanError("a scan needs a clip, two or more photos, or --maps-dir")
    if len(frames) < 2:
        raise ScanError(f"a scan needs at least 2 views, the input gives {len(frames)}")
    return frames, [f.name for f in frames]
