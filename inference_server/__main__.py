# SPDX-License-Identifier: GPL-3.0-or-later
"""`python -m inference_server`: arguments, token, socket, ready line, watchdog, clean exit.

stdout carries exactly one line, the JSON ready line; everything else (ours, uvicorn's, a
backend's native libraries') is routed to stderr and the log file.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ipaddress
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
from pathlib import Path

from . import __version__
from .http.connection_guard import ConnectionLimits, RateLimitFilter, guarded_protocol, \
    protocol_class, raise_open_file_limit

log = logging.getLogger("inference_server")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m inference_server",
                                description="sapiens_blender inference server (Open Inference Protocol v2)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=0, help="port; 0 = a free one (see the ready line)")
    p.add_argument("--token-file", help="file holding the bearer token, readable by its owner only "
                                        "(default: environment variable SAPIENS_TOKEN)")
    p.add_argument("--allow-remote", action="store_true",
                   help="allow binding a non-loopback address (the token still guards)")
    p.add_argument("--allowed-host", action="append", default=[],
                   help="extra Host header name accepted with --allow-remote (repeatable)")
    p.add_argument("--max-body-bytes", type=int, default=256 * 1024 * 1024)
    p.add_argument("--max-image-pixels", type=int, default=8192 * 8192)
    p.add_argument("--max-json-bytes", type=int, default=8 * 1024 * 1024,
                   help="largest JSON part of a request (parsed JSON costs ~40x its size in "
                        "memory; big tensors must travel binary; default 8 MiB)")
    p.add_argument("--max-header-bytes", type=int, default=64 * 1024,
                   help="largest request line + headers of one request (default 64 KiB; 431 past it)")
    p.add_argument("--header-timeout", type=float, default=10.0,
                   help="seconds a client has to send a request's headers (default 10; 408 after)")
    p.add_argument("--body-timeout", type=float, default=30.0,
                   help="seconds a request body may stall before the connection is closed (default 30)")
    p.add_argument("--max-connections", type=int, default=256,
                   help="open connections at most; at the cap the oldest idle one is closed "
                        "(default 256)")
    p.add_argument("--max-concurrency", type=int, default=1, help="inferences running at once")
    p.add_argument("--max-queue", type=int, default=8, help="inferences waiting; more get 503")
    p.add_argument("--max-batch", type=int, default=4,
                   help="dynamic batching: queued requests for the same Sapiens model with the same "
                        "tasks run as one batch of up to N photos (1 = off; default 4)")
    p.add_argument("--batch-window-ms", type=float, default=5.0,
                   help="how long a worker waits for more requests to batch (default 5 ms)")
    p.add_argument("--weights-dir", metavar="DIR",
                   help="local folder of model weights, searched before the Hugging Face cache "
                        "(<DIR>/<repo name>/...; same as SAPIENS_WEIGHTS_DIR)")
    p.add_argument("--device", choices=["auto", "cpu", "cuda", "mps"] + [f"cuda:{i}" for i in range(16)],
                   help="where the Sapiens models run (same as SAPIENS_DEVICE; default auto)")
    p.add_argument("--fit-device", choices=["auto", "cpu", "cuda"] + [f"cuda:{i}" for i in range(16)],
                   help="where the body fit runs (same as SAPIENS_FIT_DEVICE; default auto = cpu: "
                        "the fit is many small steps, faster on the CPU even beside a GPU)")
    p.add_argument("--fit-compile", action="store_true", default=None,
                   help="torch.compile the body fit's evaluation (same as SAPIENS_FIT_COMPILE=1): "
                        "0.56 instead of 0.63 s per person for two people fitted together on a 2-core "
                        "CPU, no faster for one, after compiling once (minutes the first time, "
                        "cached in the user's cache folder); for batches of groups")
    p.add_argument("--precision", choices=["auto", "fp32", "bf16", "fp16", "int8"],
                   help="Sapiens model precision (same as SAPIENS_PRECISION; default auto)")
    p.add_argument("--compile", choices=["auto", "on", "off"],
                   help="torch.compile the Sapiens backbones (same as SAPIENS_COMPILE; default auto: on "
                        "CUDA when triton is installed; the first request compiles, ~1 min)")
    p.add_argument("--heads", choices=["auto", "fp32", "mixed"],
                   help="precision of the depth and normal heads under a bf16 backbone (same as "
                        "SAPIENS_HEADS; default auto: mixed on CUDA, float32 last layers either way)")
    p.add_argument("--detector", help="person detector repo for the Sapiens models, or 'none' for connected "
                   "components (same as SAPIENS_DETECTOR; default PekingU/rtdetr_r18vd)")
    p.add_argument("--no-autoload", action="store_true",
                   help="answer 409 for unloaded models instead of loading them on first infer")
    p.add_argument("--enable-echo", action="store_true", help="serve the 'echo' diagnostic model")
    p.add_argument("--backend-module", action="append", default=[],
                   help="import this module to register extra backends (repeatable)")
    p.add_argument("--parent-pid", type=int, help="exit when this process dies")
    p.add_argument("--log-file", help="log file (default: server-<pid>.log in the per-user log "
                                      "folder, see sapiens_blender.core.user_dirs)")
    p.add_argument("--http", default="auto", choices=["auto", "h11", "httptools"],
                   help="HTTP/1.1 parser (auto: httptools when installed, it is faster)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return p.parse_args(argv)


def _model_settings(args):
    """The backends' settings: the flags over the environment (SAPIENS_*), read once here and
    passed to every backend (backends/settings.py)."""
    from .backends.settings import SapiensSettings

    folder = None
    if args.weights_dir:
        folder = Path(args.weights_dir).expanduser()
        if not folder.is_dir():
            raise ValueError(f"--weights-dir {folder} is not a folder")
        folder = folder.resolve()
    return SapiensSettings.from_env(device=args.device or None, precision=args.precision or None,
                                    compile=args.compile or None, heads=args.heads or None,
                                    weights_dir=folder, detector=args.detector or None)


def _fit_settings(args):
    """The body fit's settings: --fit-device / --fit-compile over SAPIENS_FIT_* (fit/settings.py)."""
    from .fit.settings import FitServerSettings

    return FitServerSettings.from_env(device=args.fit_device or None, compile=args.fit_compile)


