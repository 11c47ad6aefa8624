# SPDX-License-Identifier: GPL-3.0-or-later
"""Jobs: bounded concurrency, progress and cancellation of long operations (infer, load).

Each job is keyed by the id the client chose, so another connection can read its progress
or cancel it while the request that started it is still waiting. Work runs in a fixed pool of
worker threads (never on the event loop); the number admitted (running + waiting) is bounded,
beyond that the caller gets :class:`QueueFull` (HTTP 503 + Retry-After).
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .backends.base import CancelToken, Cancelled

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
FINISHED = frozenset({DONE, FAILED, CANCELLED})


class QueueFull(Exception):
    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class JobIdInUse(Exception):
    pass


class ShuttingDown(Exception):
    pass


@dataclass
class Job:
    id: str
    kind: str  # "infer" | "load"
    model: str
    state: str = QUEUED
    stage: str = "queued"
    progress: float | None = None
    message: str = ""
    error: str | None = None
    created: float = field(default_factory=time.time)
    updated: float = field(default_factory=time.time)
    token: CancelToken = field(default_factory=CancelToken)
    revision: int = 0  # bumped on every change, so watchers know when to send
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def report(self, stage: str, fraction: float | None = None, message: str = "") -> None:
        """The backends' ProgressFn: thread-safe, cheap, never raises."""
        if fraction is not None:
            try:
                fraction = min(1.0, max(0.0, float(fraction)))
            except (TypeError, ValueError):
                fraction = None
        with self._lock:
            if self.state in FINISHED:
                return
            self.stage, self.progress = str(stage), fraction
            self.message = str(message) if message else (
                f"{stage} {round(fraction * 100)}%" if fraction is not None else str(stage))
            self.updated = time.time()
            self.revision += 1

    def _set_state(self, state: str, error: str | None = None) -> None:
        with self._lock:
            self.state = state
            if state in FINISHED:
                self.stage = state
                self.progress = 1.0 if state == DONE else self.progress
                self.message = error or state
            self.error = error
            self.updated = time.time()
            self.revision += 1

    def to_json(self) -> dict:
        with self._lock:
            return {"id": self.id, "kind": self.kind, "model": self.model, "state": self.state,
                    "stage": self.stage, "progress": self.progress, "message": self.message,
                    "created": self.created, "updated": self.updated, "error": self.error}


class JobManager:
    def __init__(self, max_concurrency: int = 1, max_queue: int = 8,
                 keep_finished: int = 256, keep_seconds: float = 600.0):
        self.max_concurrency = max(1, int(max_concurrency))
        self.max_queue = max(0, int(max_queue))
        self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="sapiens-job")
        self._lock = threading.Lock()
        self._active: dict[str, Job] = {}
        self._finished: OrderedDict[str, Job] = OrderedDict()
        self._keep_finished, self._keep_seconds = keep_finished, keep_seconds
        self._admitted = 0
        self._avg_seconds = 1.0  # running mean of job durations, for Retry-After
        self.shutting_down = False

    # -- lookup ---------------------------------------------------------------------------------
    def get(self, job_id: str) -> Job | None:
        with self._lock:
            self._expire()
            return self._active.get(job_id) or self._finished.get(job_id)

    def list(self) -> list[Job]:
        with self._lock:
            self._expire()
            return [*self._active.values(), *self._finished.values()]

    def cancel(self, job_id: str) -> Job | None:
        job = self.get(job_id)
        if job is not None and job.state not in FINISHED:
            job.token.cancel()
            job.report(job.stage, job.progress, "cancelling")
        return job

    def cancel_all(self) -> None:
        with self._lock:
            jobs = list(self._active.values())
        for job in jobs:
            job.token.cancel()

    def shutdown(self) -> None:
        self.shutting_down = True
        self.cancel_all()
        self._pool.shutdown(wait=False, cancel_futures=False)

    def _expire(self) -> None:
        cutoff = time.time() - self._keep_seconds
        while self._finished:
            oldest = next(iter(self._finished.values()))
            if len(self._finished) <= self._keep_finished and oldest.updated >= cutoff:
                break
            self._finished.popitem(last=False)

    # -- running --------------------------------------------------------------------------------
    def admit(self, job_id: str | None, kind: str, model: str) -> Job:
        """Reserve a slot for a new job or raise QueueFull / JobIdInUse / ShuttingDown."""
        with self._lock:
            if self.shutting_down:
                raise ShuttingDown("the server is shutting down")
            if job_id is None:
                job_id = uuid.uuid4().hex
            if job_id in self._active:
                raise JobIdInUse(f"a job with id {job_id!r} is still running; ids must be unique")
            if self._admitted >= self.max_concurrency + self.max_queue:
                waiting = self._admitted - self.max_concurrency + 1
                retry = max(1, round(self._avg_seconds * waiting / self.max_concurrency))
                raise QueueFull(
                    f"the server is busy ({self._admitted} requests running or queued, limit "
                    f"{self.max_concurrency} running + {self.max_queue} queued); retry later", retry)
            self._admitted += 1
            self._finished.pop(job_id, None)
            job = Job(job_id, kind, model)
            self._active[job_id] = job
            return job

    async def run(self, job: Job, fn: Callable[[Job], Any]) -> Any:
        """Run ``fn(job)`` in a worker thread; job state follows the outcome. Re-raises."""
        loop = asyncio.get_running_loop()
        try:
            future = self._pool.submit(self._work, job, fn)
        except RuntimeError as exc:  # the pool is already shut down
            self._finish(job, FAILED, str(exc))
            raise ShuttingDown("the server is shutting down") from None
        return await asyncio.wrap_future(future, loop=loop)

    def _work(self, job: Job, fn: Callable[[Job], Any]) -> Any:
        start = time.monotonic()
        try:
            job.token.check()  # cancelled while queued: never start
            job._set_state(RUNNING)
            job.report("running", None)
            result = fn(job)
            job.token.check()
        except Cancelled:
            self._finish(job, CANCELLED, f"request {job.id} was cancelled")
            raise
        except BaseException as exc:
            self._finish(job, FAILED, str(exc) or type(exc).__name__)
            raise
        self._finish(job, DONE, None)
        with self._lock:
            self._avg_seconds = 0.8 * self._avg_seconds + 0.2 * (time.monotonic() - start)
        return result

    def _finish(self, job: Job, state: str, error: str | None) -> None:
        job._set_state(state, error)
        with self._lock:
            if self._active.get(job.id) is job:
                del self._active[job.id]
                self._admitted -= 1
                self._finished[job.id] = job
                self._expire()

    def release(self, job: Job, error: str) -> None:
        """Give back a slot of a job that failed before it was handed to ``run``."""
        self._finish(job, FAILED, error)
