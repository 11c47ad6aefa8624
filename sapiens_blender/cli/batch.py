# SPDX-License-Identifier: GPL-3.0-or-later
"""`sapiens-blender batch DIR --out DIR`: build every photo (or maps .npz) of a folder.

Design (why):
- Builder *processes*, not threads: bpy is one scene per process and not thread-safe. Each worker
  imports bpy once and builds many inputs (a fresh empty scene per input, so names and outputs do
  not depend on what it built before). Workers speak JSON lines on a private pipe; Blender's own
  console chatter goes to stderr.
- One failed input is reported and the rest go on; a crashed worker is replaced.
- Outputs are written atomically (temp + ``os.replace``), so an output that exists is complete:
  a re-run skips inputs whose outputs all exist, and an interrupted run leaves no partial output.
  Temporary files of a killed run are removed at the next start.
- Photos go through one shared inference server: ``--server URL`` or one local server started
  here for the whole batch; workers only receive its address and token.
- ``--engine ray`` runs the same jobs on a Ray cluster (batch/ray_engine.py): planning,
  skipping and the per-job build code (batch/build_job.py) are shared with this engine.
"""

from __future__ import annotations

import json
import os
import selectors
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from ..batch.plan import FORMATS, is_photo, plan_batch
from .build import add_geometry_arguments, check_geometry_args, option_values
from .server_args import TOKEN_HELP, server_token

