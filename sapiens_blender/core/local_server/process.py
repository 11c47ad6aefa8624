# SPDX-License-Identifier: GPL-3.0-or-later
"""Start, reuse, watch and stop the local inference server (``python -m inference_server``).

The server runs in its own process: on the user's torch environment, or on Blender's own Python
with the extension's bundled wheels (core/local_server/runtime.py picks which).
We generate its token (passed in the environment, never on the command line, where other users
could read it), ask for a free port, and read the one JSON ready line it prints on stdout. Its
stderr goes to a log file whose tail is quoted when it fails to start, so the user sees the
server's own reason ("No module named torch"), not a timeout. stdlib only.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
import threading
import time
import weakref
from pathlib import Path

from ..remote.client import V2Client
from ..errors import ServerStartError
from ..files.private_dirs import open_no_follow, private_temp_dir
from ..text_enum import TextEnum


class ServerState(TextEnum):
    """A local server's state (a str, so it prints and serialises as its value)."""

    STOPPED = "stopped"
    STARTING = "starting"
    READY = "ready"
    ERROR = "error"


STOPPED, STARTING, READY, ERROR = ServerState
_LIVE_MANAGERS: "weakref.WeakSet[ServerProcess]" = weakref.WeakSet()


def default_source_root() -> Path:
    """The folder holding ``inference_server/``.

    The installed extension ships the server source in ``server_src/`` inside the add-on (see
    cli/package_extension.py); a source checkout has it next to ``sapiens_blender/``.
    """
    addon = Path(__file__).resolve().parents[2]
    bundled = addon / "server_src"
    return bundled if (bundled / "inference_server").is_dir() else addon.parent


def default_log_dir() -> Path:
    return private_temp_dir()  # per user, 0700: other local users cannot plant links there


