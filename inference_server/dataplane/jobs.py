# SPDX-License-Identifier: GPL-3.0-or-later
"""Jobs: bounded concurrency, progress and cancellation of long operations (infer, load).

Each job is keyed by the id the client chose, so another connection can read its progress
or cancel it while the request that started it is still waiting. Work runs in a fixed pool of
worker threads (never on the event loop); the number admitted (running + waiting) is bounded,
beyond that the caller gets :class:`QueueFull` (HTTP 503 + Retry-After).

Dynamic batching (as Triton's dynamic batcher): work given as a :class:`BatchItem` waits in our
own queue; the worker that takes one also takes the other queued items with the same ``key``
(same model and compatible options), up to ``max_batch``, waiting at most ``batch_window_s``
for more, and runs them as ONE batch. Each job keeps its own state, progress and cancellation.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Callable, Hashable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from .base import CancelToken, Cancelled
from ..errors import InferenceServerError

QUEUED, RUNNING, DONE, FAILED, CANCELLED = "queued", "running", "done", "failed", "cancelled"
FINISHED = frozenset({DONE, FAILED, CANCELLED})


class QueueFull(InferenceServerError):
    def __init__(self, message: str, retry_after: int):
        super().__init__(message)
        self.retry_after = retry_after


class JobIdInUse(InferenceServerError):
    pass


class ShuttingDown(InferenceServerError):
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
    batch_size: int | None = None  # requests in the batch this job ran with (dynamic batching)
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
                    "created": self.created, "updated": self.updated, "error": self.error,
                    "batch_size": self.batch_size}


@dataclass
class BatchItem:
    """One job's work that may run in one batch with other jobs' items of the same ``key``.

    ``prepare(job)`` makes this job's input (e.g. decodes its photo); ``run_batch(jobs, inputs)``
    returns one result per input, in order, where a result may be the exception that ended that
    job alone; ``finish(job, result)`` turns a result into the job's answer. All three run in the
    worker thread; ``run_batch`` of the batch's first item is the one called."""

    key: Hashable
    prepare: Callable[[Job], Any]
    run_batch: Callable[[list, list], list]
    finish: Callable[[Job, Any], Any]


@dataclass
class _Pending:
    job: Job
    work: Any  # Callable[[Job], Any] | BatchItem
    future: Future