ENGINES = ("local", "ray")


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "batch", help="build every photo or maps .npz of a folder (resumable, several processes)",
        description="Build each photo (through one shared inference server) or maps .npz in DIR "
                    "into OUT/<name>.<format>. Re-running skips finished inputs.",
    )
    p.add_argument("input_dir", metavar="DIR", help="folder of photos and/or maps .npz files")
    p.add_argument("--out", required=True, metavar="DIR", help="output folder")
    p.add_argument("--format", default="glb", help=f"comma-separated formats: {', '.join(FORMATS)} (default glb)")
    p.add_argument("--jobs", type=int, default=max(1, min(4, (os.cpu_count() or 2) // 2)),
                   help="builder processes (default: half the CPU cores, at most 4)")
    p.add_argument("--model", default=None, help="model for photos (default: auto)")
    p.add_argument("--server", metavar="URL", help="use a running server instead of starting a local one")
    p.add_argument("--token", help=TOKEN_HELP)
    p.add_argument("--force", action="store_true", help="rebuild inputs whose outputs already exist")
    p.add_argument("--scan", action="store_true",
                   help="each sub-folder of DIR is one person's views (a clip's frames, photos or maps): one "
                        "scanned body per sub-folder (see `scan`)")
    p.add_argument("--backend-module", action="append", default=[], metavar="MODULE",
                   help="import MODULE to register extra inference backends (repeatable)")
    cluster = p.add_argument_group("cluster (docs/scaling.md)")
    cluster.add_argument("--engine", choices=ENGINES, default="local",
                         help="local: builder processes on this machine (default); ray: a Ray cluster")
    cluster.add_argument("--address", metavar="ADDR",
                         help="the Ray cluster to use (auto on a cluster node, or HEAD:6379); default: a local "
                              "cluster on this machine's cores, started for the run and shut down after")
    cluster.add_argument("--batch-size", type=int, default=4,
                         help="photos per analysis call on an inference actor (ray, default 4)")
    cluster.add_argument("--local-cpus", type=int, metavar="N",
                         help="cores of the local cluster started without --address (default: all)")
    cluster.add_argument("--local-object-store-mb", type=int, metavar="MB",
                         help="object store of that local cluster (default: Ray's, 30%% of memory)")
    add_geometry_arguments(p)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..core.files.atomic import check_writable, remove_stale_temp_files

    src, out = Path(args.input_dir), Path(args.out)
    formats = [f.strip().lower().lstrip(".") for f in args.format.split(",") if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    problem = _usage_problem(args, src, formats, bad)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        check_writable([out / f"probe.{formats[0]}"])
    except OSError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    stale = remove_stale_temp_files(out)
    if stale:
        print(f"removed {len(stale)} temporary file(s) of an interrupted run", file=sys.stderr)

    plan = plan_batch(src, out, formats, args.force, lambda outputs: option_values(args, outputs), scan=args.scan)
    jobs, failures = plan.jobs, plan.failures
    progress = Progress(plan.total, plan.skipped, len(failures))
    if args.engine == "ray":
        return _finish(_run_on_ray(args, jobs, progress, failures), progress, failures, out, plan.ignored)
    server = None
    restore = _sigterm_interrupts()
    try:
        if any(j.get("scan") or needs_server(Path(j["input"]), bool(args.body)) for j in jobs):
            server, problem = _server(args)
            for j in jobs:
                j.update(model=args.model, server=server and server["url"], token=server and server["token"])
                if problem and (j.get("scan") or needs_server(Path(j["input"]), bool(args.body))):
                    j["error"] = problem
        for job in [j for j in jobs if "error" in j]:
            failures[Path(job["input"]).name] = job["error"]
            progress.step(ok=False)
        run_workers([j for j in jobs if "error" not in j], args.jobs, progress, failures)
    finally:
        restore()
        if server and server.get("process"):
            server["process"].stop()
    return _finish(None, progress, failures, out, plan.ignored)


def _usage_problem(args, src: Path, formats: list[str], bad: list[str]) -> str | None:
    geometry = check_geometry_args(args)
    if geometry:
        return geometry
    if not src.is_dir():
        return f"no such folder: {src}"
    if bad:
        return f"unknown format {bad[0]!r}: use {', '.join(FORMATS)}"
    if not formats:
        return "no format given"
    if args.jobs < 1 or args.batch_size < 1:
        return "--jobs and --batch-size must be at least 1"
    if args.engine != "ray" and (args.address or args.local_cpus or args.local_object_store_mb):
        return "--address and --local-* need --engine ray"
    if args.address and (args.local_cpus or args.local_object_store_mb):
        return "--local-* apply to the local cluster started without --address"
    if (args.local_cpus is not None and args.local_cpus < 1) or (
            args.local_object_store_mb is not None and args.local_object_store_mb < 100):
        return "--local-cpus must be at least 1 and --local-object-store-mb at least 100"
    if args.scan and args.engine == "ray":
        return "--scan runs on the local engine (one scan is one fit over all its views)"
    if args.engine == "ray" and (args.server or args.token):
        return "--server/--token do not apply to --engine ray: the cluster's own actors run the model"
    return None


def _run_on_ray(args, jobs, progress, failures) -> str | None:
    """The jobs on Ray; a reason when the cluster could not run them at all."""
    from ..batch.ray_engine import RayEngineError, RayOptions, run_on_ray

    options = RayOptions(address=args.address, model=args.model or "auto",
                         backend_modules=tuple(args.backend_module), batch_size=args.batch_size,
                         local_cpus=args.local_cpus, local_object_store_mb=args.local_object_store_mb)
    try:
        run_on_ray(jobs, progress, failures, options)
    except RayEngineError as exc:
        return str(exc)
    return None


def _finish(fatal: str | None, progress, failures: dict, out: Path, ignored: dict | None = None) -> int:
    progress.close()
    if fatal:
        print(f"error: {fatal}", file=sys.stderr)
        return 1
    for name, reason in sorted(failures.items()):
        print(f"failed: {name}: {reason}", file=sys.stderr)
    for name, why in sorted((ignored or {}).items()):
        print(f"ignored: {name}: {why}", file=sys.stderr)
    extra = f", {len(ignored)} ignored (not files)" if ignored else ""
    print(f"done: {progress.ok} built, {progress.skipped} already done, {len(failures)} failed{extra} "
          f"(outputs in {out})")
    return 1 if failures else 0


def needs_server(path: Path, body: bool) -> bool:
    """Photos are analysed by the server; maps only when a body is asked for and they hold no fit."""
    if is_photo({"input": str(path)}):
        return True
    if not body:
        return False
    import numpy as np

    try:
        with np.load(path, allow_pickle=False) as npz:  # reads the zip's directory only
            return "fit_person_ids" not in npz.files
    except (OSError, ValueError):
        return False  # the worker reports the unreadable file


def _sigterm_interrupts():
    """Make SIGTERM (``kill PID``) unwind like Ctrl+C, so the builders and the server this
    batch started are stopped with it. Returns the function that restores the old handler."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread() or not hasattr(signal, "SIGTERM"):
        return lambda: None

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    return lambda: signal.signal(signal.SIGTERM, previous)


def _server(args):
    """({'url', 'token', 'process'}, None) or (None, why the server is unavailable)."""
    if args.server:
        return {"url": args.server, "token": server_token(args)}, None
    from ..core.errors import SapiensServerError
    from ..core.local_server.process import ServerProcess

    process = ServerProcess(extra_args=[a for m in args.backend_module for a in ("--backend-module", m)])
    try:
        client = process.ensure_running()
    except SapiensServerError as exc:
        return None, f"the inference server could not start: {exc}"
    return {"url": process.url, "token": client.token, "process": process}, None


class Progress:
    """A one-line progress bar on stderr (a line per input when stderr is not a terminal)."""

    def __init__(self, total: int, skipped: int, failed: int):
        self.total, self.skipped, self.failed, self.ok = total, skipped, failed, 0
        self.tty = sys.stderr.isatty()
        self.started = time.monotonic()
        self._draw("")

    def step(self, ok: bool, name: str = "") -> None:
        if ok:
            self.ok += 1
        else:
            self.failed += 1
        self._draw(name)

    def _draw(self, name: str) -> None:
        done = self.ok + self.skipped + self.failed
        width = 30
        filled = int(width * done / self.total) if self.total else width
        line = (f"[{'#' * filled}{'.' * (width - filled)}] {done}/{self.total}  built {self.ok}  "
                f"skipped {self.skipped}  failed {self.failed}  {time.monotonic() - self.started:.0f}s")
        if self.tty:
            sys.stderr.write("\r" + line[:200])
        elif name:
            sys.stderr.write(f"{line}  {name}\n")
        sys.stderr.flush()

    def close(self) -> None:
        if self.tty:
            sys.stderr.write("\n")


def run_workers(jobs: list[dict], n_workers: int, progress: Progress, failures: dict) -> None:
    """Hand jobs one at a time to idle worker processes until all are finished."""
    pending = list(reversed(jobs))
    selector = selectors.DefaultSelector()
    workers: list[Worker] = []
    finished = False
    try:
        for _ in range(min(n_workers, len(jobs))):
            workers.append(Worker(selector))
        for w in workers:
            if pending:
                w.send(pending.pop())
        while any(w.job for w in workers):
            for key, _ in selector.select(timeout=1.0):
                worker = key.data
                reply = worker.read_reply()
                if reply is None:  # the process died: report its job, replace the worker
                    job = worker.job
                    if job is None:
                        worker.close()
                        workers.remove(worker)
                        continue
                    failures[Path(job["input"]).name] = f"builder process crashed ({worker.exit_status()})"
                    progress.step(ok=False, name=Path(job["input"]).name)
                    worker.close()
                    workers.remove(worker)
                    if pending:
                        fresh = Worker(selector)
                        workers.append(fresh)
                        fresh.send(pending.pop())
                    continue
                name = Path(worker.job["input"]).name
                if not reply.get("ok"):
                    failures[name] = reply.get("error", "unknown error")
                progress.step(ok=bool(reply.get("ok")), name=name)
                worker.job = None
                if pending:
                    worker.send(pending.pop())
        finished = True
    finally:
        for w in workers:
            w.close(kill=not finished)  # interrupted: stop the builders now, not after their job


class Worker:
    """One builder process (``sapiens_blender.cli.batch_worker``), fed one job at a time."""

    def __init__(self, selector):
        self.log = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(
            [sys.executable, "-c", "from sapiens_blender.cli.batch_worker import main; main()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.log, bufsize=0,
            env={**os.environ, "SAPIENS_BATCH_PID": str(os.getpid())},  # see batch_worker.py
        )
        self.selector = selector
        self.job: dict | None = None
        self._buffer = b""
        selector.register(self.proc.stdout, selectors.EVENT_READ, self)

    def send(self, job: dict) -> None:
        self.job = job
        self.proc.stdin.write((json.dumps(job) + "\n").encode())

    def read_reply(self) -> dict | None:
        while b"\n" not in self._buffer:
            chunk = os.read(self.proc.stdout.fileno(), 65536)
            if not chunk:
                return None
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return json.loads(line)

    def exit_status(self) -> str:
        code = self.proc.wait(timeout=10)
        return f"signal {-code}" if code < 0 else f"exit code {code}"

    def close(self, kill: bool = False) -> None:
        try:
            self.selector.unregister(self.proc.stdout)
        except (KeyError, ValueError):
            pass
        if kill and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        if self.proc.poll() is None:
            try:
                self.proc.stdin.close()  # the worker exits at end of input
                self.proc.wait(timeout=10)
            except (OSError, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()
        self.proc.stdout.close()
        self.log.close()
