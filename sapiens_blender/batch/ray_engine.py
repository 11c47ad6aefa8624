# SPDX-License-Identifier: GPL-3.0-or-later
"""The Ray engine: the batch of cli/batch.py on a Ray cluster, with the same outputs.

- Ray Data reads the photos (``read_binary_files``: any node can read them from a shared path)
  and feeds an actor pool stage, ``inference_server.dataplane.batch_analyzer.PhotoAnalyzer``: one actor
  per GPU with ``num_gpus=1`` where the cluster has GPUs, else one on a CPU. Each keeps its
  backend loaded and analyses photos in batches.
- Every build is a Ray task (one CPU) running :func:`build_job`, the local builder's own code, in
  a Ray worker *process* (bpy is one scene per process; worker processes are reused, so bpy is
  imported once per worker). Maps .npz inputs go straight to the builders.
- Builds start as soon as their photo is analysed (analysis and builds overlap) and are capped
  in flight, so Ray Data slows the analysis down when builders fall behind.
- Outputs are written atomically by the builders into OUT, which must be a path every node
  sees (a shared filesystem). One failed input is reported and the rest go on; a builder
  process that dies is retried by Ray, then reported.
- Without an address a local cluster is started for the run on this machine's cores and shut
  down after, leaving no Ray process behind.

This module imports ray only when run, and never torch: the analysis actors run in their own
processes.
"""

from __future__ import annotations

import io
import logging
import os
import queue
import signal
import socket
import threading
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

from .plan import is_photo
from ..core.errors import SapiensError

INSTALL_HINT = "the Ray engine needs Ray: pip install 'sapiens-blender[cluster]'"


class RayEngineError(SapiensError, RuntimeError):
    """The cluster cannot run the batch at all (Ray missing, address unreachable)."""


@dataclass
class RayOptions:
    address: str | None = None  # a running cluster ("auto", "head:6379"; "ray://head:10001" untested)
    model: str = "auto"
    backend_modules: tuple[str, ...] = ()  # extra inference backends to register in the actors
    batch_size: int = 4  # photos per analysis call
    analysis_actors: int | None = None  # default: one per GPU, else one
    local_cpus: int | None = None  # cores of a local cluster (default: all of this machine's)
    local_object_store_mb: int | None = None  # object store of a local cluster (default: Ray's)
    replies: dict = field(default_factory=dict)  # filled: input file name -> the build's reply
    timings: dict = field(default_factory=dict)  # filled: seconds to connect/start and to shut down


class Interrupts:
    """Ctrl+C and SIGTERM during a run, noted as well as raised. A KeyboardInterrupt raised while
    the main thread is inside Ray's own code can be swallowed there: a full test-suite run once
    went on to the end after its Ctrl+C (exit 1, not 130). The run's loop checks the note every
    turn (``check``), so the interrupt lands within a turn either way. Outside the main thread
    (where Python takes no signal handlers) it notes nothing and only ``check`` is there."""

    def __init__(self):
        self.received = threading.Event()
        self._previous: dict = {}

    def __enter__(self) -> "Interrupts":
        if threading.current_thread() is threading.main_thread():
            for sig in (signal.SIGINT, signal.SIGTERM):
                self._previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler if handler is not None else signal.SIG_DFL)
        self._previous = {}

    def _handle(self, signum, frame) -> None:
        self.received.set()
        raise KeyboardInterrupt

    def check(self) -> None:
        if self.received.is_set():
            raise KeyboardInterrupt


