# SPDX-License-Identifier: GPL-3.0-or-later
"""Render a fitted body from the photo's camera, 3/4, side and back, and with its left arm raised
45 degrees through the armature: small Cycles CPU renders to look at (docs/body.md).

    .venv/bin/python scripts/render_body_views.py MAPS.npz OUT_DIR [--body clothed] [--size 256]

MAPS.npz must hold a body fit (``analyze --fit``, or the demo's maps), else a local server is
started to fit it. Writes OUT_DIR/<stem>_<view>.png.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import numpy as np

VIEWS = (("camera", 0.0), ("three_quarter", 45.0), ("side", 90.0), ("back", 180.0))
# "camera" is the photo's own camera; the turned views frame the whole fitted body.


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("maps")
    parser.add_argument("out")
    parser.add_argument("--body", default="clothed", choices=("clothed", "minimal"))
    parser.add_argument("--size", type=int, default=256, help="longer image side in pixels")
    parser.add_argument("--samples", type=int, default=16)
    args = parser.parse_args(argv)

    import bpy
    from mathutils import Matrix

    from sapiens_blender import api

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = Path(args.maps).stem
    api.new_scene()
    result = api.build_from_maps(args.maps, body=args.body)
    print(result.summary())
    scene = bpy.context.scene
    setup_render(scene, args.size, args.samples)
    photo_cam = result.camera
    bodies = [p.body_mesh for p in result.people]
    centre, radius = bounds(bodies)
    for name, yaw in VIEWS:
        cam = photo_cam if yaw == 0 else orbit_camera(photo_cam, centre, radius, yaw)
        render(scene, cam, out / f"{stem}_{name}.png")
    # The left arm raised 45 degrees more (about the body's forward axis, through the shoulder).
    for person in result.people:
        arm = person.body_armature
        pb = next(b for b in arm.pose.bones if b.name in ("upperarm01.L", "upper_arm.L", "mixamorig:LeftArm",
                                                         "upperarm_l"))
        head = np.array(pb.matrix)[:3, 3]
        rot = np.eye(4)
        rot[:3, :3] = rotation_about([0.0, -1.0, 0.0], math.radians(45.0))  # model frame: faces -Y
        shift, back = np.eye(4), np.eye(4)
        shift[:3, 3], back[:3, 3] = head, -head
        pb.matrix = Matrix((shift @ rot @ back @ np.array(pb.matrix)).tolist())
    bpy.context.view_layer.update()
    render(scene, photo_cam, out / f"{stem}_arm_raised.png")
    return 0


def setup_render(scene, size: int, samples: int) -> None:
    import bpy

    scene.render.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = samples
    scene.cycles.use_denoising = False
    longest = max(scene.render.resolution_x, scene.render.resolution_y)
    scene.render.resolution_percentage = max(1, min(100, round(100 * size / longest)))
    scene.render.film_transparent = False
    world = scene.world or bpy.data.worlds.new("World")
    scene.world = world
    if world.node_tree is None:  # Blender < 5 makes worlds without nodes
        world.use_nodes = True
    world.node_tree.nodes["Background"].inputs["Color"].default_value = (0.55, 0.57, 0.6, 1.0)
    world.node_tree.nodes["Background"].inputs["Strength"].default_value = 0.6
    sun = bpy.data.objects.new("Render sun", bpy.data.lights.new("Render sun", "SUN"))
    sun.data.energy = 3.0
    sun.rotation_euler = (math.radians(50), 0.0, math.radians(30))
    scene.collection.objects.link(sun)
    fill = bpy.data.objects.new("Render fill", bpy.data.lights.new("Render fill", "SUN"))
    fill.data.energy = 1.5
    fill.rotation_euler = (math.radians(-60), 0.0, math.radians(-20))  # from behind
    scene.collection.objects.link(fill)


def bounds(objects):
    from sapiens_blender.blender.mesh import mesh_vertices

    pts = np.concatenate([mesh_vertices(o, evaluated=True) for o in objects])
    lo, hi = pts.min(0), pts.max(0)
    return 0.5 * (lo + hi), 0.5 * float(np.max(hi - lo))


def rotation_about(axis, angle: float) -> np.ndarray:
    axis = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    return np.eye(3) + math.sin(angle) * k + (1 - math.cos(angle)) * (k @ k)


def orbit_camera(photo_cam, centre, radius: float, yaw_deg: float):
    """A camera like the photo's, turned by ``yaw_deg`` about the vertical through the body's
    ``centre`` and far enough to frame the whole body (``radius``): the photo may show only part
    of it (a portrait), the fitted body is whole."""
    import bpy
    from mathutils import Matrix

    cam = photo_cam.copy()
    cam.data = photo_cam.data.copy()
    cam.data.shift_x = cam.data.shift_y = 0.0  # aim at the body, not at the photo's framing
    bpy.context.scene.collection.objects.link(cam)
    position = np.array(photo_cam.matrix_world)[:3, 3]
    ahead = centre - position
    ahead[2] = 0.0
    ahead /= max(float(np.linalg.norm(ahead)), 1e-9)
    scene = bpy.context.scene
    aspect = scene.render.resolution_x / scene.render.resolution_y
    half_x = 0.5 * cam.data.angle_x  # the photo's camera fits its sensor horizontally
    half_fov = min(half_x, math.atan(math.tan(half_x) / aspect))
    distance = 1.1 * radius / math.tan(half_fov)
    rot = rotation_about([0.0, 0.0, 1.0], math.radians(yaw_deg))
    eye = centre - distance * (rot @ ahead)
    forward = (centre - eye) / distance
    right = np.cross(forward, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward)
    m = np.eye(4)
    m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = right, up, -forward, eye  # cameras look down -Z
    cam.matrix_world = Matrix(m.tolist())
    return cam


def render(scene, cam, path: Path) -> None:
    import bpy

    scene.camera = cam
    scene.render.filepath = str(path)
    bpy.ops.render.render(write_still=True)
    print(f"wrote {path}")


if __name__ == "__main__":
    sys.exit(main())
