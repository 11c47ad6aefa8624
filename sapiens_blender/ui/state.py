# SPDX-License-Identifier: GPL-3.0-or-later
"""The add-on's session state (bpy-free): server connection, the running job, the last error.

The panel draws from `SESSION.panel_state()`; operators change the session. Nothing here
touches bpy, so the whole state machine is testable in plain Python.
"""

from __future__ import annotations

import http.client
import os
import shlex
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import SapiensServerError, ServerNotRunning
from ..core.jobs import RUNNING, Job
from ..core.server_process import default_source_root
from ..core.server_runtime import resolve_runtime

# What the panel shows (one of these at a time).
NO_SERVER, STARTING, READY, BUSY, ERROR = "no server", "starting", "ready", "running", "error"
LOCAL, REMOTE = "LOCAL", "REMOTE"


def addon_dir() -> Path:
    return Path(__file__).resolve().parents[1]


def server_source_root() -> Path:
    """The folder that holds `inference_server/` (see core.server_process.default_source_root)."""
    return default_source_root()


@dataclass(frozen=True)
class ServerConfig:
    """Everything the preferences say about reaching a server (a snapshot, thread-safe)."""

    mode: str = LOCAL
    python: str = ""
    url: str = ""
    token: str = ""
    model: str = "auto"
    device: str = "auto"
    precision: str = "auto"
    weights_dir: str = ""
    online: bool = False
    extra_args: tuple[str, ...] = ()
    extra_pythonpath: str = ""  # folders of extra --backend-module plugins
    startup_timeout: float = 180.0

    def environment(self) -> dict[str, str]:
        """Server-side settings travel as environment variables of the server process."""
        env = {"SAPIENS_DEVICE": self.device, "SAPIENS_PRECISION": self.precision}
        if self.weights_dir:
            env["HF_HOME"] = self.weights_dir
            env["SAPIENS_WEIGHTS_DIR"] = self.weights_dir
        if self.extra_pythonpath:
            env["PYTHONPATH"] = os.pathsep.join([str(server_source_root()), self.extra_pythonpath])
        if not self.online:
            # Blender's "Allow Online Access" is off: weights must already be in the cache.
            env["HF_HUB_OFFLINE"] = "1"
        return env

    def process_key(self) -> tuple:
        """A local server must be restarted when any of these change."""
        return (self.python, self.extra_args, tuple(sorted(self.environment().items())))


def parse_extra_args(text: str) -> tuple[str, ...]:
    try:
        return tuple(shlex.split(text or ""))
    except ValueError as exc:
        raise ValueError(f"Extra server arguments cannot be parsed: {exc}") from None


def offline_hint(config: ServerConfig) -> str:
    if config.online:
        return ""
    return ("Online access is off (Preferences > System > Network > Allow Online Access), so "
            "model weights are not downloaded. Allow online access once, or put the weights "
            f"into {config.weights_dir or 'the weights folder'}, or use the offline 'mediapipe' model.")


