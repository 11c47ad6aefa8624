# SPDX-License-Identifier: GPL-3.0-or-later
"""The stdlib PNG writer (checked by decoding with Pillow) and the maps previews."""

import io

import numpy as np
import pytest

from sapiens_blender.core.maps import previews
from sapiens_blender.core.maps.canonical import Maps
from sapiens_blender.core.maps.png import encode_png, write_png

Image = pytest.importorskip("PIL.Image")


@pytest.mark.parametrize("shape, mode", [((7, 5), "L"), ((7, 5, 2), "LA"), ((7, 5, 3), "RGB"), ((7, 5, 4), "RGBA")])
def test_png_round_trip(shape, mode):
    pixels = np.random.default_rng(0).integers(0, 256, shape, dtype=np.uint8)
    img = Image.open(io.BytesIO(encode_png(pixels)))
    assert img.mode == mode and img.size == (5, 7)
    assert np.array_equal(np.asarray(img), pixels)


def test_png_rejects_bad_pixels(tmp_path):
    with pytest.raises(ValueError, match="uint8"):
        encode_png(np.zeros((4, 4, 3), np.float32))
    with pytest.raises(ValueError, match="shape"):
        encode_png(np.zeros((4, 4, 5), np.uint8))
    path = write_png(tmp_path / "a" / "x.png", np.zeros((2, 3, 3), np.uint8))
    assert path.is_file() and not list(path.parent.glob(".*tmp"))


def sample_maps():
    h, w = 40, 30
    mask = np.zeros((h, w), np.uint8)
    mask[5:35, 8:22] = 1
    normal = np.full((h, w, 3), np.nan, np.float32)
    normal[mask > 0] = (0, 0, -1)
    depth = np.where(mask > 0, np.linspace(2, 3, h)[:, None], np.nan).astype(np.float32)
    kp = np.zeros((1, 308, 3), np.float32)
    kp[0, 5] = (10.5, 10.5, 0.9)  # left shoulder
    kp[0, 7] = (10.5, 25.5, 0.9)  # left elbow
    kp[0, 9] = (20.5, 30.5, 0.1)  # left hip, below the threshold
    return Maps(image=np.full((h, w, 3), 100, np.uint8), mask=mask, parts=mask * 3,
                part_names=tuple(f"c{i}" for i in range(29)), normal=normal, depth=depth,
                intrinsics=np.eye(3, dtype=np.float32) * 30, keypoints=kp).validate()


def test_previews():
    maps = sample_maps()
    shots = previews.all_previews(maps)
    assert all(img.shape == (40, 30, 3) and img.dtype == np.uint8 for img in shots.values())
    assert tuple(shots["normal"][20, 15]) == (127, 127, 0) and tuple(shots["normal"][0, 0]) == (0, 0, 0)
    depth = shots["depth"]
    assert depth[6, 15].sum() > depth[33, 15].sum() > 0  # near is brighter
    skeleton = shots["keypoints"]
    assert not np.array_equal(skeleton[18, 10], maps.image[18, 10])  # on the shoulder-elbow link
    assert np.array_equal(skeleton[30, 25], maps.image[30, 25])  # the weak hip draws nothing
    assert len(previews.SKELETON) == 65
