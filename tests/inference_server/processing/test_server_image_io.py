# SPDX-License-Identifier: GPL-3.0-or-later
"""processing/image_io.py: every Pillow mode becomes RGB uint8, EXIF orientation, bombs, resizing."""

from __future__ import annotations


import numpy as np
import pytest
from PIL import Image
from server_harness import png_bytes

from inference_server.processing.image_io import (
    ImageError,
    check_pixels_array,
    decode_image,
    fit_max_side,
)


def encoded(img: Image.Image, fmt: str = "PNG", **kw) -> bytes:
    return png_bytes(img, format=fmt, **kw)


def test_rgb_png_and_jpeg():
    rgb = np.random.default_rng(0).integers(0, 256, (20, 30, 3), dtype=np.uint8)
    assert np.array_equal(decode_image(encoded(Image.fromarray(rgb))), rgb)
    jpeg = decode_image(encoded(Image.fromarray(rgb), "JPEG", quality=95))
    assert jpeg.shape == (20, 30, 3) and jpeg.dtype == np.uint8


@pytest.mark.parametrize("mode", ["L", "LA", "P", "RGBA", "CMYK", "I;16", "I", "F", "1"])
def test_every_mode_becomes_rgb8(mode):
    img = Image.new("RGB", (12, 8), (200, 100, 50)).convert(mode)
    fmt = "TIFF" if mode in ("I", "F", "CMYK") else "PNG"
    out = decode_image(encoded(img, fmt))
    assert out.shape == (8, 12, 3) and out.dtype == np.uint8 and out.flags.c_contiguous


def test_sixteen_bit_grey_is_rescaled_not_clipped():
    grey = (np.arange(12, dtype=np.uint16).reshape(3, 4) * 5000)
    out = decode_image(encoded(Image.fromarray(grey)))
    assert out[..., 0].tolist()[2][3] == round(55000 / 257)
    assert np.array_equal(out[..., 0], out[..., 2])


def test_transparency_is_composited_over_white():
    rgba = np.zeros((4, 4, 4), np.uint8)
    rgba[:2, :, :] = (255, 0, 0, 255)  # opaque red top, transparent black bottom
    out = decode_image(encoded(Image.fromarray(rgba)))
    assert out[0, 0].tolist() == [255, 0, 0] and out[3, 3].tolist() == [255, 255, 255]


def test_exif_orientation_is_applied():
    img = Image.new("RGB", (40, 20), (0, 0, 0))
    img.paste((255, 255, 255), (0, 0, 10, 20))  # white left strip
    exif = Image.Exif()
    exif[0x0112] = 6  # rotate 90 degrees clockwise to display
    out = decode_image(encoded(img, "JPEG", exif=exif.tobytes(), quality=95))
    assert out.shape == (40, 20, 3)  # portrait now
    assert out[:10, :, 0].mean() > 200 and out[-10:, :, 0].mean() < 50  # strip moved to the top


def test_bombs_empty_and_garbage():
    with pytest.raises(ImageError) as bomb:
        decode_image(encoded(Image.new("1", (9000, 9000))), max_pixels=8192 * 8192)
    assert bomb.value.status == 413
    with pytest.raises(ImageError, match="empty"):
        decode_image(b"")
    with pytest.raises(ImageError, match="not an image"):
        decode_image(b"\x89PNX" * 10)
    truncated = encoded(Image.new("RGB", (64, 64), (1, 2, 3)), "JPEG")[:100]
    with pytest.raises(ImageError) as broken:
        decode_image(truncated)
    assert broken.value.status == 400
    with pytest.raises(ImageError, match="empty"):
        check_pixels_array(np.zeros((0, 5, 3), np.uint8))


def test_fit_max_side_shrinks_never_enlarges():
    img = np.zeros((300, 200, 3), np.uint8)
    assert fit_max_side(img, 150).shape == (150, 100, 3)
    assert fit_max_side(img, 1024) is img
    assert fit_max_side(np.zeros((1, 4000, 3), np.uint8), 100).shape == (1, 100, 3)
