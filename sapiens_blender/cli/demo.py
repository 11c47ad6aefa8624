# SPDX-License-Identifier: GPL-3.0-or-later
"""`sapiens-blender demo --out DIR`: the main job on the bundled sample photo, offline.

Starts a local inference server, analyses the bundled public-domain astronaut photo (model
``auto``: Sapiens2 on a GPU with weights, else the bundled MediaPipe backend — nothing to
download), builds the rigged asset and writes DIR/astronaut.blend, DIR/astronaut.glb and the
maps DIR/astronaut.npz, then prints what was built and how long each stage took.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from ..core.build.options import FITTED_BODY_MODES, BodyMode, wants_fit

DEFAULT_MODEL = "auto"
DEFAULT_STRIDE = 2  # one vertex per 2x2 pixels: a light mesh that builds in seconds


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "demo",
        help="build a rigged asset from the bundled sample photo (offline)",
        description="Analyse the bundled sample photo with a local server and write a .blend and "
                    "a .glb; prints a summary (people, vertices, parts, bones, seconds per stage).",
    )
    p.add_argument("--out", required=True, help="output folder (created if missing)")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help="server model (default: auto = Sapiens2 with a GPU and weights, else mediapipe)")
    p.add_argument("--photo", help="another photo instead of the bundled sample")
    p.add_argument("--stride", type=int, default=DEFAULT_STRIDE, help="pixels per mesh vertex (default 2)")
    p.add_argument("--server-python", help="Python interpreter of the server (default: this one)")
    p.add_argument("--body", choices=(*FITTED_BODY_MODES, BodyMode.NONE.value), default=BodyMode.CLOTHED.value,
                   help="the fitted 3D body (default clothed); none: the photo's relief instead")
    p.set_defaults(func=run)


def _stage(timings: dict, name: str, start: float) -> None:
    timings[name] = time.perf_counter() - start


def run(args: argparse.Namespace) -> int:
    from ..core.errors import SapiensServerError
    from ..core.geometry.types import GeometryError
    from ..data import sample_photo_path

    photo = Path(args.photo) if args.photo else sample_photo_path()
    if not photo.is_file():
        print(f"error: photo not found: {photo}", file=sys.stderr)
        return 2
    if args.stride < 1:
        print(f"error: --stride must be >= 1, got {args.stride}", file=sys.stderr)
        return 2
    try:
        from .. import api
    except ImportError as exc:
        print(f"error: the demo needs Blender as a Python module (bpy): {exc}\n"
              "install it with: bash scripts/install.sh app", file=sys.stderr)
        return 3
    from ..core.files.atomic import check_writable

    out = Path(args.out)
    stem = photo.stem
    try:
        check_writable([out / f"{stem}{ext}" for ext in (".npz", ".blend", ".glb")])
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    timings: dict[str, float] = {}
    total = time.perf_counter()
    try:
        maps, model_info, fit_error = _analyze(photo, args, timings)
        written = [maps.save(out / f"{stem}.npz")]  # every file written is reported
        t = time.perf_counter()
        if fit_error:
            print(f"warning: no body fit ({fit_error}): building the relief instead", file=sys.stderr)
        body = args.body if not fit_error else "none"
        result, rig_error = _build(api, maps, stem, args.stride, body)
        _stage(timings, "build", t)
        for ext in (".blend", ".glb"):
            t = time.perf_counter()
            written.append(api.export(out / f"{stem}{ext}", result))
            _stage(timings, f"export {ext}", t)
    except (SapiensServerError, GeometryError, ValueError, OSError, RuntimeError) as exc:
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    _print_summary(photo, maps, model_info, result, written, timings, time.perf_counter() - total)
    if rig_error:
        print(f"warning: the asset is NOT rigged: {rig_error}", file=sys.stderr)
    return 0


def _build(api, maps, stem: str, stride: int, body: str = "none"):
    """Build the rigged asset (the fitted body, or the relief); when no skeleton can be built,
    say why and build it unrigged (a mesh, camera and materials are still worth having).
    Returns (result, rig error or '')."""
    from ..core.geometry.types import GeometryError

    api.new_scene()
    if wants_fit(body):
        return api.build_from_maps(maps, name=stem, body=body), ""
    try:
        return api.build_from_maps(maps, name=stem, stride=stride), ""
    except GeometryError as exc:
        if "skeleton" not in str(exc):
            raise
        api.new_scene()
        return api.build_from_maps(maps, name=stem, stride=stride, armature=False), str(exc)


def _analyze(photo: Path, args, timings: dict):
    """Start the local server, analyse the photo (and fit the body), stop the server.
    Returns (maps, model facts, why there is no body fit or '')."""
    from .. import api
    from ..core.remote.analysis import analyze_photo
    from ..core.body.records import BodyError
    from ..core.errors import SapiensServerError
    from ..core.local_server.process import ServerProcess

    t = time.perf_counter()
    server = ServerProcess(python=args.server_python, startup_timeout=180.0, client_timeout=300.0)
    try:
        client = server.ensure_running()
        _stage(timings, "server start", t)
        t = time.perf_counter()
        client.load_model(args.model, timeout=600)  # auto decides here, and says why
        _stage(timings, "model load", t)
        t = time.perf_counter()
        maps = analyze_photo(client, photo, args.model, timeout=600)
        _stage(timings, "analysis", t)
        fit_error = ""
        if wants_fit(args.body):
            t = time.perf_counter()
            try:
                maps = api._fit_with(client, maps, None)
                _stage(timings, "body fit", t)
            except (SapiensServerError, BodyError) as exc:  # e.g. a server without the body model
                fit_error = str(exc)
        try:
            info = client.model_metadata(args.model)
        except SapiensServerError:  # metadata is for the summary only
            info = {}
    finally:
        server.stop()
    return maps, info, fit_error


def _print_summary(photo, maps, model_info, result, written, timings, total) -> None:
    people = result.people
    print(f"photo: {photo} ({maps.width}x{maps.height})")
    print(f"maps: {maps.source}")
    print(f"people: {len(people)}")
    if result.report.warning:
        print(f"warning: {result.report.warning}")
    for line in result.person_lines():
        print(line)
    build_stages = ", ".join(f"{k} {v:.2f}" for k, v in result.timings.items())
    print("seconds per stage: " + ", ".join(f"{k} {v:.2f}" for k, v in timings.items())
          + f" (build: {build_stages}); total {total:.2f}")
    for path in written:
        print(f"wrote {Path(path).resolve()}")  # one form for every file
