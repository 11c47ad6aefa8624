# SPDX-License-Identifier: GPL-3.0-or-later
"""`sapiens-blender analyze PHOTO... --out DIR`: photos -> canonical maps (.npz) + preview PNGs.

Runs through the inference server: a given one (``--server URL --token T``) or a local one started
for the run (with ``--device``/``--precision`` passed to it). Writes, per photo,
``DIR/<stem>.npz`` (docs/maps_format.md) and ``DIR/<stem>_{parts,normal,depth,keypoints}.png``.
numpy + stdlib only (previews use the bundled PNG writer).
"""

from __future__ import annotations

import argparse
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from pathlib import Path

from .server_args import TOKEN_HELP, server_token

DEFAULT_MODEL = "auto"
TASKS = ("seg", "normal", "depth", "pose")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "analyze", help="analyse photos into canonical maps (.npz) and preview images",
        description="Run a Sapiens (or offline) model on each photo through the inference server and "
                    "write DIR/<photo stem>.npz plus preview PNGs.")
    p.add_argument("photos", nargs="+", metavar="PHOTO", help="photo files (JPEG, PNG, ...)")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder (created)")
    p.add_argument("--model", default=DEFAULT_MODEL,
                   help="sapiens2-{0.4b,0.8b,1b,5b}, sapiens-{0.3b,0.6b,1b,2b}, mediapipe or auto (default)")
    p.add_argument("--tasks", default=",".join(TASKS),
                   help="comma list of seg,normal,depth,pose (default: all)")
    p.add_argument("--max-side", type=int, default=None, help="long side of the maps (default: server's 1024)")
    p.add_argument("--flip-test", action=argparse.BooleanOptionalAction, default=None,
                   help="Sapiens pose: average with the mirrored person crop (server default: on; "
                        "--no-flip-test saves the second pose pass)")
    p.add_argument("--device", choices=("auto", "cpu", "cuda", "mps"), default=None,
                   help="device of a server started for this run (default auto)")
    p.add_argument("--precision", choices=("auto", "fp32", "bf16", "fp16", "int8"), default=None,
                   help="precision of a server started for this run (default auto)")
    p.add_argument("--server", metavar="URL", help="use this running server instead of starting one")
    p.add_argument("--token", help=TOKEN_HELP)
    p.add_argument("--python", metavar="EXE", help="Python interpreter for a started server (default: this one)")
    p.add_argument("--no-previews", action="store_true", help="write only the .npz files")
    p.add_argument("--fit", action="store_true",
                   help="also fit the parametric body to every person and keep it in the .npz "
                        "(a later `build --body` then needs no server)")
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar")
    p.add_argument("--parallel", type=int, default=4, metavar="N",
                   help="photos in flight at once (default 4): the server batches queued photos of "
                        "the same model into one forward pass per task; 1 sends them one by one")
    p.set_defaults(func=run)


class ProgressBar:
    """One line on stderr: [photo i/n] ####---- 42% stage: message. Thread-safe. Redrawn in place
    on a terminal; into a log or a pipe (a TD's render farm), a line of its own each time the
    stage or the tenth of the way changes, not one per frame."""

    def __init__(self, total: int, enabled: bool = True, stream=None, width: int = 24):
        self.total, self.enabled, self.width = total, enabled, width
        self.stream = stream or sys.stderr
        isatty = getattr(self.stream, "isatty", None)
        self.tty = bool(isatty and isatty())
        self.index = 0
        self.name = ""
        self._lock = threading.Lock()
        self._last = ""
        self._logged = None  # (photo name, stage, tenth) of the last line written to a log

    def photo(self, index: int, name: str) -> None:
        self.index, self.name = index, name
        self.update("start", 0.0, "")

    def for_photo(self, index: int, name: str):
        """A progress callback for one of several photos in flight: the bar shows the latest."""
        def update(stage: str, fraction: float | None, message: str) -> None:
            with self._lock:
                self.index, self.name = index, name
            self.update(stage, fraction, message)
        return update

    def update(self, stage: str, fraction: float | None, message: str) -> None:
        if not self.enabled:
            return
        frac = 0.0 if fraction is None else min(1.0, max(0.0, float(fraction)))
        filled = int(round(frac * self.width))
        bar = "#" * filled + "-" * (self.width - filled)
        pct = "  ?%" if fraction is None else f"{frac * 100:3.0f}%"
        line = f"[{self.index}/{self.total}] {self.name[:30]} {bar} {pct} {stage}: {message}"[:118]
        with self._lock:
            if not self.tty:
                key = (self.name, stage, None if fraction is None else int(frac * 10))
                if key != self._logged:
                    self.stream.write(line + "\n")
                    self.stream.flush()
                    self._logged = key
            elif line != self._last:
                self.stream.write("\r" + line.ljust(len(self._last)))
                self.stream.flush()
                self._last = line

    def finish_line(self, text: str = "") -> None:
        if self.enabled:
            with self._lock:
                if not self.tty:
                    if text:
                        self.stream.write(text + "\n")
                else:
                    self.stream.write("\r" + text.ljust(len(self._last)) + "\n")
                self.stream.flush()
                self._last = ""


