# SPDX-License-Identifier: GPL-3.0-or-later
"""`sapiens-blender build`: a photo (through the inference server), a maps file or Sapiens-lite
outputs -> .blend / .glb / .gltf / .fbx, headless (the ``bpy`` module)."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from ..core.build.options import FITTED_BODY_MODES, BodyMode
from .server_args import TOKEN_HELP, server_token

EXPORT_SUFFIXES = (".blend", ".glb", ".gltf", ".fbx")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "build", help="build a rigged 3D person from a photo, a maps file or Sapiens-lite outputs",
        description="Build camera, mesh, normal texture, part materials and a skinned armature per "
                    "person, and write them to one or more files (format from the suffix).",
    )
    p.add_argument("photo", nargs="?", help="the photo (analysed by the inference server unless --maps/--lite-dir)")
    p.add_argument("-o", "--output", action="append", required=True, metavar="OUT",
                   help="output file .blend, .glb, .gltf or .fbx (repeat for several)")
    src = p.add_argument_group("input")
    src.add_argument("--maps", metavar="MAPS.npz", help="build from a canonical maps file (no server)")
    src.add_argument("--lite-dir", metavar="DIR", help="build from Sapiens-lite demo outputs for PHOTO under DIR")
    src.add_argument("--joints", metavar="JOINTS.json", help="3D joints per person (docs/maps_format.md)")
    src.add_argument("--model", default=None, help="model for the analysis (default: auto)")
    src.add_argument("--server", metavar="URL", help="use a running server instead of starting a local one")
    src.add_argument("--token", help=TOKEN_HELP)
    src.add_argument("--save-maps", metavar="MAPS.npz",
                     help="also keep the analysed maps (with the body fit when --body fitted one)")
    p.add_argument("--save-joints", metavar="JOINTS.json",
                   help="also write the joints each armature was built from (docs/maps_format.md)")
    p.add_argument("--report", metavar="REPORT.json",
                   help="also write the build's report (per person: counts, notes, warnings, skinning, "
                        "body; seconds per stage) as JSON")
    add_geometry_arguments(p)
    p.set_defaults(func=run, check=check_args)


def add_geometry_arguments(p) -> None:
    """Build options shared by `build` and `batch`."""
    geo = p.add_argument_group("geometry")
    geo.add_argument("--stride", type=int, default=1, help="one vertex per N pixels (default 1: full resolution)")
    geo.add_argument("--closed", action="store_true", help="a watertight body instead of the visible surface")
    geo.add_argument("--people", help="comma-separated person ids to build (default: all)")
    geo.add_argument("--normals", choices=("auto", "object", "tangent"), default="auto",
                     help="normal texture space (auto: object for .blend only, tangent when a .glb/.fbx is written)")
    geo.add_argument("--tangent-normals", action="store_true", help="same as --normals tangent")
    geo.add_argument("--no-part-materials", action="store_true", help="one photo material instead of one per part")
    geo.add_argument("--no-armature", action="store_true", help="mesh only")
    geo.add_argument("--skinning", choices=("auto", "parts", "none"), default="auto",
                     help="auto: bone heat, part weights where it fails; parts: part weights only")
    body = p.add_argument_group("fitted body")
    body.add_argument("--body", nargs="?", const="clothed", choices=FITTED_BODY_MODES, default=None,
                      help="a complete, rigged 3D body fitted to the photo instead of the relief: 'clothed' "
                           "(default) carries the photo's clothing and hair onto it, 'minimal' is the body alone; "
                           "maps without a fit are fitted by the server")
    body.add_argument("--rig-names", choices=("anny", "rigify", "mixamo", "unreal"), default="anny",
                      help="bone names of the body's rig, for retargeting (default: anny's own)")
    body.add_argument("--no-expressions", action="store_true",
                      help="no face shape keys: the fitted body carries the 52 ARKit expressions (set to "
                           "the photo's) unless this is given (about 1 MB less per body in a .glb)")


def normal_space(args, outputs) -> str:
    if args.tangent_normals or args.normals == "tangent":
        return "TANGENT"
    if args.normals == "object":
        return "OBJECT"
    return "OBJECT" if all(Path(o).suffix.lower() == ".blend" for o in outputs) else "TANGENT"


def option_values(args, outputs) -> dict:
    """BuildOptions fields from the geometry arguments (plain values: they travel as JSON to batch
    workers, and computing them does not import bpy)."""
    people = None
    if args.people:
        try:
            people = [int(x) for x in args.people.split(",") if x.strip()]
        except ValueError:
            raise SystemExit(f"error: --people must be comma-separated integers, got {args.people!r}")
    return {"stride": args.stride, "closed": args.closed, "normal_space": normal_space(args, outputs),
            "part_materials": not args.no_part_materials, "armature": not args.no_armature,
            "skinning": args.skinning, "people": people, "body": BodyMode.parse(args.body).value, "rig_names": args.rig_names,
            "expressions": not args.no_expressions}


def options_from_args(args, name: str):
    from ..core.build.options import BuildOptions

    joints = None
    if getattr(args, "joints", None):
        from ..core.geometry.joints_io import read as read_joints

        joints = read_joints(args.joints)
    return BuildOptions(name=name, joints=joints, **option_values(args, args.output))


def check_args(args) -> str | None:
    """A usage error message, or None."""
    sources = [bool(args.maps), bool(args.lite_dir and args.photo), bool(args.photo and not args.lite_dir)]
    if args.lite_dir and not args.photo:
        return "--lite-dir needs PHOTO (the image the lite outputs belong to)"
    if sum(sources) != 1:
        return "give exactly one input: PHOTO, --maps MAPS.npz, or --lite-dir DIR PHOTO"
    bad = [o for o in args.output if Path(o).suffix.lower() not in EXPORT_SUFFIXES]
    if bad:
        return f"unsupported output {bad[0]!r}: use {', '.join(EXPORT_SUFFIXES)}"
    return check_geometry_args(args)


def check_geometry_args(args) -> str | None:
    """A usage error in the options shared by `build` and `batch`, or None."""
    if args.stride < 1:
        return "--stride must be at least 1"
    if args.body and args.closed:
        return "--body and --closed are two different bodies: choose one"
    if args.rig_names != "anny" and not args.body:
        return "--rig-names names the fitted body's bones: add --body"
    if args.no_expressions and not args.body:
        return "--no-expressions is about the fitted body's face: add --body"
    return None


def run(args) -> int:
    try:
        from ..blender.deterministic import import_bpy

        import_bpy()  # same maps, same bytes
    except ImportError:
        print("error: building needs Blender's Python module: pip install 'sapiens-blender[blender]'",
              file=sys.stderr)
        return 2
    from .. import api
    from ..blender.export import ExportError
    from ..core.body.records import BodyError
    from ..core.errors import SapiensServerError
    from ..core.geometry.joints_io import JointsFileError
    from ..core.geometry.types import GeometryError
    from ..core.maps.canonical import MapsError

    from ..core.files.atomic import atomic_write_bytes, check_writable

    started = time.perf_counter()
    try:
        # Before the analysis and the build: a bad output must cost seconds, not minutes.
        check_writable([*args.output, *(p for p in (args.save_maps, args.report) if p)])
        api.new_scene()
        maps, name, analysis_s = load_input(args)
        result = api.build_from_maps(maps, options_from_args(args, name), server=args.server,
                                     token=server_token(args))
        export_s = time.perf_counter()
        written = api.export_all(args.output, result)  # all or none
        result.timings["export"] = time.perf_counter() - export_s
        if args.save_joints:
            written.append(api.save_joints(args.save_joints, result))
        if args.save_maps:  # written by load_input; with a body again, now carrying its fit
            written.append(maps.save(args.save_maps) if args.body else Path(args.save_maps))
    except (MapsError, GeometryError, JointsFileError, SapiensServerError, ExportError, BodyError, OSError,
            ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if analysis_s is not None:
        result.timings = {"analysis": analysis_s, **result.timings}
    if args.report:
        try:
            text = json.dumps(result.to_dict(), indent=1) + "\n"
            written.append(atomic_write_bytes(args.report, text.encode()))
        except OSError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
    print(result.summary())
    for path in written:
        print(f"wrote {path}")
    print(f"total {time.perf_counter() - started:.2f} s")
    return 0


def load_input(args):
    """(Maps, name, analysis seconds or None) from whichever input was given."""
    from .. import api
    from ..core.maps.canonical import Maps

    seconds = None
    if args.maps:
        maps, name = Maps.load(args.maps), Path(args.maps).stem
    else:
        photo = Path(args.photo)
        if not photo.is_file():
            raise FileNotFoundError(f"no such photo: {photo}")
        name = photo.stem
        if args.lite_dir:
            from ..blender.images import read_photo
            from ..core.maps.lite_files import load_lite_maps

            maps = load_lite_maps(args.lite_dir, photo.stem, read_photo(photo))
        else:
            start = time.perf_counter()
            maps = api.analyze(photo, model=args.model or api.DEFAULT_MODEL, server=args.server,
                               token=server_token(args), body=BodyMode.parse(args.body).value)
            seconds = time.perf_counter() - start
    if args.save_maps:  # right away, whatever the input (a --maps copy, converted lite files, an
        maps.save(args.save_maps)  # analysis): a failing build loses nothing
    return maps, name, seconds