def _setup_logging(args) -> Path:
    from .log_files import open_log_file, private_log_dir, prune_old_logs

    if args.log_file:
        path = Path(args.log_file)
        stream = open_log_file(path, exclusive=False)
    else:
        folder = private_log_dir()
        prune_old_logs(folder, max_age_s=3 * 24 * 3600)
        path = folder / f"server-{os.getpid()}.log"
        stream = open_log_file(path, exclusive=True)
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    handlers = [logging.StreamHandler(sys.stderr), logging.StreamHandler(stream)]
    root = logging.getLogger()
    root.setLevel(args.log_level.upper())
    quiet = RateLimitFilter(interval_s=10.0)  # a flood must not become gigabytes of log
    for h in handlers:
        h.setFormatter(fmt)
        h.addFilter(quiet)
        root.addHandler(h)
    return path


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _read_token(args) -> str:
    from .http.security import read_token_file

    if args.token_file:
        return read_token_file(args.token_file)
    token = os.environ.get("SAPIENS_TOKEN", "").strip()
    if not token:
        raise ValueError("no token: set SAPIENS_TOKEN or pass --token-file (a file only you can "
                         "read); the server refuses to run unauthenticated")
    return token


def _bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    # proto must be IPPROTO_TCP explicitly: asyncio only sets TCP_NODELAY on accepted sockets
    # whose proto says TCP, and without it Nagle + delayed ACK add ~40 ms to every answer.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    if os.name == "posix":  # on Windows SO_REUSEADDR would let another process steal the port
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host.strip("[]"), port))
    sock.listen(128)
    return sock


def process_alive(pid: int) -> bool:
    """True while ``pid`` runs (a zombie counts as dead)."""
    if os.name == "nt":
        import ctypes

        kernel32 = ctypes.windll.kernel32
        handle = kernel32.OpenProcess(0x00100000, False, pid)  # SYNCHRONIZE
        if not handle:
            return False
        try:
            return kernel32.WaitForSingleObject(handle, 0) == 0x102  # WAIT_TIMEOUT: still running
        finally:
            kernel32.CloseHandle(handle)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):  # Linux: zombies still answer kill(0)
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat.rsplit(")", 1)[1].split()[0] != "Z"
    return True


