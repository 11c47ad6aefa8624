# SPDX-License-Identifier: GPL-3.0-or-later
"""numpy arrays -> Blender images, packed into the .blend (no side files to lose)."""

from __future__ import annotations

import struct
import zlib

import bpy
import numpy as np

PNG_LEVEL = 1  # zlib level: Blender's own PNG packing takes ~4x longer for little gain


def image_from_array(
    name: str, pixels: np.ndarray, *, non_color: bool = False, float_buffer: bool = False
) -> bpy.types.Image:
    """A packed image from ``pixels`` [H,W,3|4], uint8 (0-255) or float (0-1), row 0 at the top.

    8-bit images (the default, also for float input such as normal textures: 1/255 steps are
    < 0.5°) are encoded to PNG here with a fast zlib level and packed as that file: the .blend
    stays self-contained and exporters (glTF, FBX) find real image data. ``float_buffer`` keeps
    full precision instead (packed as OpenEXR by Blender). ``non_color`` marks data textures
    (normal maps) so no colour transform touches them.
    """
    arr = np.asarray(pixels)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4):
        raise ValueError(f"image {name!r} must be [H,W,3] or [H,W,4], got {arr.shape}")
    h, w = arr.shape[:2]
    alpha = arr.shape[2] == 4
    image = bpy.data.images.new(name, w, h, alpha=alpha, float_buffer=float_buffer)
    if not float_buffer:
        if arr.dtype != np.uint8:
            arr = np.rint(np.clip(np.nan_to_num(arr, nan=0.5), 0.0, 1.0) * 255.0).astype(np.uint8)
        data = encode_png(arr)
        image.pack(data=data, data_len=len(data))
        image.source = "FILE"
    else:
        rgba = np.ones((h, w, 4), np.float32)
        scale = 1.0 / 255.0 if arr.dtype == np.uint8 else 1.0
        rgba[..., : arr.shape[2]] = arr * np.float32(scale)
        np.nan_to_num(rgba, copy=False, nan=0.5)
        image.pixels.foreach_set(np.ascontiguousarray(rgba[::-1]).ravel())  # Blender rows run bottom-up
        image.update()
        image.pack()
    if non_color:
        image.colorspace_settings.name = "Non-Color"
    return image


def encode_png(pixels: np.ndarray, level: int = PNG_LEVEL) -> bytes:
    """PNG file bytes of uint8 [H,W,3|4] pixels (row 0 at the top), no filtering."""
    h, w, c = pixels.shape
    raw = np.zeros((h, w * c + 1), np.uint8)  # each row starts with filter type 0
    raw[:, 1:] = pixels.reshape(h, w * c)

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    header = struct.pack(">IIBBBBB", w, h, 8, 6 if c == 4 else 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(raw.tobytes(), level))
            + chunk(b"IEND", b""))


def read_photo(path) -> np.ndarray:
    """uint8 [H,W,3] RGB of an image file, decoded by Blender (no image library needed)."""
    image = bpy.data.images.load(str(path), check_existing=False)
    try:
        w, h = image.size
        if w == 0 or h == 0:
            raise ValueError(f"{path} could not be decoded as an image")
        px = np.empty(w * h * image.channels, np.float32)
        image.pixels.foreach_get(px)
        rgb = px.reshape(h, w, image.channels)[::-1, :, :3]
        if image.channels < 3:
            rgb = np.repeat(px.reshape(h, w, image.channels)[::-1, :, :1], 3, axis=2)
        return np.clip(np.rint(rgb * 255.0), 0, 255).astype(np.uint8)
    finally:
        bpy.data.images.remove(image)  # our own temporary data-block
