# SPDX-License-Identifier: GPL-3.0-or-later
"""The add-on's session state (bpy-free): server connection, the running job, the last error.

The panel draws from `SESSION.panel_state()`; operators change the session. Nothing here
touches bpy, so the whole state machine is testable in plain Python.
"""

from __future__ import annotations

import http.client
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import SapiensServerError
from ..core.jobs.background import RUNNING, Job
from ..core.local_server.connection import (  # noqa: F401  (offline_hint, parse_extra_args: for the UI)
    ConnectionMode,
    ConnectionSettings,
    ServerConnection,
    offline_hint,
    parse_extra_args,
)
from ..core.local_server.process import ServerState, default_source_root
from ..core.text_enum import TextEnum


class PanelState(TextEnum):
    """What the panel shows (one of these at a time)."""

    NO_SERVER = "no server"
    STARTING = "starting"
    READY = "ready"
    BUSY = "running"
    ERROR = "error"


NO_SERVER, STARTING, READY, BUSY, ERROR = PanelState


class JobKind(TextEnum):
    """What the session's job does (the panel greys buttons and labels by it)."""

    ANALYZE = "analyze"
    BUILD = "build"
    FIT = "fit"
    ANIMATE = "animate"
    SCAN = "scan"
    START_SERVER = "start server"
    STOP_SERVER = "stop server"
    FREE_MEMORY = "free memory"
    CHECK = "check"
    SETUP = "setup"


LOCAL, REMOTE = ConnectionMode.LOCAL, ConnectionMode.REMOTE


def addon_dir() -> Path:
    return Path(__file__).resolve().parents[1]


def server_source_root() -> Path:
    """The folder that holds `inference_server/` (see core.local_server.process.default_source_root)."""
    return default_source_root()


@dataclass
class Session:
    """One per Blender session; lives in this module (reset when the add-on is re-enabled)."""

    connection: ServerConnection = field(default_factory=ServerConnection)
    job: Job | None = None
    job_kind: JobKind | str = ""
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

    @property
    def server(self):
        """The local ServerProcess, or None (core.local_server.connection decides when it starts)."""
        return self.connection.server

    @property
    def remote_client(self):
        return self.connection.remote_client

    def server_state(self) -> ServerState:
        return self.connection.state()

    def server_detail(self) -> tuple[str, str]:
        return self.connection.detail()

    def panel_state(self) -> PanelState:
        if self.job_running():
            return STARTING if self.job_kind == JobKind.START_SERVER else BUSY
        if self.last_error:
            return ERROR
        return READY if self.server_state() == ServerState.READY else NO_SERVER

    def set_error(self, error: BaseException | str) -> str:
        self.last_error = describe_error(error)
        return self.last_error

    def clear_error(self) -> None:
        self.last_error = ""

    # -- the server (the policy lives in core.local_server.connection) ------------------------------
    def connect(self, settings: ConnectionSettings):
        return self.connection.connect(settings)

    def stop_server(self) -> None:
        self.connection.stop()

    def current_client(self):
        return self.connection.current_client()

    def shutdown(self) -> None:
        """Blender quits / the add-on is disabled: cancel work and stop the server."""
        for job in (self.job, self.setup_job, self.check_job):
            if job is not None:
                job.cancel()
        self.connection.forget()


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
