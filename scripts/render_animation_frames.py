# SPDX-License-Identifier: GPL-3.0-or-later
"""Render an animated clip (a .blend written by ``sapiens-blender animate``) at a few frames,
from the clip's camera, 3/4, side and back, into one contact sheet (a row per view; docs/body.md).

    .venv/bin/python scripts/render_animation_frames.py CLIP.blend OUT.png [--frames 4] [--size 200]
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from render_body_views import bounds, orbit_camera, setup_render  # noqa: E402


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("blend")
    parser.add_argument("out")
    parser.add_argument("--frames", type=int, default=4, help="frames spread over the clip")
    parser.add_argument("--size", type=int, default=200, help="longer side of each picture")
    parser.add_argument("--samples", type=int, default=8)
    args = parser.parse_args(argv)

    import bpy

    bpy.ops.wm.open_mainfile(filepath=str(Path(args.blend).resolve()))
    scene = bpy.context.scene
    setup_render(scene, args.size, args.samples)
    clip_cam = scene.camera
    clip_cam.data.show_background_images = False
    meshes = [o for o in scene.objects if o.type == "MESH" and o.find_armature() is not None]
    if not meshes:
        raise SystemExit(f"{args.blend} holds no animated mesh")
    frames = np.linspace(scene.frame_start, scene.frame_end, args.frames).round().astype(int)
    scene.frame_set(int(frames[len(frames) // 2]))
    centre, radius = bounds(meshes)
    views = [("camera", clip_cam)] + [(label, orbit_camera(clip_cam, centre, radius * 1.15, yaw))
                                      for label, yaw in (("three_quarter", 45.0), ("side", 90.0), ("back", 180.0))]
    rows = []
    tmp = Path(args.out).with_suffix("")
    for label, cam in views:
        row = []
        for f in frames:
            scene.frame_set(int(f))
            scene.camera = cam
            path = tmp.parent / f".{tmp.name}_{label}_{f}.png"
            scene.render.filepath = str(path)
            bpy.ops.render.render(write_still=True)
            img = bpy.data.images.load(str(path))
            px = np.array(img.pixels[:], np.float32).reshape(img.size[1], img.size[0], 4)[::-1]
            bpy.data.images.remove(img)
            path.unlink()
            row.append(px)
        rows.append(np.concatenate(_same_height(row), axis=1))
    width = max(r.shape[1] for r in rows)
    sheet = np.concatenate([np.pad(r, ((0, 0), (0, width - r.shape[1]), (0, 0)), constant_values=1.0)
                            for r in rows], axis=0)
    out = bpy.data.images.new("sheet", sheet.shape[1], sheet.shape[0], alpha=True)
    out.pixels.foreach_set(np.ascontiguousarray(sheet[::-1]).ravel())
    out.filepath_raw = str(Path(args.out).resolve())
    out.file_format = "PNG"
    out.save()
    print(f"wrote {args.out}: frames {frames.tolist()}, rows: clip camera, 3/4, side, back")
    return 0


def _same_height(images):
    h = max(i.shape[0] for i in images)
    return [np.pad(i, ((0, h - i.shape[0]), (0, 0), (0, 0)), constant_values=1.0) for i in images]


if __name__ == "__main__":
    sys.exit(main())
