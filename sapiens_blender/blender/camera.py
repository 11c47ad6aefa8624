# SPDX-License-Identifier: GPL-3.0-or-later
"""A Blender camera that reproduces the photo's pinhole intrinsics exactly.

The camera sits at the origin looking along +Y with +Z up (``geometry.types``), i.e. the
rotation (90°, 0, 0) of Blender's default camera (which looks down its local -Z, +Y up).

Intrinsics -> Blender, with ``sensor_fit = 'HORIZONTAL'`` (the sensor width spans the image
width whatever the aspect; the glTF exporter's yfov conversion handles this fit for both
landscape and portrait images):
- lens = fx * sensor_width / W;
- non-square pixels (fx != fy): Blender's vertical scale is fx * aspect_x / aspect_y, so the
  pixel aspect is set to fy / fx (both aspects kept >= 1 as Blender requires);
- shift_x = (W/2 - cx) / W and shift_y = (cy - H/2) * (aspect_y / aspect_x) / W (shifts are in
  units of the fitted (horizontal) sensor size; image v runs down, Blender's y up).
The scene's render resolution is set to the maps' size: without it the camera frame has a
different aspect and nothing lines up. That, and making this the scene camera, are the only
changes to existing data, and both are needed for "look through the camera" to work.
"""

from __future__ import annotations

import math

import bpy
import numpy as np

SENSOR_WIDTH_MM = 36.0


def camera_settings(intrinsics: np.ndarray, width: int, height: int) -> dict:
    """Blender camera and render values for pinhole ``intrinsics`` on a ``width`` x ``height`` grid."""
    k = np.asarray(intrinsics, np.float64)
    fx, fy, cx, cy = k[0, 0], k[1, 1], k[0, 2], k[1, 2]
    ratio = fy / fx
    aspect_x, aspect_y = (ratio, 1.0) if ratio >= 1.0 else (1.0, 1.0 / ratio)
    return {
        "lens": fx * SENSOR_WIDTH_MM / width,
        "sensor_width": SENSOR_WIDTH_MM,
        "shift_x": (width / 2.0 - cx) / width,
        "shift_y": (cy - height / 2.0) * (aspect_y / aspect_x) / width,
        "pixel_aspect_x": aspect_x,
        "pixel_aspect_y": aspect_y,
    }


def build_camera(
    intrinsics: np.ndarray,
    width: int,
    height: int,
    name: str,
    collection: bpy.types.Collection,
    *,
    background: bpy.types.Image | None = None,
    scene: bpy.types.Scene | None = None,
    make_active: bool = True,
) -> bpy.types.Object:
    scene = scene or bpy.context.scene
    values = camera_settings(intrinsics, width, height)
    cam = bpy.data.cameras.new(name)
    cam.sensor_fit = "HORIZONTAL"
    cam.sensor_width = values["sensor_width"]
    cam.lens = values["lens"]
    cam.shift_x = values["shift_x"]
    cam.shift_y = values["shift_y"]
    cam.clip_start = 0.01
    cam.clip_end = 1000.0
    # The intrinsics ride along as custom properties (exported as glTF camera "extras"), since
    # glTF cameras cannot express an off-centre principal point.
    k = np.asarray(intrinsics, np.float64)
    cam["sapiens_intrinsics"] = [float(k[0, 0]), float(k[1, 1]), float(k[0, 2]), float(k[1, 2])]
    cam["sapiens_resolution"] = [int(width), int(height)]
    if background is not None:
        cam.show_background_images = True
        bg = cam.background_images.new()
        bg.image = background
        bg.frame_method = "STRETCH"  # the image fills the camera frame exactly
        bg.alpha = 1.0
    obj = bpy.data.objects.new(name, cam)
    obj.rotation_euler = (math.pi / 2.0, 0.0, 0.0)
    collection.objects.link(obj)

    render = scene.render
    render.resolution_x = int(width)
    render.resolution_y = int(height)
    render.resolution_percentage = 100
    render.pixel_aspect_x = values["pixel_aspect_x"]
    render.pixel_aspect_y = values["pixel_aspect_y"]
    if make_active or scene.camera is None:
        scene.camera = obj
    return obj


def project_to_pixels(scene: bpy.types.Scene, camera: bpy.types.Object, world_points: np.ndarray) -> np.ndarray:
    """Pixel coordinates (u right, v down, pixel centres at +0.5) of world points seen by ``camera``.

    Uses Blender's own projection (``bpy_extras.object_utils.world_to_camera_view``), which is
    a per-point Python call: meant for tests and checks, not for building.
    """
    from bpy_extras.object_utils import world_to_camera_view
    from mathutils import Vector

    bpy.context.view_layer.update()  # matrix_world of freshly built objects
    w, h = scene.render.resolution_x, scene.render.resolution_y
    ndc = np.array([tuple(world_to_camera_view(scene, camera, Vector(p))) for p in world_points])
    return np.stack([ndc[:, 0] * w, (1.0 - ndc[:, 1]) * h], axis=1)
