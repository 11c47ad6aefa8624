# SPDX-License-Identifier: GPL-3.0-or-later
"""A job whose work must run on the main thread (bpy), in steps: one step per `pump()`.

The work is a generator that yields ``(stage, fraction)`` before each step and returns the
result. The UI's timer pumps it like any `Job`, so Blender redraws (progress, the Cancel
button) between steps; a step itself cannot be interrupted, so steps are kept short where bpy
allows. Cancel closes the generator at the next step boundary. bpy-free.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Generator

from .background import CANCELLED, DONE, FAILED, RUNNING, Job, JobEvent


class StepJob(Job):
    def __init__(self, name: str, steps: Callable[[], Generator[tuple[str, float | None], None, Any]], **callbacks):
        super().__init__(name, lambda progress: None, **callbacks)
        self._make_steps = steps
        self._steps: Generator | None = None
        self.step_seconds: list[tuple[str, float]] = []  # (stage, seconds) of every step run

    def start(self) -> "StepJob":
        if self._steps is not None:
            raise RuntimeError(f"job {self.name!r} was already started")
        self.state, self.stage, self.message = RUNNING, "starting", "starting"
        self._steps = self._make_steps()
        return self

    def pump(self) -> bool:
        """Run the next step on the calling (main) thread; True once finished."""
        if self.finished:
            return True
        if self._steps is None:
            self.start()
        if self._cancel_event.is_set():
            try:
                self._steps.close()  # runs the generator's cleanup (finally blocks)
            except Exception:  # noqa: BLE001 - e.g. its data went with a file that was closed
                pass
            self._finish(JobEvent(CANCELLED, message="cancelled by the user"))
            return True
        stage, started = self.stage, time.perf_counter()
        try:
            stage_next, fraction = next(self._steps)
        except StopIteration as stop:
            self.step_seconds.append((stage, time.perf_counter() - started))
            self._finish(JobEvent(DONE, message="done", result=stop.value))
            return True
        except Exception as exc:  # noqa: BLE001 - the failure goes to on_failure, never lost
            self._finish(JobEvent(FAILED, message=str(exc) or type(exc).__name__, error=exc))
            return True
        self.step_seconds.append((stage, time.perf_counter() - started))
        self.stage, self.message = stage_next, stage_next
        self.fraction = None if fraction is None else min(1.0, max(0.0, float(fraction)))
        return False

    def wait(self, timeout: float | None = None, interval: float = 0.0) -> bool:
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.pump():
            if deadline is not None and time.monotonic() > deadline:
                return False
        return True

    def run_blocking(self, timeout: float | None = None) -> "StepJob":
        self.start()
        self.wait(timeout)
        return self

    def longest_step(self) -> tuple[str, float]:
        return max(self.step_seconds, key=lambda s: s[1], default=("", 0.0))


__all__ = ["StepJob", "DONE", "FAILED", "CANCELLED"]
