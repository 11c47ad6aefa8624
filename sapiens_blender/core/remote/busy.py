# SPDX-License-Identifier: GPL-3.0-or-later
"""Waiting to ask a busy server (503) again: bounded, with backoff, cancellable.

Under load the server refuses what it cannot queue with 503 and a Retry-After; giving up at
once turned a moment of load into a failed job. A refused request is asked again after the
server's hint, or after a backoff doubling from the first to the longest wait when that is
longer (the hint repeating itself), with jitter so that clients refused together do not all
come back together; for at most the client's ``busy_retry_s`` in all, then the 503 is raised.
A 503 without Retry-After is no queue: the server is shutting down or a model cannot load
(a missing package), which asking again does not mend: raised at once. stdlib only.
"""

from __future__ import annotations

import random
import threading
import time

from ..errors import RequestCancelled, ServerBusy

FIRST_WAIT_S, LONGEST_WAIT_S = 0.5, 30.0


class BusyWaits:
    """The waits of the threads of one client, each ended early by ``interrupt``."""

    def __init__(self):
        self._events: dict[int, threading.Event] = {}
        self._lock = threading.Lock()

    def wait(self, busy: ServerBusy, attempt: int, deadline: float) -> None:
        """Sleep before attempt ``attempt + 1``; raise ``busy`` when that would end past
        ``deadline`` (time.monotonic), RequestCancelled when interrupted."""
        backoff = min(LONGEST_WAIT_S, FIRST_WAIT_S * 2 ** attempt)
        if busy.retry_after is None:
            raise busy
        seconds = max(busy.retry_after, backoff) * random.uniform(1.0, 1.25)
        if time.monotonic() + seconds > deadline:
            if attempt == 0:
                raise busy
            raise ServerBusy(f"{busy} (still busy after {attempt + 1} tries)", retry_after=busy.retry_after,
                             status=busy.status, detail=busy.detail) from busy
        event = threading.Event()
        with self._lock:
            self._events[threading.get_ident()] = event
        try:
            if event.wait(seconds):
                raise RequestCancelled("the request was abandoned by the client while the server was busy")
        finally:
            with self._lock:
                self._events.pop(threading.get_ident(), None)

    def interrupt(self, thread_ident: int) -> bool:
        """End that thread's wait (True if it was waiting)."""
        with self._lock:
            event = self._events.get(thread_ident)
        if event is None:
            return False
        event.set()
        return True
