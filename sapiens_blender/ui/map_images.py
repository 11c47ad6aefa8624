# SPDX-License-Identifier: GPL-3.0-or-later
"""The analysis shown as Blender images: body parts in colour, normals, depth (packed)."""

from __future__ import annotations

import bpy
import numpy as np

from ..blender.images import image_from_array
from ..blender.materials import part_color
from ..core.maps.canonical import Maps

PARTS, NORMALS, DEPTH = "Sapiens Parts", "Sapiens Normals", "Sapiens Depth"


def parts_rgb(maps: Maps) -> np.ndarray:
    count = max(len(maps.part_names), 1)
    palette = np.array([part_color(i, count)[:3] for i in range(max(count, int(maps.parts.max()) + 1))],
                       np.float32)
    palette[0] = 0.0  # background stays black
    return palette[maps.parts]


def normals_rgb(maps: Maps) -> np.ndarray:
    # Camera frame is x right, y down, z forward; show the usual normal-map colours
    # (x right, y up, towards the viewer) so a surface facing the camera is light blue.
    n = maps.normal * np.array([1.0, -1.0, -1.0], np.float32)
    rgb = np.nan_to_num(n * 0.5 + 0.5, nan=0.0)
    return np.clip(rgb, 0.0, 1.0).astype(np.float32)


def depth_rgb(maps: Maps) -> np.ndarray:
    depth = maps.depth
    valid = np.isfinite(depth)
    out = np.zeros(depth.shape, np.float32)
    if valid.any():
        near, far = float(depth[valid].min()), float(depth[valid].max())
        out[valid] = 1.0 - (depth[valid] - near) / max(far - near, 1e-6) * 0.8  # near = bright
    return np.repeat(out[..., None], 3, axis=2)


def update_map_images(scene, maps: Maps) -> None:
    """Replace the scene's map images with ones made from `maps`."""
    props = scene.sapiens
    for attr, name, pixels, non_color in (
        ("parts_image", PARTS, parts_rgb(maps), False),
        ("normal_image", NORMALS, normals_rgb(maps), True),
        ("depth_image", DEPTH, depth_rgb(maps), True),
    ):
        old = getattr(props, attr)
        if old is not None and old.users <= 1:
            bpy.data.images.remove(old)
        setattr(props, attr, image_from_array(name, pixels, non_color=non_color))
