# SPDX-License-Identifier: GPL-3.0-or-later
"""numpy arrays -> Blender images, packed into the .blend (no side files to lose)."""

from __future__ import annotations

import bpy
import numpy as np


def image_from_array(
    name: str, pixels: np.ndarray, *, non_color: bool = False, float_buffer: bool = False
) -> bpy.types.Image:
    """A packed image from ``pixels`` [H,W,3|4], uint8 (0-255) or float (0-1), row 0 at the top.

    Blender stores rows bottom-up as float RGBA; one ``foreach_set`` writes them all.
    ``non_color`` marks data textures (normal maps) so no colour transform touches them.
    """
    arr = np.asarray(pixels)
    if arr.ndim != 3 or arr.shape[2] not in (3, 4):
        raise ValueError(f"image {name!r} must be [H,W,3] or [H,W,4], got {arr.shape}")
    h, w = arr.shape[:2]
    rgba = np.ones((h, w, 4), np.float32)
    scale = 1.0 / 255.0 if arr.dtype == np.uint8 else 1.0
    rgba[..., : arr.shape[2]] = arr * np.float32(scale)
    np.nan_to_num(rgba, copy=False, nan=0.5)
    image = bpy.data.images.new(name, w, h, alpha=arr.shape[2] == 4, float_buffer=float_buffer)
    if non_color:
        image.colorspace_settings.name = "Non-Color"
    image.pixels.foreach_set(np.ascontiguousarray(rgba[::-1]).ravel())
    image.update()
    # Packing turns the generated buffer into an embedded PNG/EXR, so the .blend is self-contained
    # and exporters (glTF, FBX) find real image data.
    image.pack()
    return image


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