class ServerProcess:
    """One local server: ``ensure_running()`` gives a ready :class:`V2Client`, starting or
    restarting the server as needed; ``stop()`` ends it. Safe to call from several threads."""

    def __init__(
        self,
        python: str | os.PathLike | None = None,
        extra_args: list[str] | tuple[str, ...] = (),
        startup_timeout: float = 120.0,
        stop_timeout: float = 10.0,
        log_dir: str | os.PathLike | None = None,
        source_root: str | os.PathLike | None = None,
        env: dict[str, str] | None = None,
        client_timeout: float = 30.0,
        interpreter_args: list[str] | tuple[str, ...] = (),
    ):
        self.python = str(python or sys.executable)
        self.extra_args = [str(a) for a in extra_args]
        self.startup_timeout = startup_timeout
        self.stop_timeout = stop_timeout
        self.log_dir = Path(log_dir) if log_dir else default_log_dir()
        self.source_root = Path(source_root) if source_root else default_source_root()
        self.extra_env = dict(env or {})
        self.client_timeout = client_timeout
        self.interpreter_args = [str(a) for a in interpreter_args]  # before -m, e.g. -s
        self.state = STOPPED
        self.last_error = ""
        self.log_path = self.log_dir / f"server-for-{os.getpid()}-{id(self):x}.log"
        self.info: dict = {}  # the ready line: host, port, pid, version
        self.token = ""
        self._proc: subprocess.Popen | None = None
        self._client: V2Client | None = None
        self._reader: threading.Thread | None = None
        self._ready_line: dict | None = None
        self._ready_event = threading.Event()
        self._log = None
        self._lock = threading.RLock()
        _LIVE_MANAGERS.add(self)

    # --- public ------------------------------------------------------------------------------
    @property
    def pid(self) -> int | None:
        proc = self._proc
        return proc.pid if proc else None

    @property
    def url(self) -> str:
        info = self.info  # one read: another thread may replace it
        return f"http://{info['host']}:{info['port']}" if info else ""

    def is_running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def status(self) -> dict:
        """For the UI: ``state`` (stopped/starting/ready/error), pid, url, last error, log file.
        Never blocks, even while another thread is starting the server."""
        if self._lock.acquire(blocking=False):
            try:
                self._notice_crash()
            finally:
                self._lock.release()
        return {"state": self.state, "pid": self.pid, "url": self.url,
                "last_error": self.last_error, "log_path": str(self.log_path)}  # fmt: skip

    def ensure_running(self) -> V2Client:
        """A client of a running server: reuse it, or (re)start it. Raises ServerStartError."""
        with self._lock:
            self._notice_crash()
            if self.state == READY and self._client is not None:
                return self._client
            return self.start()

    def start(self) -> V2Client:
        """Start a fresh server (stopping ours first if any) and wait for its ready line."""
        with self._lock:
            self.stop()
            self.state, self.last_error = STARTING, ""
            try:
                self._spawn()
                self._wait_ready()
            except ServerStartError as exc:
                self._terminate()
                self.state, self.last_error = ERROR, str(exc)
                raise
            self.state = READY
            return self._client

    def stop(self, timeout: float | None = None) -> None:
        """SIGTERM (the server finishes cleanly), then kill after ``timeout`` seconds."""
        with self._lock:
            self._terminate(self.stop_timeout if timeout is None else timeout)
            if self.state != ERROR:
                self.state = STOPPED

    def log_tail(self, lines: int = 40, max_bytes: int = 64 * 1024) -> str:
        """The last lines of the server's stderr log ('' when there is none)."""
        try:
            with open(self.log_path, "rb") as fh:
                fh.seek(0, os.SEEK_END)
                fh.seek(max(0, fh.tell() - max_bytes))
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            return ""
        return "\n".join(text.strip().splitlines()[-lines:])

    def __enter__(self) -> "ServerProcess":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- internals -----------------------------------------------------------------------------
    def _command(self, python: str) -> list[str]:
        args = ["-u", "-m", "inference_server", "--port", "0", "--parent-pid", str(os.getpid())]
        return [python, *self.interpreter_args, *args, *self.extra_args]

    def _environment(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "PYTHONPATH")}
        # Blender's own PYTHONPATH/PYTHONHOME would point the user's interpreter at Blender's
        # bundled modules; ours only needs the folder that holds inference_server/.
        env["PYTHONPATH"] = str(self.source_root)
        env["PYTHONUNBUFFERED"] = "1"
        env.update(self.extra_env)
        env["SAPIENS_TOKEN"] = self.token
        return env

    def _resolve_python(self) -> str:
        found = shutil.which(self.python) if os.sep not in self.python else self.python
        if not found or not Path(found).is_file():
            raise ServerStartError(
                f"the Python interpreter {self.python} was not found: set the server's Python "
                f"(an environment with torch installed) in the add-on preferences"
            )
        if not os.access(found, os.X_OK):
            raise ServerStartError(f"the Python interpreter {found} is not executable")
        return found

    def _spawn(self) -> None:
        python = self._resolve_python()
        self.token = secrets.token_hex(32)  # hex: a token never starts with "-" (a CLI would read it as an option)
        self.info, self._ready_line, self._client = {}, None, None
        self._ready_event.clear()
        self.log_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._log = open_no_follow(self.log_path, "wb")
        flags = {}
        if os.name == "nt":
            flags["creationflags"] = getattr(subprocess, "CREATE_NO_WINDOW", 0)
        else:
            flags["start_new_session"] = True  # a Ctrl+C meant for Blender/the CLI is not its
        try:
            self._proc = subprocess.Popen(
                self._command(python), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                stderr=self._log, cwd=str(self.source_root) if self.source_root.is_dir() else None,
                env=self._environment(), **flags,
            )  # fmt: skip
        except OSError as exc:
            self._close_log()
            raise ServerStartError(f"could not run the Python interpreter {python}: {exc}") from None
        self._reader = threading.Thread(target=self._read_stdout, args=(self._proc,), daemon=True,
                                        name="sapiens-server-stdout")  # fmt: skip
        self._reader.start()

    def _read_stdout(self, proc: subprocess.Popen) -> None:
        """Take the first JSON object with a port as the ready line; keep draining afterwards so a
        chatty server can never block on a full pipe."""
        for raw in iter(proc.stdout.readline, b""):
            if self._ready_line is not None:
                continue
            try:
                line = json.loads(raw.decode("utf-8", "replace"))
            except ValueError:
                continue
            if isinstance(line, dict) and "port" in line:
                self._ready_line = line
                self._ready_event.set()
        self._ready_event.set()  # stdout closed: the process is ending

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + self.startup_timeout
        while not self._ready_event.wait(0.05):
            if self._proc.poll() is not None and not self._ready_event.wait(1.0):
                break  # exited; stdout may still be held open by a grandchild
            if time.monotonic() > deadline:
                raise ServerStartError(
                    f"the inference server did not become ready within {self.startup_timeout:g} s"
                    + self._tail_suffix(), detail=self.log_tail()
                )  # fmt: skip
        if self._ready_line is None:
            code = self._proc.wait(timeout=5) if self._proc else None
            raise ServerStartError(
                f"the inference server failed to start with {self.python} "
                f"(exit code {code}): {self._explain()}" + self._tail_suffix(), detail=self.log_tail()
            )  # fmt: skip
        line = self._ready_line
        try:
            self.info = {"host": str(line.get("host") or "127.0.0.1"), "port": int(line["port"]),
                         "pid": int(line.get("pid") or self._proc.pid), "version": line.get("version")}  # fmt: skip
        except (TypeError, ValueError) as exc:
            raise ServerStartError(f"the inference server printed a malformed ready line: {line!r}") from exc
        host = self.info["host"]
        if host in ("0.0.0.0", "::"):
            host = "127.0.0.1"
        elif ":" in host:
            host = f"[{host}]"
        self._client = V2Client(f"http://{host}:{self.info['port']}", self.token, timeout=self.client_timeout)

    def _explain(self) -> str:
        """One sentence from the server's stderr: the reason it did not start."""
        tail = self.log_tail(200)
        missing = re.findall(r"No module named '?([\w.]+)'?", tail)
        if missing:
            module = missing[-1]
            hint = ""
            if module.split(".")[0] == "inference_server":
                hint = f" (expected the inference_server folder in {self.source_root})"
            return f"the interpreter {self.python} has no module named {module}{hint}"
        stated = re.findall(r"cannot start: (.+)", tail)  # the server's own one-line reason
        if stated:
            return stated[-1].strip()
        errors = [ln.strip() for ln in tail.splitlines() if re.match(r"^\s*\w*(Error|Exception)\b", ln)]
        if errors:
            return errors[-1]
        lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
        return lines[-1] if lines else "it printed nothing"

    def _tail_suffix(self) -> str:
        tail = self.log_tail(15)
        return f"\n--- server log {self.log_path} (last lines) ---\n{tail}" if tail else ""

    def _notice_crash(self) -> None:
        if self.state == READY and not self.is_running():
            code = self._proc.returncode if self._proc else None
            self.state = ERROR
            self.last_error = f"the inference server stopped unexpectedly (exit code {code})"
            if self._client is not None:
                self._client.close()
            self._client = None

    def _terminate(self, timeout: float = 5.0) -> None:
        proc, self._proc = self._proc, None
        self.info = {}
        if self._client is not None:
            self._client.close()
            self._client = None
        if proc is not None:
            if proc.poll() is None:
                try:
                    proc.send_signal(signal.SIGTERM) if os.name != "nt" else proc.terminate()
                    proc.wait(timeout)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(5)
                except OSError:
                    pass
            if self._reader is not None:
                self._reader.join(2)
            if proc.stdout:
                proc.stdout.close()
        self._reader = None
        self._close_log()

    def _close_log(self) -> None:
        if self._log is not None:
            self._log.close()
            self._log = None


@atexit.register
def _stop_all() -> None:
    """Blender or the CLI is quitting normally: end our servers cleanly (the server's parent-pid
    watchdog covers the abnormal cases)."""
    for manager in list(_LIVE_MANAGERS):
        try:
            manager.stop(timeout=3)
        except Exception:  # noqa: BLE001 - best effort at interpreter exit
            pass
