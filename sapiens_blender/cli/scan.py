# SPDX-License-Identifier: GPL-3.0-or-later
"""`sapiens-blender scan`: a turn-around clip, a few photos of one person or a folder of their
maps -> one complete, textured, rigged body (.blend / .glb / .gltf / .fbx)."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .build import EXPORT_SUFFIXES
from .server_args import TOKEN_HELP, server_token


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "scan", help="one complete, textured, rigged body from a turn-around clip or several photos",
        description="Fit one body (one shape, one clothed layer, a pose per view) to every view of one "
                    "person, fuse one texture from all of them, and write it like `build --body`.")
    p.add_argument("inputs", nargs="*", metavar="INPUT",
                   help="a clip (video or folder of frames) of one person turning, or two or more photos")
    p.add_argument("-o", "--output", action="append", required=True, metavar="OUT",
                   help="output file .blend, .glb, .gltf or .fbx (repeat for several)")
    p.add_argument("--maps-dir", metavar="DIR", help="a folder of maps .npz, one per view (as `analyze` writes)")
    p.add_argument("--save-joints", metavar="JOINTS.json", help="also write the body's joints (docs/maps_format.md)")
    p.add_argument("--stride", type=int, default=1, help="use every Nth frame or photo (default 1)")
    p.add_argument("--max-views", type=int, default=None, help="at most N views, evenly spaced (default: all)")
    p.add_argument("--body", choices=("clothed", "minimal"), default="clothed",
                   help="'clothed' (default) carries the clothing and hair; 'minimal' is the body alone")
    p.add_argument("--rig-names", choices=("anny", "rigify", "mixamo", "unreal"), default="anny")
    p.add_argument("--texture-size", type=int, default=1024, help="texture side in texels (default 1024)")
    p.add_argument("--model", default=None, help="model for the analysis (default: auto)")
    p.add_argument("--server", metavar="URL", help="use a running server instead of starting a local one")
    p.add_argument("--token", help=TOKEN_HELP)
    p.set_defaults(func=run, check=check_args)


def check_args(args) -> str | None:
    if bool(args.maps_dir) == bool(args.inputs):
        return "give a clip, two or more photos, or --maps-dir DIR (one of them)"
    bad = [o for o in args.output if Path(o).suffix.lower() not in EXPORT_SUFFIXES]
    if bad:
        return f"unsupported output {bad[0]!r}: use {', '.join(EXPORT_SUFFIXES)}"
    if args.stride < 1:
        return "--stride must be at least 1"
    if args.max_views is not None and args.max_views < 2:
        return "--max-views must be at least 2"
    if not 64 <= args.texture_size <= 8192:
        return "--texture-size must be 64 to 8192"
    return None


def progress_line(stage: str, fraction: float | None, text: str) -> str:
    """One progress line for stderr; a stage that reports no fraction (loading a model) has none."""
    share = "   " if fraction is None else f"{100 * fraction:3.0f}%"
    return f"[{stage} {share}] {text}"


def run(args) -> int:
    try:
        from ..blender.deterministic import import_bpy

        import_bpy()
    except ImportError:
        print("error: building needs Blender's Python module: pip install 'sapiens-blender[blender]'",
              file=sys.stderr)
        return 2
    from .. import api
    from ..core.errors import SapiensError
    from ..core.files.atomic import check_writable

    started = time.perf_counter()

    def progress(stage, fraction, text):
        print(progress_line(stage, fraction, text), file=sys.stderr, flush=True)

    try:
        check_writable([*args.output, *([args.save_joints] if args.save_joints else [])])
        api.new_scene()
        result = api.scan(args.inputs, maps_dir=args.maps_dir, model=args.model or api.DEFAULT_MODEL,
                          server=args.server, token=server_token(args), body=args.body, rig_names=args.rig_names,
                          stride=args.stride, max_views=args.max_views, texture_size=args.texture_size,
                          progress=progress)
        t = time.perf_counter()
        written = api.export_all(args.output, result)
        result.timings["export"] = time.perf_counter() - t
        if args.save_joints:
            written.append(api.save_joints(args.save_joints, result))
    except (SapiensError, OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(result.summary())
    for path in written:
        print(f"wrote {path}")
    print(f"total {time.perf_counter() - started:.2f} s")
    return 0
