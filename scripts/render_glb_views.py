# SPDX-License-Identifier: GPL-3.0-or-later
"""Render a built body's .glb (``build --body``, ``scan``) textured from around it into one row:
the front, 45°, 90°, 135°, the back and 270°, turned about the body's own vertical axis (docs/body.md).

    .venv/bin/python scripts/render_glb_views.py BODY.glb OUT.png [--size 320] [--samples 16]

"Front" is the side the body faces (anny faces its armature's -Y), not the photo's camera, so a
body the fit leaned towards a tilted camera is still shown upright. Cycles CPU, no denoising.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
from pathlib import Path

import numpy as np

VIEWS = (("front", 0.0), ("45", 45.0), ("side_90", 90.0), ("135", 135.0), ("back", 180.0),
         ("side_270", 270.0))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("glb")
    parser.add_argument("out")
    parser.add_argument("--size", type=int, default=320, help="image height in pixels, per view")
    parser.add_argument("--samples", type=int, default=16)
    args = parser.parse_args(argv)

    import bpy
    from mathutils import Matrix
    from PIL import Image

    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_scene.gltf(filepath=args.glb)
    scene = bpy.context.scene
    # The importer's bone-shape icosphere and anything else small is not the body.
    bodies = [o for o in scene.objects if o.type == "MESH" and len(o.data.vertices) > 1000]
    for o in scene.objects:
        if o.type == "MESH" and o not in bodies:
            o.hide_render = True
    armature = next(o for o in scene.objects if o.type == "ARMATURE")
    axes = np.array(armature.matrix_world)[:3, :3]
    up = axes[:, 2] / np.linalg.norm(axes[:, 2])
    facing = -axes[:, 1] - up * float(-axes[:, 1] @ up)
    facing /= np.linalg.norm(facing)

    depsgraph = bpy.context.evaluated_depsgraph_get()
    points = []
    for o in bodies:
        evaluated = o.evaluated_get(depsgraph)
        mesh = evaluated.to_mesh()
        co = np.empty(3 * len(mesh.vertices))
        mesh.vertices.foreach_get("co", co)
        world = np.array(o.matrix_world)
        points.append(co.reshape(-1, 3) @ world[:3, :3].T + world[:3, 3])
        evaluated.to_mesh_clear()
    points = np.concatenate(points)
    centre = 0.5 * (points.min(0) + points.max(0))
    height = float(np.ptp(points @ up))

    scene.render.engine = "CYCLES"
    scene.cycles.device = "CPU"
    scene.cycles.samples = args.samples
    scene.cycles.use_denoising = False
    scene.render.resolution_x, scene.render.resolution_y = int(0.8 * args.size), args.size
    scene.render.resolution_percentage = 100
    world = bpy.data.worlds.new("World")
    scene.world = world
    world.use_nodes = True
    world.node_tree.nodes["Background"].inputs["Color"].default_value = (0.55, 0.57, 0.6, 1.0)
    world.node_tree.nodes["Background"].inputs["Strength"].default_value = 1.0
    for name, energy, tilt, turn in (("Render key", 2.5, 50, 30), ("Render fill", 1.5, -60, -20)):
        sun = bpy.data.objects.new(name, bpy.data.lights.new(name, "SUN"))
        sun.data.energy = energy
        sun.rotation_euler = (math.radians(tilt), 0.0, math.radians(turn))
        scene.collection.objects.link(sun)
    cam_data = bpy.data.cameras.new("Render camera")
    cam_data.lens = 50.0  # the sensor fits the image's height (the longer side)
    cam = bpy.data.objects.new("Render camera", cam_data)
    scene.collection.objects.link(cam)
    scene.camera = cam
    distance = 1.12 * 0.5 * height / (0.5 * cam_data.sensor_width / cam_data.lens)

    k = np.array([[0, -up[2], up[1]], [up[2], 0, -up[0]], [-up[1], up[0], 0]])
    tiles = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, yaw in VIEWS:
            a = math.radians(yaw)
            rot = np.eye(3) + math.sin(a) * k + (1 - math.cos(a)) * (k @ k)
            eye = centre + distance * (rot @ facing)
            forward = (centre - eye) / distance
            right = np.cross(forward, up)
            right /= np.linalg.norm(right)
            m = np.eye(4)
            m[:3, 0], m[:3, 1], m[:3, 2], m[:3, 3] = right, np.cross(right, forward), -forward, eye
            cam.matrix_world = Matrix(m.tolist())
            scene.render.filepath = str(Path(tmp) / f"{name}.png")
            bpy.ops.render.render(write_still=True)
            tiles.append(Image.open(scene.render.filepath).convert("RGB"))
    w, h = tiles[0].size
    row = Image.new("RGB", (w * len(tiles), h))
    for i, tile in enumerate(tiles):
        row.paste(tile, (w * i, 0))
    row = row.quantize(colors=128, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    row.save(args.out, optimize=True)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
