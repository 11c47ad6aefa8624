# SPDX-License-Identifier: GPL-3.0-or-later
"""`sapiens-blender animate CLIP -o OUT.glb|.fbx|.blend`: a video (or a folder of frames, or of
maps with --maps-dir) -> per person followed through the clip, the fitted body (or the relief
armature) with a baked action, the clip's camera and the scene's fps and range; written with the
animation."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from .analyze import ProgressBar
from .build import EXPORT_SUFFIXES
from ..core.build.options import FITTED_BODY_MODES, BodyMode
from .server_args import TOKEN_HELP, server_token


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "animate", help="animate a rig from a video of people (or a folder of frames or maps)",
        description="Analyse every frame of a clip (several in flight), follow each person, smooth "
                    "their joints over time, plant still feet, and bake one armature per person. "
                    "Frames count from 0 in the input's order.")
    p.add_argument("clip", nargs="?", metavar="INPUT", help="a video file (what OpenCV decodes) or a folder of frames")
    p.add_argument("-o", "--output", action="append", required=True, metavar="OUT",
                   help="output .glb, .gltf, .fbx or .blend (repeat for several)")
    p.add_argument("--maps-dir", metavar="DIR", help="a folder of maps .npz, one per frame (no server)")
    p.add_argument("--model", default="auto", help="analysis model (default auto)")
    p.add_argument("--fps", type=float, help="frame rate of the input (default: the video's; 25 for a folder)")
    p.add_argument("--start", type=int, default=0, help="first frame (default 0)")
    p.add_argument("--end", type=int, default=None, help="stop before this frame (default: the end)")
    p.add_argument("--stride", type=int, default=1, help="analyse every K-th frame (default 1)")
    p.add_argument("--offline", action="store_true",
                   help="smooth with the whole clip (default: 2 frames of look-ahead)")
    p.add_argument("--save-joints", metavar="FILE.json", help="also write the joints of every frame")
    p.add_argument("--parallel", type=int, default=4, metavar="N", help="frames in flight (default 4)")
    p.add_argument("--max-side", type=int, default=None, help="long side of the analysed frames")
    p.add_argument("--server", metavar="URL", help="use a running server instead of starting one")
    p.add_argument("--token", help=TOKEN_HELP)
    p.add_argument("--no-background", action="store_true", help="do not put the clip behind the camera")
    p.add_argument("--rig", choices=("body", "relief"), default="body",
                   help="what moves: 'body' = the fitted body, fitted once per person and posed on "
                        "every frame (default; people it cannot fit keep the relief armature, and a "
                        "note says so), 'relief' = the armature of the joints (with --maps-dir: no server)")
    p.add_argument("--body", choices=FITTED_BODY_MODES, default=BodyMode.CLOTHED.value,
                   help="with --rig body: the clothing carried onto the body (default) or the body alone")
    p.add_argument("--rig-names", choices=("anny", "rigify", "mixamo", "unreal"), default="anny",
                   help="with --rig body: bone names for retargeting tools (default anny's)")
    p.add_argument("--no-expressions", action="store_true",
                   help="no face shape keys on the fitted bodies (default: the 52 ARKit expressions)")
    p.add_argument("--no-mesh", action="store_true",
                   help="with --rig relief: armatures only (default: each carries the relief mesh "
                        "of its best-seen frame)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.set_defaults(func=run, check=check_args)


def check_args(args) -> str | None:
    if bool(args.clip) == bool(args.maps_dir):
        return "give exactly one input: INPUT (video or folder of frames) or --maps-dir DIR"
    bad = [o for o in args.output if Path(o).suffix.lower() not in EXPORT_SUFFIXES]
    if bad:
        return f"unsupported output {bad[0]!r}: use {', '.join(EXPORT_SUFFIXES)}"
    if args.stride < 1 or args.parallel < 1 or args.start < 0:
        return "--stride and --parallel must be at least 1, --start at least 0"
    if args.end is not None and args.end <= args.start:
        return "--end must be after --start"
    if args.fps is not None:
        from ..core.motion.sources import FrameSourceError, checked_fps

        try:
            checked_fps(args.fps, "--fps")
        except FrameSourceError as exc:
            return str(exc)
    return None


def run(args) -> int:
    try:
        import bpy  # noqa: F401
    except ImportError:
        print("error: animating needs Blender's Python module: pip install 'sapiens-blender[blender]'",
              file=sys.stderr)
        return 2
    import os

    from .. import api
    from ..blender.export import ExportError
    from ..core.errors import SapiensServerError
    from ..core.maps.canonical import MapsError
    from ..core.motion.joints_file import AnimationJointsError
    from ..core.motion.sources import FrameSourceError

    bar = ProgressBar(0, enabled=not args.quiet)

    def progress(done, total, message):
        bar.total = total or "?"
        bar.index = int(done)  # the body stage reports fractions of a track
        bar.name = ""
        stage = "body" if "body" in message or "bodies" in message else "analysis"
        bar.update(stage, done / total if total else None, message)

    started = time.perf_counter()
    try:
        api.new_scene()
        result = api.animate(
            args.maps_dir or args.clip, args.output, model=args.model, maps_dir=bool(args.maps_dir),
            fps=args.fps, start=args.start, end=args.end, stride=args.stride, offline=args.offline,
            save_joints=args.save_joints, server=args.server,
            token=server_token(args), parallel=args.parallel,
            max_side=args.max_side, background=not args.no_background, mesh=not args.no_mesh,
            progress=progress, rig=args.rig, body_mode=args.body, rig_names=args.rig_names,
            expressions=not args.no_expressions)
    except (FrameSourceError, MapsError, SapiensServerError, ExportError, AnimationJointsError,
            OSError, ValueError) as exc:
        bar.finish_line()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    bar.finish_line()
    animation = result.animation
    seconds = time.perf_counter() - started
    print(f"{len(animation.frames)} frames at {animation.fps:g} fps, {len(animation.tracks)} "
          f"track(s), driving the {animation.source}; {len(animation.frames) / seconds:.2f} frames/s")
    for track in animation.tracks:
        print(f"  track {track.id}: frames {int(track.frames[0])}-{int(track.frames[-1])}, "
              f"seen in {int(track.seen.sum())}, {track.source}")
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    if not animation.tracks:
        print("note: nobody was followed through the clip: the outputs hold only the camera", file=sys.stderr)
    if args.save_joints:
        print(f"wrote {args.save_joints}")
    for path in result.written:
        print(f"wrote {path}")
    return 0
