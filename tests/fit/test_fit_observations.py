# SPDX-License-Identifier: GPL-3.0-or-later
"""What the fit reads off the maps: the pixels the body must cover."""

import numpy as np
from scipy import ndimage

from inference_server.fit.observations import _cover_pixels


def test_cover_pixels_are_mostly_on_the_outline_and_inside_the_person():
    mine = np.zeros((200, 120), bool)
    mine[20:190, 40:80] = True  # a tall figure
    mine[60:70, 10:110] = True  # with its arms out
    rr, cc = _cover_pixels(mine, 300)
    assert 250 <= len(rr) <= 300 and mine[rr, cc].all()
    outline = mine & ~ndimage.binary_erosion(mine)
    on = outline[rr, cc]
    assert 0.6 <= on.mean() <= 0.75  # two thirds measure the extent; the rest the inside
    # The extremes are among them: the top of the head, the soles, the finger tips.
    assert rr.min() == 20 and rr.max() == 189 and cc.min() == 10 and cc.max() == 109
    # Deterministic, and a small person gives what it has.
    assert np.array_equal(_cover_pixels(mine, 300)[0], rr)
    tiny = np.zeros((10, 10), bool)
    tiny[4:6, 4:6] = True
    assert len(_cover_pixels(tiny, 300)[0]) == 4
