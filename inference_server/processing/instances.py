# SPDX-License-Identifier: GPL-3.0-or-later
"""People from a foreground mask: instance ids by connected components, and their boxes.

Sapiens segmentation is semantic (all people share labels), so instances come from the
foreground's connected components. A person broken into pieces (an arm behind a pole) would become
several components: small pieces are given to the nearest large one instead of becoming "people".
"""

from __future__ import annotations

import numpy as np

MAX_PEOPLE = 255  # mask is uint8
# A component counts as a person when it holds at least this fraction of the largest one...
MIN_FRACTION_OF_LARGEST = 0.05
# ...and at least this fraction of the image (filters speckle in empty photos).
MIN_FRACTION_OF_IMAGE = 0.0005


def label_people(foreground: np.ndarray) -> np.ndarray:
    """uint8 instance map [H,W]: 0 background, 1..P people, person 1 the largest."""
    from scipy import ndimage

    fg = np.asarray(foreground, bool)
    out = np.zeros(fg.shape, np.uint8)
    if not fg.any():
        return out
    labels, count = ndimage.label(fg, structure=np.ones((3, 3), bool))
    areas = np.bincount(labels.ravel(), minlength=count + 1)[1:]
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