class JobManager:
    def __init__(self, max_concurrency: int = 1, max_queue: int = 8,
                 keep_finished: int = 256, keep_seconds: float = 600.0,
                 max_batch: int = 4, batch_window_s: float = 0.005):
        self.max_concurrency = max(1, int(max_concurrency))
        self.max_queue = max(0, int(max_queue))
        self.max_batch = max(1, int(max_batch))
        self.batch_window_s = max(0.0, float(batch_window_s))
        self._pool = ThreadPoolExecutor(self.max_concurrency, thread_name_prefix="sapiens-job")
        self._lock = threading.Lock()
        self._queue_changed = threading.Condition(self._lock)
        self._pending: deque[_Pending] = deque()
        self._batches = {"batches": 0, "batched_requests": 0, "largest_batch": 0}
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
    def reserve(self) -> None:
        """Take a slot before a request's body is read, so that bodies waiting in memory are
        bounded by the queue; :meth:`admit` with ``reserved=True`` uses it, or :meth:`unreserve`
        gives it back. Raises QueueFull / ShuttingDown."""
        with self._lock:
            self._check_capacity()
            self._admitted += 1

    def unreserve(self) -> None:
        with self._lock:
            self._admitted -= 1

    def _check_capacity(self) -> None:
        if self.shutting_down:
            raise ShuttingDown("the server is shutting down")
        if self._admitted >= self.max_concurrency + self.max_queue:
            waiting = self._admitted - self.max_concurrency + 1
            retry = max(1, round(self._avg_seconds * waiting / self.max_concurrency))
            raise QueueFull(
                f"the server is busy ({self._admitted} requests running or queued, limit "
                f"{self.max_concurrency} running + {self.max_queue} queued); retry later", retry)

    def admit(self, job_id: str | None, kind: str, model: str, *, reserved: bool = False) -> Job:
        """A new job in a new slot (or the slot :meth:`reserve` took); raises QueueFull /
        JobIdInUse / ShuttingDown (a reserved slot stays reserved when it raises)."""
        with self._lock:
            if job_id is None:
                job_id = uuid.uuid4().hex
            if job_id in self._active:
                raise JobIdInUse(f"a job with id {job_id!r} is still running; ids must be unique")
            if not reserved:
                self._check_capacity()
                self._admitted += 1
            self._finished.pop(job_id, None)
            job = Job(job_id, kind, model)
            self._active[job_id] = job
            return job

    async def run(self, job: Job, work: Callable[[Job], Any] | BatchItem) -> Any:
        """Run ``work`` (``work(job)``, or a BatchItem) in a worker thread; job state follows the
        outcome. Re-raises."""
        loop = asyncio.get_running_loop()
        pending = _Pending(job, work, Future())
        with self._queue_changed:
            self._pending.append(pending)
            self._queue_changed.notify_all()
        try:
            self._pool.submit(self._drain)  # one drain per item: every queued item gets a worker
        except RuntimeError as exc:  # the pool is already shut down
            with self._queue_changed:
                queued = pending in self._pending
                if queued:
                    self._pending.remove(pending)
            if queued:
                self._finish(job, FAILED, str(exc))
                raise ShuttingDown("the server is shutting down") from None
        return await asyncio.wrap_future(pending.future, loop=loop)

    def batch_stats(self) -> dict:
        """Dynamic batching settings and counters (batches = runs of more than one request)."""
        with self._lock:
            return {"max_batch": self.max_batch, "batch_window_ms": self.batch_window_s * 1000,
                    **self._batches}

    def _drain(self) -> None:
        group = self._take_group()
        live = []
        for p in group:
            if p.future.set_running_or_notify_cancel():
                live.append(p)
            else:  # the caller stopped waiting: free its slot
                self._finish(p.job, CANCELLED, f"request {p.job.id} was cancelled")
        if not live:
            return
        start = time.monotonic()
        if isinstance(live[0].work, BatchItem):
            self._run_batch(live)
        else:
            self._run_one(live[0])
        with self._lock:
            self._avg_seconds = 0.8 * self._avg_seconds + 0.2 * (time.monotonic() - start) / len(live)

    def _take_group(self) -> list[_Pending]:
        """The oldest queued item plus queued batch mates (same key), waiting up to the window."""
        with self._queue_changed:
            if not self._pending:
                return []
            group = [self._pending.popleft()]
            if not isinstance(group[0].work, BatchItem) or self.max_batch == 1:
                return group
            deadline = time.monotonic() + self.batch_window_s
            while True:
                for p in list(self._pending):
                    if len(group) < self.max_batch and isinstance(p.work, BatchItem) \
                            and p.work.key == group[0].work.key:
                        self._pending.remove(p)
                        group.append(p)
                remaining = deadline - time.monotonic()
                if len(group) >= self.max_batch or remaining <= 0:
                    return group
                self._queue_changed.wait(remaining)

    def _start(self, job: Job) -> None:
        job.token.check()  # cancelled while queued: never start
        job._set_state(RUNNING)
        job.report("running", None)

    def _run_one(self, p: _Pending) -> None:
        try:
            self._start(p.job)
            result = p.work(p.job)
            p.job.token.check()
        except BaseException as exc:
            self._fail(p, exc)
            return
        self._finish(p.job, DONE, None)
        p.future.set_result(result)

    def _run_batch(self, group: list[_Pending]) -> None:
        ready, inputs = [], []
        for p in group:
            try:
                self._start(p.job)
                inputs.append(p.work.prepare(p.job))
                ready.append(p)
            except BaseException as exc:  # e.g. cancelled while queued, undecodable photo: this job only
                self._fail(p, exc)
        if not ready:
            return
        for p in ready:
            p.job.batch_size = len(ready)
        if len(ready) > 1:
            with self._lock:
                self._batches["batches"] += 1
                self._batches["batched_requests"] += len(ready)
                self._batches["largest_batch"] = max(self._batches["largest_batch"], len(ready))
        try:
            results = ready[0].work.run_batch([p.job for p in ready], inputs)
            if len(results) != len(ready):
                raise RuntimeError(f"a batch of {len(ready)} returned {len(results)} results")
        except BaseException as exc:  # the batch as a whole failed: every job in it did
            results = [exc] * len(ready)
        for p, result in zip(ready, results):
            try:
                if isinstance(result, BaseException):
                    raise result
                answer = p.work.finish(p.job, result)
                p.job.token.check()
            except BaseException as exc:
                self._fail(p, exc)
                continue
            self._finish(p.job, DONE, None)
            p.future.set_result(answer)

    def _fail(self, p: _Pending, exc: BaseException) -> None:
        if isinstance(exc, Cancelled):
            self._finish(p.job, CANCELLED, f"request {p.job.id} was cancelled")
        else:
            self._finish(p.job, FAILED, str(exc) or type(exc).__name__)
        p.future.set_exception(exc)

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