def parse_tasks(text: str) -> list[str]:
    tasks = [t.strip() for t in text.split(",") if t.strip()]
    bad = [t for t in tasks if t not in TASKS]
    if bad or not tasks:
        raise ValueError(f"unknown task(s) {', '.join(bad) or '(none)'}; choose from {', '.join(TASKS)}")
    return tasks


def write_outputs(maps, out_dir: Path, stem: str, previews: bool = True) -> list[Path]:
    """The photo's .npz and previews, all or none: each is written under its temporary name and
    they replace their outputs only once every one is complete (a full disk halfway leaves no
    .npz of a photo reported FAILED, nor some of its previews)."""
    import contextlib

    from ..core.files.atomic import atomic_output
    from ..core.maps.png import write_png

    outputs = {out_dir / f"{stem}.npz": maps.save}
    if previews:
        from ..core.maps.previews import all_previews

        for suffix, pixels in all_previews(maps).items():
            outputs[out_dir / f"{stem}_{suffix}.png"] = lambda tmp, pixels=pixels: write_png(tmp, pixels)
    with contextlib.ExitStack() as stack:
        for path, write in outputs.items():
            write(stack.enter_context(atomic_output(path)))
    return list(outputs)


def _server_env(args) -> dict[str, str]:
    env = {}
    if args.device and args.device != "auto":
        env["SAPIENS_DEVICE"] = args.device
    if args.precision and args.precision != "auto":
        env["SAPIENS_PRECISION"] = args.precision
    return env


def run(args) -> int:
    from ..core.remote import body_calls
    from ..core.build.options import BodyMode
    from ..core.errors import SapiensServerError
    from ..core.maps.canonical import MapsError

    if args.parallel < 1:
        print("error: --parallel must be at least 1", file=sys.stderr)
        return 2
    try:
        tasks = parse_tasks(args.tasks)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    photos = [Path(p) for p in args.photos]
    missing = [str(p) for p in photos if not p.is_file()]
    if missing:
        print(f"error: no such photo: {', '.join(missing)}", file=sys.stderr)
        return 2
    from ..core.files.atomic import check_writable

    out_dir = Path(args.out)
    try:
        check_writable([out_dir / f"{p.stem}.npz" for p in photos])
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    stems = [p.stem for p in photos]
    if len(set(stems)) != len(stems):
        print("error: two photos share a file name stem; their outputs would overwrite each other",
              file=sys.stderr)
        return 2

    bar = ProgressBar(len(photos), enabled=not args.quiet)
    server = None
    try:
        if args.server:
            from ..core.remote.client import V2Client

            if args.device or args.precision:
                print("note: --device/--precision apply to a server started here, not to --server",
                      file=sys.stderr)
            client = V2Client(args.server, server_token(args))
        else:
            from ..core.local_server.process import ServerProcess

            bar.update("server", None, "starting the inference server")
            server = ServerProcess(python=args.python, env=_server_env(args))
            client = server.ensure_running()
        # --fit: the server fits the bodies to the maps it makes, in the same request
        body = BodyMode.CLOTHED if getattr(args, "fit", False) else BodyMode.NONE

        def analyze_one(i: int, photo: Path):
            start = time.perf_counter()
            try:
                maps, notes = body_calls.analyze(client, photo, args.model, body, tasks=tasks,
                                                 max_side=args.max_side, flip_test=args.flip_test,
                                                 progress=bar.for_photo(i, photo.name))
                for note in notes:
                    print(f"note: {photo}: {note}", file=sys.stderr)
                written = write_outputs(maps, out_dir, photo.stem, previews=not args.no_previews)
            except (SapiensServerError, MapsError, OSError, ValueError) as exc:
                return i, photo, exc, None, [], time.perf_counter() - start
            return i, photo, None, maps, written, time.perf_counter() - start

        failures = 0
        workers = max(1, min(args.parallel, len(photos)))
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="analyze") as pool:
            futures = [pool.submit(analyze_one, i, photo) for i, photo in enumerate(photos, start=1)]
            for future in as_completed(futures):
                i, photo, exc, maps, written, seconds = future.result()
                if exc is not None:
                    failures += 1
                    bar.finish_line(f"[{i}/{len(photos)}] {photo.name}: FAILED")
                    print(f"error: {photo}: {exc}", file=sys.stderr)
                    continue
                people = len(maps.person_ids)
                bar.finish_line(f"[{i}/{len(photos)}] {photo.name}: {people} "
                                f"{'person' if people == 1 else 'people'}, {maps.width}x{maps.height}, "
                                f"{maps.source}, {seconds:.1f} s")
                if people == 0:
                    print(f"note: {photo}: no person found; the maps are empty", file=sys.stderr)
                for path in written:
                    print(path)
        return 1 if failures else 0
    except SapiensServerError as exc:
        bar.finish_line()
        print(f"error: {exc}", file=sys.stderr)
        return 1
    finally:
        if server is not None:
            server.stop()