def run_on_ray(jobs: list[dict], progress, failures: dict, options: RayOptions) -> None:
    """Build ``jobs`` on Ray; ``progress.step(ok, name)`` per finished input, ``failures[name]``
    for each that failed."""
    # No implicit ray.init(): a Ray call still running in the analysis thread after the shutdown
    # (Ctrl-C, SIGTERM) would otherwise start a fresh local cluster that outlives the batch.
    os.environ["RAY_ENABLE_AUTO_CONNECT"] = "0"
    try:
        import ray
        from ray._private import auto_init_hook
    except ImportError:
        raise RayEngineError(INSTALL_HINT) from None
    auto_init_hook.enable_auto_connect = False  # read at import: ray may have been imported before
    start = time.perf_counter()
    started_here = _connect(ray, options)
    options.timings["connect"] = time.perf_counter() - start
    try:
        with Interrupts() as interrupts:
            _run(ray, jobs, progress, failures, options, interrupts)
    finally:
        start = time.perf_counter()
        # An interrupted analysis stage complains at length once Ray is gone: not news.
        logging.getLogger("ray.data").setLevel(logging.CRITICAL)
        if started_here or ray.is_initialized():
            ray.shutdown()
        options.timings["shutdown"] = time.perf_counter() - start


def _connect(ray, options: RayOptions) -> bool:
    """Connect to the cluster (True when a local one was started for this run)."""
    # Workers' output stays in Ray's session logs (/tmp/ray/session_*/logs): Blender's console
    # chatter must not flood the progress bar; failures reach the driver as replies.
    quiet = {"log_to_driver": False, "logging_level": logging.ERROR, "configure_logging": True}
    if options.address:
        check_reachable(options.address)
        try:
            ray.init(address=options.address, runtime_env={"env_vars": forwarded_environment()}, **quiet)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise RayEngineError(f"cannot connect to the Ray cluster at {options.address}: {exc}") from None
        return False
    local = {"num_cpus": options.local_cpus or os.cpu_count() or 1, "include_dashboard": False}
    if options.local_object_store_mb:
        local["object_store_memory"] = options.local_object_store_mb * 1024 * 1024
    ray.init(**local, **quiet)
    return True


def check_reachable(address: str, timeout: float = 5.0) -> None:
    """Fail fast on a cluster address nothing answers at: Ray itself retries for minutes."""
    if address == "auto":
        return
    host, _, port = address.removeprefix("ray://").rpartition(":")
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except ValueError:
        raise RayEngineError(f"the Ray address {address!r} is not HOST:PORT, ray://HOST:PORT or auto") from None
    except OSError as exc:
        raise RayEngineError(f"cannot reach the Ray cluster at {address}: {exc}") from None


def forwarded_environment() -> dict[str, str]:
    """Model settings of this shell (SAPIENS_WEIGHTS_DIR, SAPIENS_DEVICE, HF_HOME, ...) for the
    cluster's workers; a local cluster's workers inherit them anyway."""
    return {k: v for k, v in os.environ.items() if k.startswith(("SAPIENS_", "HF_"))}


def _run(ray, jobs, progress, failures, options: RayOptions, interrupts: Interrupts) -> None:
    import ray.data

    ray.data.DataContext.get_current().enable_progress_bars = False  # ours is on stderr already
    logging.getLogger("ray.data").setLevel(logging.ERROR)  # its notes are about its own bars
    build = ray.remote(num_cpus=1, max_retries=2)(_build_on_worker)
    # Builds in flight, and analysed photos waiting for a builder: bounded, so that analysis
    # faster than the builders waits (Ray Data backpressure) instead of piling maps up here.
    cap = max(2, 2 * int(ray.cluster_resources().get("CPU", 1)))
    maps_jobs = deque(j for j in jobs if not is_photo(j))
    photos = {_key(j["input"]): j for j in jobs if is_photo(j)}
    analysed: queue.Queue = queue.Queue(maxsize=cap)
    stop = threading.Event()
    if photos:
        threading.Thread(target=_analyse, args=(ray, photos, options, analysed, stop),
                         daemon=True, name="ray-analysis").start()
    pending: dict = {}  # ObjectRef -> (job, analysis seconds or None)
    analysis_done = not photos
    try:
        while maps_jobs or pending or not analysis_done:
            interrupts.check()
            while maps_jobs and len(pending) < cap:  # maps .npz: nothing to analyse
                job = maps_jobs.popleft()
                pending[build.remote(job, None)] = (job, None)
            while not analysis_done and len(pending) < cap:
                try:  # with nothing to wait for, wait for the analysis a little
                    item = analysed.get(timeout=0.2) if not pending else analysed.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    analysis_done = True
                    break
                job, packed, error, seconds = item
                if error:
                    _finish(job, {"ok": False, "error": error}, progress, failures, options)
                else:
                    pending[build.remote(job, packed)] = (job, seconds)
            if pending:
                done, _ = ray.wait(list(pending), num_returns=1, timeout=0.2)
                for ref in done:
                    _collect(ray, ref, *pending.pop(ref), progress, failures, options)
    finally:
        stop.set()


