# SPDX-License-Identifier: GPL-3.0-or-later
"""Decode uploaded photos safely into RGB uint8, the one input every backend receives.

The pixel count is checked from the header before any pixel is decoded, so a decompression
bomb (a tiny file claiming a huge canvas) costs nothing. EXIF orientation is applied, and every
Pillow mode (L, LA, P, RGBA, CMYK, I;16, I, F, ...) ends up as [H, W, 3] uint8.
"""

from __future__ import annotations

import io

import numpy as np

DEFAULT_MAX_PIXELS = 8192 * 8192  # 67 Mpx: any 8K photo (7680x4320 or 8192x8192) fits; 100 Mpx does not


class ImageError(ValueError):
    """The upload is not a usable photo. ``status`` is the HTTP status to answer with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def check_pixels(width: int, height: int, max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
    if width <= 0 or height <= 0:
        raise ImageError(f"the image is empty ({width}x{height} pixels)")
    if width * height > max_pixels:
        raise ImageError(
            f"the image is {width}x{height} = {width * height / 1e6:.1f} megapixels, more than "
            f"the server's limit of {max_pixels / 1e6:.1f} megapixels; shrink it first", 413)


def decode_image(data: bytes, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Encoded photo bytes -> RGB uint8 [H, W, 3] (EXIF-transposed)."""
    from PIL import Image, ImageOps, UnidentifiedImageError

    if not data:
        raise ImageError("the image is empty (0 bytes)")
    # Our own cap decides; keep Pillow's (global) bomb check from firing below it.
    if Image.MAX_IMAGE_PIXELS is not None and Image.MAX_IMAGE_PIXELS < max_pixels:
        Image.MAX_IMAGE_PIXELS = max_pixels
    try:
        img = Image.open(io.BytesIO(data))  # reads the header only
        check_pixels(img.width, img.height, max_pixels)
        img.load()
        img = ImageOps.exif_transpose(img)
    except ImageError:
        raise
    except Image.DecompressionBombError as exc:
        raise ImageError(f"the image is too large to decode safely: {exc}", 413) from None
    except UnidentifiedImageError:
        raise ImageError(
            f"the bytes are not an image Pillow can read ({len(data)} bytes, starting "
            f"{data[:8]!r})") from None
    except (OSError, ValueError, SyntaxError, EOFError) as exc:
        raise ImageError(f"the image could not be decoded: {exc}") from None
    return to_rgb8(img)


def to_rgb8(img) -> np.ndarray:
    """Any Pillow image -> RGB uint8 [H, W, 3]; alpha is composited over white."""
    from PIL import Image

    mode = img.mode
    if mode.startswith("I;16") or mode in ("I", "F"):
        # High bit depth grey: Pillow's own conversion clips to 0..255, so rescale here.
        arr = np.asarray(img)
        if arr.dtype.kind == "f":
            scale = 1.0 if float(np.nanmax(arr, initial=0.0)) <= 1.0 else 1.0 / 255.0
            grey = np.nan_to_num(arr, nan=0.0) * (255.0 * scale)
        else:
            arr = arr.astype(np.int64)
            grey = arr / 257.0 if int(arr.max(initial=0)) > 255 else arr
        grey = np.clip(np.rint(grey), 0, 255).astype(np.uint8)
        return np.ascontiguousarray(np.repeat(grey[:, :, None], 3, axis=2))
    if mode == "P":
        img = img.convert("RGBA") if "transparency" in img.info else img.convert("RGB")
        mode = img.mode
    if mode in ("RGBA", "LA", "PA", "RGBa", "La"):
        rgba = img.convert("RGBA")
        background = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        img = Image.alpha_composite(background, rgba)
    if img.mode != "RGB":
        img = img.convert("RGB")
    return np.ascontiguousarray(np.asarray(img, dtype=np.uint8))


def check_pixels_array(pixels: np.ndarray, max_pixels: int = DEFAULT_MAX_PIXELS) -> np.ndarray:
    """Validate an already decoded ``pixels`` tensor: uint8 [H, W, 3]."""
    if pixels.dtype != np.uint8 or pixels.ndim != 3 or pixels.shape[2] != 3:
        raise ImageError(
            f"pixels must be UINT8 [H, W, 3] RGB, got {pixels.dtype} {list(pixels.shape)}")
    check_pixels(int(pixels.shape[1]), int(pixels.shape[0]), max_pixels)
    return pixels


def fit_max_side(image: np.ndarray, max_side: int) -> np.ndarray:
    """Shrink an RGB uint8 image so its long side is at most ``max_side`` (never enlarges)."""
    from PIL import Image

    h, w = image.shape[:2]
    if max_side <= 0 or max(h, w) <= max_side:
        return image
    scale = max_side / max(h, w)
    size = (max(1, round(w * scale)), max(1, round(h * scale)))
    resized = Image.fromarray(np.ascontiguousarray(image)).resize(size, Image.Resampling.LANCZOS)
    return np.asarray(resized, dtype=np.uint8)
