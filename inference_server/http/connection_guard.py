# SPDX-License-Identifier: GPL-3.0-or-later
"""Limits on connections that hold memory or file handles before any token is checked.

uvicorn's httptools protocol buffers request headers without a size limit and never times out
a request whose headers or body stop half-way; with the default file limit a few hundred idle
sockets make the server unable to accept anyone. :func:`guarded_protocol` wraps the chosen
uvicorn protocol class (httptools or h11; both keep the current request in ``self.cycle``)
with, per connection:

- a byte budget for the head of each request (431 past it), pipelined requests included,
- a deadline for the headers of each request (408) and an idle timeout while a body is coming,
- a cap on open connections: at the cap the oldest connection without a request in progress is
  closed to make room, and when every one is busy the newcomer is refused.

:class:`RateLimitFilter` keeps the log quiet when a flood makes asyncio or uvicorn log the same
line thousands of times.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class ConnectionLimits:
    max_header_bytes: int = 64 * 1024
    header_timeout_s: float = 10.0
    body_idle_timeout_s: float = 30.0
    max_connections: int = 256
    max_body_bytes: int = 256 * 1024 * 1024


def _status_response(status: int, reason: str, message: str) -> bytes:
    body = ('{"error": "%s"}' % message).encode()
    return (f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


def guarded_protocol(base: type, limits: ConnectionLimits) -> type:
    """A subclass of the uvicorn protocol class ``base`` that enforces ``limits``."""

    class GuardedProtocol(base):
        def connection_made(self, transport) -> None:
            self._born = time.monotonic()
            self._spent = 0  # header bytes received since the last complete request head
            self._seen_cycle = None
            self._timer = None
            if len(self.connections) >= limits.max_connections and not _evict_idle(self):
                transport.write(_status_response(503, "Service Unavailable",
                                                 "too many open connections; retry later"))
                transport.close()
                return
            super().connection_made(transport)
            self._arm(limits.header_timeout_s, self._headers_too_slow)

        def connection_lost(self, exc) -> None:
            self._disarm()
            if getattr(self, "transport", None) is not None:
                super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            if self.transport.is_closing():
                return
            counting = not self._in_body()  # a head (of this or a pipelined request)
            if counting:
                self._spent += len(data)
                if self._timer is None:
                    self._arm(limits.header_timeout_s, self._headers_too_slow)
            super().data_received(data)
            if self.cycle is not self._seen_cycle:  # a request's head is complete
                self._seen_cycle = self.cycle
                self._spent = 0
                self._disarm()
            elif counting and self._spent > limits.max_header_bytes:
                # Checked after parsing: one read (at most 256 KiB) may hold a head and a body.
                self._refuse(431, "Request Header Fields Too Large",
                             f"request headers are larger than the server's limit of "
                             f"{limits.max_header_bytes} bytes")
                return
            if self._in_body():
                self._arm(limits.body_idle_timeout_s, self._body_too_slow)  # data: reset idle
            elif self._spent == 0:
                self._disarm()  # the whole message is in; the next one's first byte re-arms

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self._in_body():
                self._disarm()  # uvicorn's keep-alive timeout takes over between requests

        # -- state ---------------------------------------------------------------------------
        def _request_in_progress(self) -> bool:
            cycle = self.cycle
            return cycle is not None and not cycle.response_complete

        def _in_body(self) -> bool:
            """A body is still arriving. Its bytes are not held: uvicorn pauses reading until
            the app reads them, and drops those of a request already answered."""
            cycle = self.cycle
            return cycle is not None and cycle.more_body

        # -- timers ----------------------------------------------------------------------------
        def _arm(self, delay: float, callback) -> None:
            self._disarm()
            self._timer = self.loop.call_later(delay, callback)

        def _disarm(self) -> None:
            timer = getattr(self, "_timer", None)
            if timer is not None:
                timer.cancel()
                self._timer = None

        def _headers_too_slow(self) -> None:
            self._timer = None
            if self._request_in_progress():  # a pipelined head waits for the answer before it
                self._arm(limits.header_timeout_s, self._headers_too_slow)
            else:
                self._refuse(408, "Request Timeout", f"request headers did not arrive within "
                                                     f"{limits.header_timeout_s:g} s")

        def _body_too_slow(self) -> None:
            self._timer = None
            if not self._in_body():
                return
            answered = self.cycle.response_complete
            if self.flow.read_paused and not answered:  # the app is not reading: not the client's fault
                self._arm(limits.body_idle_timeout_s, self._body_too_slow)
                return
            if not answered:
                self.cycle.disconnected = True  # the route sees a client that went away
                self.cycle.message_event.set()
            self.transport.close()

        def _refuse(self, status: int, reason: str, message: str) -> None:
            self._disarm()
            if self._request_in_progress():
                self.transport.close()  # an answer is under way; a second one would corrupt it
                return
            self.transport.write(_status_response(status, reason, message))
            self.transport.close()

    GuardedProtocol.__name__ = GuardedProtocol.__qualname__ = f"Guarded{base.__name__}"
    return GuardedProtocol


def _evict_idle(newcomer) -> bool:
    """Close the oldest connection with no request in progress; False when all are busy."""
    idle = [c for c in newcomer.connections
            if hasattr(c, "_born") and not c._request_in_progress()
            and not c.transport.is_closing()]
    if not idle:
        return False
    oldest = min(idle, key=lambda c: c._born)
    oldest._disarm()
    oldest.transport.close()
    return True


def protocol_class(http: str) -> type:
    """uvicorn's protocol class for ``--http`` (auto: httptools when installed)."""
    if http in ("auto", "httptools"):
        try:
            from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

            return HttpToolsProtocol
        except ImportError:
            if http == "httptools":
                raise
    from uvicorn.protocols.http.h11_impl import H11Protocol

    return H11Protocol


def raise_open_file_limit(wanted: int = 4096) -> int:
    """Raise the soft limit on open files towards ``wanted`` (within the hard limit); returns
    the limit now in force (or ``wanted`` where the platform has no such limit)."""
    try:
        import resource
    except ImportError:  # Windows
        return wanted
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
    if soft != resource.RLIM_INFINITY and soft < target:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
            soft = target
        except (ValueError, OSError):
            pass
    return wanted if soft == resource.RLIM_INFINITY else soft


class RateLimitFilter(logging.Filter):
    """Lets a given message through once per ``interval_s``; says how many it held back."""

    def __init__(self, interval_s: float = 10.0):
        super().__init__()
        self.interval_s = interval_s
        self._last: dict[str, tuple[float, int]] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        decided = getattr(record, "_rate_limited", None)
        if decided is not None:  # one decision per record, whichever handler asks first
            return decided
        record._rate_limited = ok = self._decide(record)
        return ok

    def _decide(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.WARNING:
            return True
        # The first line only: asyncio appends the socket's repr, different every time.
        key = f"{record.name}:{record.getMessage().partition(chr(10))[0][:200]}"
        now = time.monotonic()
        last, held = self._last.get(key, (-1e9, 0))
        if now - last < self.interval_s:
            self._last[key] = (last, held + 1)
            return False
        if held:
            record.msg = f"{record.msg} ({held} similar messages suppressed)"
        self._last[key] = (now, 0)
        if len(self._last) > 1000:  # unbounded keys must not become the leak
            self._last.clear()
        return True
