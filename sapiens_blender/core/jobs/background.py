# SPDX-License-Identifier: GPL-3.0-or-later
"""Background jobs with progress, cancellation and a main-thread hand-off (bpy-free).

Blender's UI must never wait on a socket, and bpy must only be touched from the main thread.
So a `Job` runs its work function on a worker thread; the work reports progress through a
`Progress` object, which only puts events on a queue. The main thread (a `bpy.app.timers`
callback, a modal operator's timer, or a plain loop in background mode) calls `Job.pump()`,
which drains the queue, updates the job's visible state and, once the work has finished,
calls the job's `on_success` / `on_failure` / `on_cancel` callbacks on that same main thread.
"""

from __future__ import annotations

import queue
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from ..text_enum import TextEnum
from ..errors import SapiensError


class JobState(TextEnum):
    """A job's state (a str, so it prints and serialises as its value)."""

    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


QUEUED, RUNNING, DONE, FAILED, CANCELLED = JobState
FINISHED_STATES = (DONE, FAILED, CANCELLED)


class JobCancelled(SapiensError):
    """Raised inside the work function when the user cancelled the job."""


@dataclass(frozen=True)
class JobEvent:
    kind: str  # "progress" or one of DONE / FAILED / CANCELLED
    stage: str = ""
    fraction: float | None = None
    message: str = ""
    result: Any = None
    error: BaseException | None = None


class Progress:
    """What the work function gets: report progress, and learn whether it was cancelled."""

    def __init__(self, events: "queue.Queue[JobEvent]", cancel_event: threading.Event):
        self._events = events
        self.cancel_event = cancel_event

    @property
    def cancelled(self) -> bool:
        return self.cancel_event.is_set()

    def check(self) -> None:
        """Raise JobCancelled if the user asked to stop; call it between steps."""
        if self.cancel_event.is_set():
            raise JobCancelled("cancelled by the user")

    def update(self, stage: str, fraction: float | None = None, message: str = "") -> None:
        if fraction is not None:
            fraction = min(1.0, max(0.0, float(fraction)))
        self._events.put(JobEvent("progress", stage, fraction, message or stage))


class Job:
    """One unit of background work; its visible fields change only inside `pump()`."""

    def __init__(
        self,
        name: str,
        work: Callable[[Progress], Any],
        *,
        on_success: Callable[[Any], None] | None = None,
        on_failure: Callable[[BaseException], None] | None = None,
        on_cancel: Callable[[], None] | None = None,
        cancel_hooks: tuple[Callable[[], None], ...] = (),
    ):
        self.name = name
        self._work = work
        self.on_success, self.on_failure, self.on_cancel = on_success, on_failure, on_cancel
        self._cancel_hooks = list(cancel_hooks)
        self._events: queue.Queue[JobEvent] = queue.Queue()
        self._cancel_event = threading.Event()
        self.progress = Progress(self._events, self._cancel_event)
        self._thread: threading.Thread | None = None
        self.state = QUEUED
        self.stage = "queued"
        self.fraction: float | None = None
        self.message = "waiting to start"
        self.result: Any = None
        self.error: BaseException | None = None

    # -- worker side --------------------------------------------------------------------
    def _run(self) -> None:
        try:
            self.progress.check()
            result = self._work(self.progress)
            if self._cancel_event.is_set():
                raise JobCancelled("cancelled by the user")
        except JobCancelled as exc:
            self._events.put(JobEvent(CANCELLED, message=str(exc)))
        except BaseException as exc:  # noqa: BLE001 - handed to the main thread, never lost
            if self._cancel_event.is_set():
                self._events.put(JobEvent(CANCELLED, message="cancelled by the user"))
            else:
                self._events.put(JobEvent(FAILED, message=str(exc) or type(exc).__name__, error=exc))
        else:
            self._events.put(JobEvent(DONE, message="done", result=result))

    def start(self) -> "Job":
        """Run the work on a daemon worker thread; returns at once."""
        if self._thread is not None:
            raise RuntimeError(f"job {self.name!r} was already started")
        self.state = RUNNING
        self._thread = threading.Thread(target=self._run, name=f"sapiens-{self.name}", daemon=True)
        self._thread.start()
        return self

    def run_blocking(self, timeout: float | None = None) -> "Job":
        """Background mode (no event loop): run the work and pump until it finishes."""
        self.start()
        self.wait(timeout)
        return self

    # -- main-thread side ---------------------------------------------------------------
    @property
    def finished(self) -> bool:
        return self.state in FINISHED_STATES

    def cancel(self) -> None:
        """Ask the work to stop. Hooks (e.g. cancelling the server-side job) run right away,
        so a worker blocked on a socket is released; errors in hooks must not hide the cancel."""
        if self.finished:
            return
        self._cancel_event.set()
        self.message = "cancelling…"
        for hook in self._cancel_hooks:
            try:
                hook()
            except Exception:  # noqa: BLE001 - best effort; the cancel flag is already set
                pass

    def add_cancel_hook(self, hook: Callable[[], None]) -> None:
        """Work functions register how to abort what they are blocked on (thread-safe)."""
        self._cancel_hooks.append(hook)
        if self._cancel_event.is_set():
            hook()

    def pump(self) -> bool:
        """Apply queued events on the calling (main) thread; True once the job has finished.
        The terminal callback runs here, exactly once; if it raises, the job becomes FAILED."""
        if self.finished:
            return True
        while True:
            try:
                event = self._events.get_nowait()
            except queue.Empty:
                return False
            if event.kind == "progress":
                if not self._cancel_event.is_set():
                    self.stage, self.fraction, self.message = event.stage, event.fraction, event.message
                continue
            self._finish(event)
            return True

    def _finish(self, event: JobEvent) -> None:
        self.state, self.message, self.fraction = event.kind, event.message, None
        self.stage = event.kind
        try:
            if event.kind == DONE:
                self.result = event.result
                if self.on_success:
                    self.on_success(event.result)
            elif event.kind == CANCELLED:
                if self.on_cancel:
                    self.on_cancel()
            else:
                self.error = event.error
                if self.on_failure:
                    self.on_failure(event.error)
        except Exception as exc:  # noqa: BLE001 - a failing main-thread step fails the job
            self.state, self.error, self.message = FAILED, exc, str(exc) or type(exc).__name__
            self.stage = FAILED
            if event.kind == DONE and self.on_failure:
                self.on_failure(exc)

    def wait(self, timeout: float | None = None, interval: float = 0.02) -> bool:
        """Pump until finished (background mode and tests); False on timeout."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.pump():
            if deadline is not None and time.monotonic() > deadline:
                return False
            time.sleep(interval)
        if self._thread is not None:
            self._thread.join(timeout=1.0)
        return True
