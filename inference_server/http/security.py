# SPDX-License-Identifier: GPL-3.0-or-later
"""Request guards that run before any route: Host (DNS rebinding), bearer token, body size.

A plain ASGI middleware (not Starlette's BaseHTTPMiddleware) so large bodies stream through
untouched and a too-large upload is refused from its Content-Length before a byte is read.
"""

from __future__ import annotations

import hmac
import json
import os
import stat
from pathlib import Path

from ..errors import InferenceServerError

PUBLIC_PATHS = frozenset({"/v2/health/live", "/v2/health/ready"})
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
MAX_HEADERS = 100  # header lines per request (their bytes are bounded in connection_guard.py)


class BodyTooLarge(InferenceServerError):
    """Raised from ``receive`` when a streamed (chunked) body passes the cap."""

    def __init__(self, limit: int):
        super().__init__(f"request body is larger than the server's limit of {limit} bytes")
        self.limit = limit


def allowed_hosts(port: int, extra: list[str] | tuple[str, ...] = ()) -> frozenset[str]:
    """Host header values accepted: loopback names with and without the port, plus ``extra``."""
    names = [*LOOPBACK_NAMES, *extra]
    return frozenset(n.lower() for name in names for n in (name, f"{name}:{port}"))


def read_token_file(path: str | os.PathLike) -> str:
    """The token from a file only its owner can read; refuse group/other-readable files."""
    p = Path(path)
    st = p.stat()
    if os.name == "posix" and st.st_mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise PermissionError(
            f"token file {p} is accessible by group/others (mode {stat.S_IMODE(st.st_mode):o}); "
            f"run: chmod 600 {p}")
    token = p.read_text(encoding="utf-8").strip()
    if not token:
        raise ValueError(f"token file {p} is empty")
    return token


async def _send_error(send, status: int, message: str, headers: list | None = None) -> None:
    body = json.dumps({"error": message}).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [(b"content-type", b"application/json"),
                            (b"content-length", str(len(body)).encode()),
                            (b"connection", b"close"), *(headers or [])]})
    await send({"type": "http.response.body", "body": body})


class GuardMiddleware:
    def __init__(self, app, token: str, hosts: frozenset[str] | None, max_body_bytes: int):
        self.app = app
        self._token = f"Bearer {token}".encode()
        self.hosts = hosts  # None: any Host (remote serving without --allowed-host)
        self.max_body_bytes = max_body_bytes

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            return await self.app(scope, receive, send)
        if len(scope["headers"]) > MAX_HEADERS:
            return await _send_error(send, 431, f"more than {MAX_HEADERS} request headers")
        headers = dict(scope["headers"])  # ASGI header names are lower-case bytes
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if self.hosts is not None and host not in self.hosts:
            return await _send_error(send, 403, f"Host header {host!r} is not served here; use "
                                                f"http://127.0.0.1:<port> (DNS-rebinding guard)")
        if scope["path"] not in PUBLIC_PATHS:
            given = headers.get(b"authorization", b"")
            if not hmac.compare_digest(given, self._token):
                why = "missing" if not given else "wrong"
                return await _send_error(
                    send, 401, f"{why} token: send 'Authorization: Bearer <token>' (the token the "
                               f"server was started with, SAPIENS_TOKEN)",
                    [(b"www-authenticate", b"Bearer")])
        length = headers.get(b"content-length")
        if length is not None:
            try:
                declared = int(length)
            except ValueError:
                return await _send_error(send, 400, f"bad Content-Length {length!r}")
            if declared > self.max_body_bytes:
                return await _send_error(
                    send, 413, f"request body of {declared} bytes is larger than the server's "
                               f"limit of {self.max_body_bytes} bytes (--max-body-bytes)")
            return await self.app(scope, receive, send)
        return await self.app(scope, self._counting(receive), send)

    def _counting(self, receive):
        seen = 0
        limit = self.max_body_bytes

        async def wrapped():
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise BodyTooLarge(limit)
            return message

        return wrapped
