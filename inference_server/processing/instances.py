# SPDX-License-Identifier: GPL-3.0-or-later
"""People from a foreground mask: instance ids from detector boxes or connected components.

Sapiens segmentation is semantic (all people share labels). With a person detector, its boxes
split the foreground (``split_by_boxes``): people who touch or overlap stay apart. Without one,
instances are the foreground's connected components (``label_people``); a person broken into
pieces (an arm behind a pole) would become several, so small pieces go to the nearest large one.
"""

from __future__ import annotations

import numpy as np

MAX_PEOPLE = 255  # mask is uint8
# A component counts as a person when it holds at least this fraction of the largest one...
MIN_FRACTION_OF_LARGEST = 0.05
# ...and at least this fraction of the image (filters speckle in empty photos).
MIN_FRACTION_OF_IMAGE = 0.0005
# A detector box must be at least this much foreground to become a person (people fill 30-60 %).
MIN_BOX_FILL = 0.05


def label_people(foreground: np.ndarray) -> np.ndarray:
    """uint8 instance map [H,W]: 0 background, 1..P people, person 1 the largest."""
    from scipy import ndimage

    fg = np.asarray(foreground, bool)
    out = np.zeros(fg.shape, np.uint8)
    rows, cols = np.flatnonzero(fg.any(1)), np.flatnonzero(fg.any(0))
    if not len(rows):
        return out
    # Components lie inside the foreground's bounding box: label only that (the same labels; a
    # person fills a fraction of the photo). One component (the usual case) needs no area count
    # and no look-up table.
    box = (slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1))
    labels = np.zeros(fg.shape, np.int32)
    labels[box], count = ndimage.label(fg[box], structure=np.ones((3, 3), bool))
    if count == 1:
        if fg.sum() >= MIN_FRACTION_OF_IMAGE * fg.size:
            out[box] = fg[box]
        return out
    areas = np.bincount(labels[box].ravel(), minlength=count + 1)[1:]
    order = np.argsort(-areas, kind="stable")
    largest = areas[order[0]]
    keep = [
        i for i in order
        if areas[i] >= MIN_FRACTION_OF_LARGEST * largest and areas[i] >= MIN_FRACTION_OF_IMAGE * fg.size
    ][:MAX_PEOPLE]
    if not keep:
        return out
    lut = np.zeros(count + 1, np.uint8)
    for new_id, comp in enumerate(keep, start=1):
        lut[comp + 1] = new_id
    people = lut[labels]
    small = fg & (people == 0)
    if small.any():
        # Nearest person pixel for every pixel; only the small pieces take its id.
        _, (iy, ix) = ndimage.distance_transform_edt(people == 0, return_indices=True)
        people[small] = people[iy[small], ix[small]]
    return people


def person_boxes(people: np.ndarray) -> np.ndarray:
    """Inclusive pixel-index boxes [P,4] (x0, y0, x1, y1) of ids 1..P (rows of absent ids are 0)."""
    from scipy import ndimage

    count = int(people.max(initial=0))
    boxes = np.zeros((count, 4), np.float64)
    for i, sl in enumerate(ndimage.find_objects(people, max_label=count)):
        if sl is None:
            continue
        ys, xs = sl
        boxes[i] = (xs.start, ys.start, xs.stop - 1, ys.stop - 1)
    return boxes


def split_by_boxes(foreground: np.ndarray, boxes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """People from a foreground and detector boxes: (uint8 instance map [H,W], the boxes kept [P,4]).

    A foreground pixel inside one box is that box's person; inside several, the person whose box
    centre is nearest relative to the box size (the overlap of two people goes to the one it is
    more central to); outside every box, the nearest assigned pixel's person. Boxes that hold
    almost no foreground (a detection the segmentation does not support) are dropped; person 1 is
    the largest. Empty result when no box holds foreground."""
    from scipy import ndimage

    fg = np.asarray(foreground, bool)
    h, w = fg.shape
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)[:MAX_PEOPLE]
    people = np.zeros((h, w), np.uint8)
    if not fg.any() or not len(boxes):
        return people, boxes[:0]
    ys, xs = np.nonzero(fg)
    x0, y0, x1, y1 = (boxes[:, i, None] for i in range(4))
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    half_w, half_h = np.maximum((x1 - x0 + 1) / 2, 0.5), np.maximum((y1 - y0 + 1) / 2, 0.5)
    # Chebyshev distance to each box centre in units of its half size: <= 1 inside the box
    reach = np.maximum(np.abs(xs[None] - cx) / half_w, np.abs(ys[None] - cy) / half_h)  # [B, N]
    inside = reach <= 1.0
    owner = np.where(inside.any(0), np.argmin(np.where(inside, reach, np.inf), 0), -1)
    areas = np.bincount(owner[owner >= 0], minlength=len(boxes))
    box_areas = (x1 - x0 + 1)[:, 0] * (y1 - y0 + 1)[:, 0]
    keep = [b for b in np.argsort(-areas, kind="stable")
            if areas[b] >= max(MIN_FRACTION_OF_IMAGE * fg.size, MIN_BOX_FILL * box_areas[b])]
    if not keep:
        return people, boxes[:0]
    lut = np.zeros(len(boxes) + 1, np.uint8)
    for new_id, b in enumerate(keep, start=1):
        lut[b + 1] = new_id
    people[ys, xs] = lut[owner + 1]
    rest = fg & (people == 0)
    if rest.any():
        _, (iy, ix) = ndimage.distance_transform_edt(people == 0, return_indices=True)
        people[rest] = people[iy[rest], ix[rest]]
    return people, boxes[keep]