def _collect(ray, ref, job: dict, analysis_seconds, progress, failures, options) -> None:
    try:
        reply = ray.get(ref)
    except ray.exceptions.RayError as exc:  # the worker died (after Ray's retries), was lost, ran out of memory
        reply = {"ok": False, "error": f"builder process lost ({type(exc).__name__}: {_first_line(exc)})"}
    if analysis_seconds is not None and reply.get("ok"):
        reply["timings"] = {"analysis": analysis_seconds, **reply.get("timings", {})}
    _finish(job, reply, progress, failures, options)


def _analyse(ray, photos: dict, options: RayOptions, out: queue.Queue, stop: threading.Event) -> None:
    """The analysis stage (Ray Data: read + actor pool), streamed into ``out`` as
    (job, packed maps, error, seconds); None ends it. Every photo comes out exactly once."""
    from inference_server.dataplane.batch_analyzer import PhotoAnalyzer

    def put(item) -> bool:
        while not stop.is_set():
            try:
                out.put(item, timeout=0.5)
                return True
            except queue.Full:
                continue
        return False

    seen = set()
    reason = "the analysis stage returned nothing for it"
    try:
        gpus = int(ray.cluster_resources().get("GPU", 0))
        actors = options.analysis_actors or max(1, gpus)
        placement = {"num_gpus": 1} if gpus else {"num_cpus": 1}
        dataset = ray.data.read_binary_files(sorted(photos), include_paths=True)
        dataset = dataset.map_batches(
            PhotoAnalyzer, fn_constructor_kwargs={"model": options.model,
                                                  "backend_modules": tuple(options.backend_modules)},
            batch_size=options.batch_size, compute=ray.data.ActorPoolStrategy(size=actors),
            batch_format="numpy", **placement)
        for row in dataset.iter_rows():
            key = _key(row["path"])
            if key in photos and key not in seen:
                seen.add(key)
                if not put((photos[key], row["maps"], row["error"], float(row["analysis_s"]))):
                    return
    except Exception as exc:  # the stage itself failed: every photo not yet analysed fails with it
        reason = f"the analysis stage failed: {type(exc).__name__}: {_first_line(exc)}"
    for key, job in photos.items():
        if key not in seen and not put((job, b"", reason, None)):
            return
    put(None)


def _build_on_worker(job: dict, packed: bytes | None) -> dict:
    """A Ray task: unpack the analysed maps (if any) and build, as a local builder would."""
    from .build_job import build_job

    maps = None
    if packed is not None:
        try:
            maps = unpack_maps(packed)
        except Exception as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
    return build_job(job, maps)


def unpack_maps(packed: bytes):
    """.npz bytes of the v2 output tensors -> Maps, through the client's own conversion."""
    import numpy as np

    from ..core.remote.analysis import maps_from_outputs

    with np.load(io.BytesIO(packed), allow_pickle=False) as npz:
        return maps_from_outputs({name: npz[name] for name in npz.files})


def _finish(job: dict, reply: dict, progress, failures: dict, options: RayOptions) -> None:
    name = Path(job["input"]).name
    options.replies[name] = reply
    if not reply.get("ok"):
        failures[name] = reply.get("error", "unknown error")
    progress.step(ok=bool(reply.get("ok")), name=name)


def _first_line(exc: Exception) -> str:
    return (str(exc).strip().splitlines() or [""])[0]


def _key(path) -> str:
    return os.path.realpath(str(path))
