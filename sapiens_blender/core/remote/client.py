# SPDX-License-Identifier: GPL-3.0-or-later
"""Client of the inference server: Open Inference Protocol (v2) over HTTP/1.1, binary tensors.

Standard library + numpy only (it runs inside Blender's Python). Works against our own server
and against any v2 server (Triton, KServe runtimes): health, metadata and infer use only the v2
core paths; progress/cancel use our ``sapiens_jobs`` extension and degrade to "unknown" elsewhere.

Thread safety: each thread gets its own keep-alive connection, so a worker thread can block in
``infer`` while the UI thread polls ``progress`` through the same client.
"""

from __future__ import annotations

import http.client
import json
import os
import socket
import ssl
import threading
import time
import uuid
import weakref
from pathlib import Path
from urllib.parse import quote, urlsplit

import numpy as np

from . import v2_codec
from .busy import BusyWaits
from ..errors import (
    ProtocolError,
    RequestCancelled,
    SapiensServerError,
    ServerBusy,
    ServerNotRunning,
    ServerUnreachable,
    Timeout,
    error_message,
    raise_for_status,
)

# A reused keep-alive socket the server already closed fails with one of these; retry once.
PREALLOCATE_BYTES = 64 * 1024 * 1024  # larger answers grow as their bytes arrive
_STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError, ConnectionAbortedError)