def _watch_parent(pid: int, on_death) -> None:
    def loop():
        while process_alive(pid):
            time.sleep(0.5)
        log.warning("parent process %d is gone; shutting down", pid)
        on_death()

    threading.Thread(target=loop, name="parent-watchdog", daemon=True).start()


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # The ready line gets the real stdout; fd 1 itself now points at stderr, so stray prints
    # (ours or a native library's) can never corrupt the launcher's protocol.
    ready_out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    try:
        log_path = _setup_logging(args)
    except OSError as exc:
        print(f"cannot start: cannot open the log file: {exc}", file=sys.stderr)
        return 2
    log.info("sapiens_blender inference server %s, log file %s", __version__, log_path)
    try:
        token = _read_token(args)
        model_settings, fit_settings = _model_settings(args), _fit_settings(args)
        if args.max_batch < 1 or not 0 <= args.batch_window_ms <= 1000:
            raise ValueError("--max-batch must be >= 1 and --batch-window-ms in 0..1000")
        if min(args.max_header_bytes, args.max_connections) < 1 or \
                min(args.header_timeout, args.body_timeout) <= 0:
            raise ValueError("--max-header-bytes, --max-connections, --header-timeout and "
                             "--body-timeout must be positive")
        if not _is_loopback(args.host) and not args.allow_remote:
            raise ValueError(f"--host {args.host} is not a loopback address; serving the network "
                             f"needs --allow-remote (and the token)")
        sock = _bind(args.host, args.port)
    except (OSError, ValueError) as exc:
        log.error("cannot start: %s", exc)
        return 2

    import uvicorn

    from .http.app import ServerConfig, create_app
    from .backends import catalog

    try:
        found = catalog.register_builtin(model_settings, fit_settings)
        catalog.import_extra(args.backend_module)
    except Exception as exc:
        log.exception("cannot start: a backend module failed to import: %s", exc)
        return 1
    log.info("backend modules: %s", ", ".join(found + args.backend_module) or "none")
    port = sock.getsockname()[1]
    config = ServerConfig(
        token=token, port=port, max_body_bytes=args.max_body_bytes,
        max_image_pixels=args.max_image_pixels, max_json_bytes=args.max_json_bytes,
        max_concurrency=args.max_concurrency,
        max_queue=args.max_queue, max_batch=args.max_batch,
        batch_window_ms=args.batch_window_ms, autoload=not args.no_autoload, enable_echo=args.enable_echo,
        any_host=args.allow_remote and not args.allowed_host and not _is_loopback(args.host),
        # The bind address itself is always a valid Host (127.0.0.2 is loopback too).
        extra_hosts=[args.host, *(args.allowed_host if args.allow_remote else [])])
    asgi, jobs = create_app(config)
    # Each connection holds a file handle: keep the cap well inside the process's file limit.
    # (A burst of accepts can still briefly pass it: asyncio then pauses accepting for 1 s
    # and the rate-limited log says so once; evicted idle connections free the handles.)
    files = raise_open_file_limit(4096)
    limits = ConnectionLimits(
        max_header_bytes=args.max_header_bytes, header_timeout_s=args.header_timeout,
        body_idle_timeout_s=args.body_timeout, max_body_bytes=args.max_body_bytes,
        max_connections=max(1, min(args.max_connections, files - 128)))
    protocol = guarded_protocol(protocol_class(args.http), limits)
    server = _Server(uvicorn.Config(asgi, http=protocol, ws="none", log_config=None, lifespan="off",
                                    access_log=False, timeout_graceful_shutdown=10,
                                    h11_max_incomplete_event_size=args.max_header_bytes,
                                    timeout_keep_alive=60), jobs.shutdown)
    if args.parent_pid:
        _watch_parent(args.parent_pid, server.request_exit)
    ready = {"host": args.host, "port": port, "pid": os.getpid(), "version": __version__}
    asyncio.run(_serve(server, sock, ready, ready_out))
    log.info("server stopped")
    return 0


async def _serve(server, sock, ready: dict, out) -> None:
    async def announce():
        while not server.started and not server.should_exit:
            await asyncio.sleep(0.01)
        if server.started:
            out.write(json.dumps(ready) + "\n")
            out.flush()
            log.info("serving on http://%s:%d", ready["host"], ready["port"])

    task = asyncio.create_task(announce())
    await server.serve(sockets=[sock])
    task.cancel()


def _server_class():
    import uvicorn

    class Server(uvicorn.Server):
        """uvicorn re-raises the signal after a graceful stop (exit code -15); we exit 0."""

        def __init__(self, config, on_exit):
            super().__init__(config)
            self._on_exit = on_exit

        def request_exit(self) -> None:
            self._on_exit()
            self.should_exit = True

        def handle_exit(self, sig, frame) -> None:
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            self.request_exit()

    return Server


def _Server(config, on_exit):
    return _server_class()(config, on_exit)


if __name__ == "__main__":
    sys.exit(main())
