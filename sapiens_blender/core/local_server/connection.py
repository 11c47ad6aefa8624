# SPDX-License-Identifier: GPL-3.0-or-later
"""Which server the add-on talks to, and when a local one is started or restarted (bpy-free).

:class:`ConnectionSettings` is a snapshot of what the preferences say; :class:`ServerConnection`
turns it into a ready :class:`~.client.V2Client`: a remote server is reused while its URL and
token stay the same; a local server (:class:`~.server_process.ServerProcess`) is started on
first use and restarted when anything that shapes its process changes (interpreter, arguments,
environment), or when it was killed. The UI (ui/state.py) only asks and draws.
"""

from __future__ import annotations

import os
import shlex
import threading
from dataclasses import dataclass

from ..errors import ServerNotRunning
from .process import ServerState, default_source_root
from .runtime import resolve_runtime
from ..text_enum import TextEnum


class ConnectionMode(TextEnum):
    LOCAL = "LOCAL"
    REMOTE = "REMOTE"


@dataclass(frozen=True)
class ConnectionSettings:
    """Everything the preferences say about reaching a server (a snapshot, thread-safe)."""

    mode: ConnectionMode = ConnectionMode.LOCAL
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
            env["PYTHONPATH"] = os.pathsep.join([str(default_source_root()), self.extra_pythonpath])
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


def offline_hint(settings: ConnectionSettings) -> str:
    if settings.online:
        return ""
    return ("Online access is off (Preferences > System > Network > Allow Online Access), so "
            "model weights are not downloaded. Allow online access once, or put the weights "
            f"into {settings.weights_dir or 'the weights folder'}, or use the offline 'mediapipe' model.")


class ServerConnection:
    """The start/reuse/restart policy of the add-on's server; safe to call from threads."""

    def __init__(self):
        self.server = None  # ServerProcess (local mode)
        self.server_key: tuple | None = None
        self.remote_client = None  # V2Client (remote mode)
        self.remote_key: tuple | None = None
        self.lock = threading.RLock()

    def connect(self, settings: ConnectionSettings):
        """A ready V2Client for ``settings``, starting (or restarting) the local server as
        needed. Raises SapiensServerError subclasses with clear messages."""
        if settings.mode == ConnectionMode.REMOTE:
            return self._remote(settings)
        from .process import ServerProcess

        with self.lock:
            if self.server is not None and self.server_key != settings.process_key():
                self.server.stop()
                self.server = None
            if self.server is None:
                # No interpreter configured: Blender's own Python with the bundled wheels.
                runtime = resolve_runtime(settings.python, default_source_root(), settings.extra_pythonpath)
                env = dict(settings.environment(), PYTHONPATH=os.pathsep.join(runtime.pythonpath))
                self.server = ServerProcess(
                    python=runtime.python, extra_args=list(settings.extra_args),
                    startup_timeout=settings.startup_timeout, source_root=default_source_root(),
                    env=env, interpreter_args=runtime.interpreter_args,
                )
                self.server_key = settings.process_key()
            server = self.server
        client = server.ensure_running()
        try:
            client.live(timeout=5)
        except ServerNotRunning:
            # Killed moments ago: its socket is gone but the process is not reaped yet, so
            # ensure_running() still saw it alive. Start a fresh one.
            client = server.start()
        return client

    def _remote(self, settings: ConnectionSettings):
        from ..remote.client import V2Client

        key = (settings.url, settings.token)
        with self.lock:
            if self.remote_client is None or self.remote_key != key:
                if not settings.url:
                    raise ServerNotRunning("No server URL is set: enter it in the add-on preferences.")
                try:
                    client = V2Client(settings.url, settings.token or None)
                except ValueError as exc:
                    raise ServerNotRunning(f"The server URL is not valid: {exc}") from None
                client.live(timeout=10)
                self.remote_client, self.remote_key = client, key
            return self.remote_client

    def state(self) -> ServerState:
        """Lock-free on purpose: ServerProcess holds its lock for the whole start-up, and the
        panel asks while drawing, so status() would freeze the UI until the server is up."""
        if self.remote_client is not None:
            return ServerState.READY
        server = self.server
        if server is None:
            return ServerState.STOPPED
        current = ServerState(server.state)
        if current == ServerState.READY and not server.is_running():
            return ServerState.ERROR  # crashed since; connect() restarts it on the next click
        return current

    def detail(self) -> tuple[str, str]:
        """(url, last error) of the local server, lock-free like state()."""
        server = self.server
        if server is None:
            return "", ""
        return server.url, server.last_error or (
            "the inference server stopped unexpectedly" if self.state() == ServerState.ERROR else "")

    def stop(self) -> None:
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
        if self.server is not None and self.state() == ServerState.READY:
            return self.server.ensure_running()
        return None

    def forget(self) -> None:
        """Stop and drop the local server (the add-on is being disabled)."""
        self.stop()
        self.server = self.server_key = None