class V2Client:
    """v2 client bound to one server, e.g. ``V2Client("http://127.0.0.1:50123", token)``.

    ``timeout`` bounds every call but ``infer``/``load_model`` (``infer_timeout``): the longest
    silence, in seconds, allowed while waiting for an answer. Each method takes ``timeout=`` too.
    ``busy_retry_s``: how long ``infer`` keeps asking a busy server (503) again, honouring its
    Retry-After (0: raise ServerBusy at once); ``interrupt`` ends the wait.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float = 30.0,
        infer_timeout: float = 1800.0,
        connect_timeout: float = 5.0,
        ssl_context: ssl.SSLContext | None = None,
        max_response_bytes: int = 8 * 1024**3,
        busy_retry_s: float = 120.0,
    ):
        parts = urlsplit(base_url if "://" in base_url else f"http://{base_url}")
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) server address: {base_url!r}")
        self.base_url = f"{parts.scheme}://{parts.netloc}{parts.path.rstrip('/')}"
        self._scheme, self._host, self._port = parts.scheme, parts.hostname, parts.port
        self._prefix = parts.path.rstrip("/")
        self.token = token
        self.timeout, self.infer_timeout, self.connect_timeout = timeout, infer_timeout, connect_timeout
        self._ssl_context = ssl_context
        self.max_response_bytes = max_response_bytes  # a remote --server may be anyone's
        self.busy_retry_s = busy_retry_s
        self._busy = BusyWaits()  # the threads waiting to ask a busy server again
        self._local = threading.local()
        # thread ident -> that thread's connection (weak: it dies with its thread-local)
        self._connections: weakref.WeakValueDictionary = weakref.WeakValueDictionary()
        self._lock = threading.Lock()

    # --- v2 core ---------------------------------------------------------------------------
    def live(self, timeout: float | None = None) -> bool:
        """True when the server process answers. Raises ServerNotRunning when nothing does."""
        return self._request("GET", "/v2/health/live", timeout=timeout, accept=(200, 503))[0] == 200

    def ready(self, timeout: float | None = None) -> bool:
        """True when the server is ready to serve (raises ServerNotRunning when nothing answers)."""
        return self._request("GET", "/v2/health/ready", timeout=timeout, accept=(200, 503))[0] == 200

    def server_metadata(self, timeout: float | None = None) -> dict:
        return self._json("GET", "/v2", timeout=timeout)

    def model_metadata(self, name: str, version: str | None = None, timeout: float | None = None) -> dict:
        return self._json("GET", _model_path(name, version), timeout=timeout, model=name)

    def model_ready(self, name: str, version: str | None = None, timeout: float | None = None) -> bool:
        """True when the model is loaded. An unknown model raises ModelNotFound."""
        path = _model_path(name, version) + "/ready"
        status, _, body = self._request("GET", path, timeout=timeout, model=name, accept=(200, 400, 503))
        if status != 200:
            if error_message(body).lower().find("unknown model") >= 0:  # Triton answers 400 for these
                self._raise(404, {}, body, "GET", path, name)
            return False
        ready = _loads(body, allow_empty=True)
        return bool(ready.get("ready", True)) if isinstance(ready, dict) else True

    def infer(
        self,
        name: str,
        inputs: dict,
        outputs: list[str] | None = None,
        parameters: dict | None = None,
        request_id: str | None = None,
        binary: bool = True,
        version: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, np.ndarray]:
        """Run one inference. ``inputs`` maps names to numpy arrays, ``bytes``/``str`` (a BYTES
        tensor of one element) or :class:`v2_codec.Tensor` (explicit datatype, e.g. BF16).
        Returns ``{output name: array}``; BYTES outputs are object arrays of ``bytes``."""
        # Always send an id: KServe runtimes need one to answer, and it names the job here.
        request_id = request_id or uuid.uuid4().hex
        chunks, header_length = v2_codec.encode_request(inputs, outputs, parameters, request_id, binary)
        headers = {"Content-Type": "application/json"}
        if header_length is not None:
            headers = {"Content-Type": "application/octet-stream",
                       v2_codec.HEADER_LENGTH: str(header_length)}  # fmt: skip
        path = _model_path(name, version) + "/infer"
        deadline, attempt = time.monotonic() + self.busy_retry_s, 0
        while True:
            try:
                _, resp_headers, body = self._request(
                    "POST", path, chunks, headers, timeout or self.infer_timeout, model=name
                )
                break
            except ServerBusy as exc:
                self._busy.wait(exc, attempt, deadline)
                attempt += 1
        length = resp_headers.get(v2_codec.HEADER_LENGTH.lower())
        try:
            length = None if length is None else int(length)
        except ValueError:
            raise ProtocolError(f"the server sent a bad {v2_codec.HEADER_LENGTH}: {length!r}") from None
        return v2_codec.decode_response(body, length)[1]

    def infer_image(
        self,
        name: str,
        image: bytes | str | os.PathLike,
        parameters: dict | None = None,
        outputs: list[str] | None = None,
        request_id: str | None = None,
        timeout: float | None = None,
    ) -> dict[str, np.ndarray]:
        """Send an encoded photo (its file's bytes, undecoded) as the BYTES input ``image``."""
        data = image if isinstance(image, (bytes, bytearray)) else Path(image).read_bytes()
        return self.infer(name, {"image": bytes(data)}, outputs, parameters, request_id, timeout=timeout)

    # --- model repository extension ------------------------------------------------------------
    def repository_index(self, timeout: float | None = None) -> list[dict]:
        index = self._json("POST", "/v2/repository/index", b"{}", timeout=timeout)
        if isinstance(index, dict):  # some servers wrap the list
            index = index.get("models", [])
        return list(index) if isinstance(index, list) else []

    def load_model(self, name: str, job_id: str | None = None, timeout: float | None = None) -> None:
        """Load a model and wait until it is ready (``job_id`` makes the load watchable)."""
        body = json.dumps({"parameters": {"job_id": job_id}} if job_id else {}).encode()
        path = f"/v2/repository/models/{quote(name, safe='')}/load"
        self._request("POST", path, [body], _JSON, timeout or self.infer_timeout, model=name)

    def unload_model(self, name: str, timeout: float | None = None) -> None:
        path = f"/v2/repository/models/{quote(name, safe='')}/unload"
        self._request("POST", path, [b"{}"], _JSON, timeout or self.infer_timeout, model=name)

    # --- progress and cancel (sapiens_jobs extension) ---------------------------------------
    def progress(self, request_id: str, timeout: float | None = None) -> dict | None:
        """The job of a running request: ``{"state", "stage", "progress", "message", ...}``.
        ``None`` when the server has no such job (not started yet, or not our server)."""
        path = f"/v2/jobs/{quote(str(request_id), safe='')}"
        status, _, body = self._request("GET", path, timeout=timeout, accept=(200, 404, 400))
        return _loads(body) if status == 200 else None

    def cancel(self, request_id: str, timeout: float | None = None) -> dict | None:
        """Ask the server to cancel a request; its ``infer`` then raises RequestCancelled.
        Returns the job's state, or ``None`` when the server has no such job."""
        path = f"/v2/jobs/{quote(str(request_id), safe='')}/cancel"
        status, _, body = self._request("POST", path, [b""], timeout=timeout, accept=(200, 202, 404, 400))
        return _loads(body, allow_empty=True) if status in (200, 202) else None

    def available_models(self) -> list[str]:
        """Names the server can serve, best effort (empty when it cannot say)."""
        try:
            return sorted({str(m["name"]) for m in self.repository_index() if "name" in m})
        except (SapiensServerError, TypeError):
            return []

    # --- lifecycle ---------------------------------------------------------------------------
    def close(self) -> None:
        with self._lock:
            for conn in list(self._connections.values()):
                conn.close()

    def release_connection(self) -> None:
        """Close the calling thread's connection (for short-lived threads, e.g. a poller)."""
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None
            with self._lock:
                self._connections.pop(threading.get_ident(), None)

    def interrupt(self, thread_ident: int) -> bool:
        """Abandon the request another thread is blocked in (e.g. when the server ignores or lacks
        cancel): its socket is shut down, or its wait for a busy server ended, and that call
        raises RequestCancelled. True if it had one."""
        if self._busy.interrupt(thread_ident):
            return True
        with self._lock:
            conn = self._connections.get(thread_ident)
        sock = getattr(conn, "sock", None)
        if sock is None:
            return False
        conn.interrupted = True
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        return True

    def __enter__(self) -> "V2Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"V2Client({self.base_url!r})"

    # --- HTTP ----------------------------------------------------------------------------------
    def _json(self, method, path, body=None, timeout=None, model=None):
        chunks = None if body is None else [body]
        return _loads(self._request(method, path, chunks, _JSON if chunks else None, timeout, model)[2])

    def _connection(self) -> http.client.HTTPConnection:
        conn = getattr(self._local, "conn", None)
        if conn is None:
            if self._scheme == "https":
                conn = http.client.HTTPSConnection(self._host, self._port, context=self._ssl_context)
            else:
                conn = http.client.HTTPConnection(self._host, self._port)
            self._local.conn = conn
            with self._lock:
                self._connections[threading.get_ident()] = conn
        return conn

    def _request(self, method, path, chunks=None, headers=None, timeout=None, model=None, accept=(200,)):
        """One HTTP exchange -> (status, lower-cased headers, body). Non-accepted statuses raise."""
        timeout = self.timeout if timeout is None else timeout
        all_headers = {"Accept": "application/json, application/octet-stream", **(headers or {})}
        if self.token:
            all_headers["Authorization"] = f"Bearer {self.token}"
        chunks = list(chunks or [])
        all_headers["Content-Length"] = str(sum(memoryview(c).nbytes for c in chunks))
        if method == "GET" and not chunks:
            del all_headers["Content-Length"]
        conn = self._connection()
        conn.interrupted = False
        try:
            status, resp_headers, body = self._send(conn, method, path, chunks, all_headers, timeout)
        except SapiensServerError:
            if not conn.interrupted:
                raise
            conn.close()
            raise RequestCancelled(f"the request was abandoned by the client ({method} {path})") from None
        except BaseException:  # Ctrl-C mid-exchange: a closed socket tells the server to stop, and
            conn.close()  # a half-read answer must not be read as the next one's
            raise
        if status not in accept:
            self._raise(status, resp_headers, body, method, path, model)
        return status, resp_headers, body

    def _send(self, conn, method, path, chunks, headers, timeout):
        """The exchange, retried once on a stale keep-alive socket; OS errors become typed ones."""
        for attempt in (0, 1):
            reused = conn.sock is not None
            try:
                status, resp_headers, body = self._exchange(conn, method, self._prefix + path,
                                                            chunks, headers, timeout)
                return status, resp_headers, body
            except _STALE as exc:
                conn.close()
                if reused and attempt == 0 and not conn.interrupted:
                    continue
                raise ServerNotRunning(
                    f"the inference server at {self.base_url} closed the connection "
                    f"({method} {path}): it may have crashed or stopped", detail=str(exc)
                ) from None
            except (socket.timeout, TimeoutError):
                conn.close()
                raise Timeout(
                    f"the inference server at {self.base_url} did not answer within {timeout:g} s "
                    f"({method} {path})"
                ) from None
            except ConnectionRefusedError as exc:
                conn.close()
                raise ServerNotRunning(
                    f"the inference server at {self.base_url} is not running (connection refused)",
                    detail=str(exc),
                ) from None
            except ProtocolError:
                conn.close()
                raise
            except http.client.IncompleteRead as exc:
                conn.close()
                raise ProtocolError(
                    f"the answer of the inference server at {self.base_url} was cut off after "
                    f"{len(exc.partial)} bytes ({method} {path}): it may have crashed"
                ) from None
            except (OSError, http.client.HTTPException) as exc:
                conn.close()
                raise ServerUnreachable(
                    f"cannot reach the inference server at {self.base_url}: {exc}", detail=str(exc)
                ) from None

    def _exchange(self, conn, method, url, chunks, headers, timeout):
        if conn.sock is None:
            conn.timeout = min(timeout, self.connect_timeout) if timeout else self.connect_timeout
            conn.connect()
        conn.sock.settimeout(timeout)
        conn.putrequest(method, url, skip_accept_encoding=True)
        for key, value in headers.items():
            conn.putheader(key, value)
        try:
            conn.endheaders(chunks[0] if chunks and isinstance(chunks[0], bytes) else None)
            for chunk in chunks[1:] if chunks and isinstance(chunks[0], bytes) else chunks:
                conn.sock.sendall(chunk)
        except (BrokenPipeError, ConnectionResetError):
            # The server may have answered early (e.g. 413 before reading the body) and closed;
            # its answer can still be waiting in our receive buffer.
            pass
        resp = conn.getresponse()
        total = resp.length  # counts down as we read: keep the total
        if total is not None and total > self.max_response_bytes:
            raise ProtocolError(
                f"the inference server at {self.base_url} announced an answer of {total} bytes, "
                f"more than this client accepts ({self.max_response_bytes}; {method} {url})")
        if total is not None:
            # Allocate what arrives, not what is announced: a remote server may lie.
            body = bytearray(min(total, PREALLOCATE_BYTES))
            view, got = memoryview(body), 0
            while got < total:
                if got == len(body):
                    view.release()
                    body.extend(bytes(min(total - got, max(len(body), PREALLOCATE_BYTES))))
                    view = memoryview(body)
                n = resp.readinto(view[got:])
                if not n:
                    raise ProtocolError(
                        f"the answer of the inference server at {self.base_url} was cut off after "
                        f"{got} of {total} bytes ({method} {url}): it may have crashed"
                    )
                got += n
            view.release()
            if not resp.isclosed():  # an empty body is not "read" until read() says so
                resp.read()
        else:
            body = bytearray()
            while chunk := resp.read(1 << 20):
                body += chunk
                if len(body) > self.max_response_bytes:
                    raise ProtocolError(f"the answer of the inference server at {self.base_url} "
                                        f"is longer than {self.max_response_bytes} bytes")
        return resp.status, {k.lower(): v for k, v in resp.getheaders()}, body

    def _raise(self, status, headers, body, method, path, model):
        raise_for_status(status, headers, body, where=f"the inference server at {self.base_url}",
                         request=f"{method} {path}", model=model, available_models=self.available_models)


_JSON = {"Content-Type": "application/json"}


def _model_path(name: str, version: str | None) -> str:
    path = f"/v2/models/{quote(str(name), safe='')}"
    return path if version in (None, "") else f"{path}/versions/{quote(str(version), safe='')}"


def _loads(body, allow_empty: bool = False):
    if allow_empty and not body.strip():
        return {}
    try:
        return json.loads(bytes(body))
    except (ValueError, RecursionError) as exc:  # bad UTF-8/JSON, huge numbers, deep nesting
        raise ProtocolError(f"the server's answer is not valid JSON: {exc}") from None