@dataclass
class Session:
    """One per Blender session; lives in this module (reset when the add-on is re-enabled)."""

    server: object | None = None  # core.server_process.ServerProcess (local mode)
    server_key: tuple | None = None
    remote_client: object | None = None  # core.client.V2Client (remote mode)
    remote_key: tuple | None = None
    job: Job | None = None
    job_kind: str = ""
    last_error: str = ""
    last_info: str = ""
    check_result: dict = field(default_factory=dict)
    setup_job: Job | None = None
    check_job: Job | None = None
    setup_log: str = ""
    lock: threading.RLock = field(default_factory=threading.RLock)

    # -- what the panel shows ---------------------------------------------------------------
    def job_running(self) -> bool:
        return self.job is not None and self.job.state == RUNNING

    def server_state(self) -> str:
        """Lock-free on purpose: ServerProcess holds its lock for the whole start-up, and the
        panel calls this while drawing, so status() would freeze the UI until the server is up."""
        if self.remote_client is not None:
            return "ready"
        server = self.server
        if server is None:
            return "stopped"
        current = server.state
        if current == "ready" and not server.is_running():
            return "error"  # crashed since; ensure_running() restarts it on the next click
        return current

    def server_detail(self) -> tuple[str, str]:
        """(url, last error) of the local server, lock-free like server_state()."""
        server = self.server
        if server is None:
            return "", ""
        return server.url, server.last_error or (
            "the inference server stopped unexpectedly" if self.server_state() == "error" else "")

    def panel_state(self) -> str:
        if self.job_running():
            return STARTING if self.job_kind == "start server" else BUSY
        if self.last_error:
            return ERROR
        return READY if self.server_state() == "ready" else NO_SERVER

    def set_error(self, error: BaseException | str) -> str:
        self.last_error = describe_error(error)
        return self.last_error

    def clear_error(self) -> None:
        self.last_error = ""

    # -- the server ---------------------------------------------------------------------------
    def connect(self, config: ServerConfig):
        """A ready V2Client for `config`, starting (or restarting) the local server as needed.
        Runs on a worker thread; raises SapiensServerError subclasses with clear messages."""
        if config.mode == REMOTE:
            return self._remote(config)
        from ..core.server_process import ServerProcess

        with self.lock:
            if self.server is not None and self.server_key != config.process_key():
                self.server.stop()
                self.server = None
            if self.server is None:
                runtime = resolve_runtime(config.python, server_source_root(), config.extra_pythonpath)
                env = dict(config.environment(), PYTHONPATH=os.pathsep.join(runtime.pythonpath))
                self.server = ServerProcess(
                    python=runtime.python, extra_args=list(config.extra_args),
                    startup_timeout=config.startup_timeout, source_root=server_source_root(),
                    env=env, interpreter_args=runtime.interpreter_args,
                )
                self.server_key = config.process_key()
            server = self.server
        client = server.ensure_running()
        try:
            client.live(timeout=5)
        except ServerNotRunning:
            # Killed moments ago: its socket is gone but the process is not reaped yet, so
            # ensure_running() still saw it alive. Start a fresh one.
            client = server.start()
        return client

    def _remote(self, config: ServerConfig):
        from ..core.client import V2Client

        key = (config.url, config.token)
        with self.lock:
            if self.remote_client is None or self.remote_key != key:
                if not config.url:
                    raise ServerNotRunning("No server URL is set: enter it in the add-on preferences.")
                try:
                    client = V2Client(config.url, config.token or None)
                except ValueError as exc:
                    raise ServerNotRunning(f"The server URL is not valid: {exc}") from None
                client.live(timeout=10)
                self.remote_client, self.remote_key = client, key
            return self.remote_client

    def stop_server(self) -> None:
        with self.lock:
            if self.server is not None:
                self.server.stop()
            if self.remote_client is not None:
                self.remote_client.close()
            self.remote_client = self.remote_key = None

    def current_client(self):
        """The client of a server already running, or None (never starts one)."""
        if self.remote_client is not None:
            return self.remote_client
        if self.server is not None and self.server_state() == "ready":
            return self.server.ensure_running()
        return None

    def shutdown(self) -> None:
        """Blender quits / the add-on is disabled: cancel work and stop the server."""
        for job in (self.job, self.setup_job, self.check_job):
            if job is not None:
                job.cancel()
        self.stop_server()
        self.server = self.server_key = None


def describe_error(error: BaseException | str) -> str:
    """One human sentence for the panel and the report."""
    if isinstance(error, str):
        return error
    message = str(error).strip() or type(error).__name__
    if isinstance(error, (ConnectionError, http.client.HTTPException)):
        return (f"The inference server closed the connection unexpectedly ({message}); it may "
                "have crashed. Click Analyze again to restart it; its log file has the details.")
    if isinstance(error, SapiensServerError) or isinstance(error, (ValueError, OSError)):
        return message.split("\n--- server log")[0]
    return f"{type(error).__name__}: {message}"


SESSION = Session()


def reset_session() -> Session:
    global SESSION
    SESSION.shutdown()
    SESSION = Session()
    return SESSION


def default_user_dir() -> str:
    """Fallback user folder outside Blender (the CLI, tests)."""
    return os.path.join(os.path.expanduser("~"), ".sapiens_blender")
