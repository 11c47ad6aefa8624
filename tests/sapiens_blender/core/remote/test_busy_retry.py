# SPDX-License-Identifier: GPL-3.0-or-later
"""A busy server (503 + Retry-After) is asked again with backoff, for a bounded time, and the
wait can be cancelled. Over real sockets against a scripted HTTP server."""

from __future__ import annotations

import json
import socket
import threading
import time

import numpy as np
import pytest

from sapiens_blender.core import errors
from sapiens_blender.core.remote.client import V2Client

ANSWER = json.dumps({"model_name": "m", "outputs": [{"name": "x", "datatype": "FP32", "shape": [1],
                                                      "data": [7.0]}]}).encode()


class Scripted:
    """Answers each request with the next of ``answers``: a Retry-After value (503) or None (200)."""

    def __init__(self, answers):
        self.answers, self.times = list(answers), []
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(4)
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn):
        buf = b""
        with conn:
            while True:
                while b"\r\n\r\n" not in buf:
                    chunk = conn.recv(65536)
                    if not chunk:
                        return
                    buf += chunk
                head, buf = buf.split(b"\r\n\r\n", 1)
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                while len(buf) < length:
                    buf += conn.recv(65536)
                buf = buf[length:]
                self.times.append(time.monotonic())
                retry = self.answers.pop(0) if self.answers else self.answers_default
                if retry is None:
                    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: "
                                 + str(len(ANSWER)).encode() + b"\r\n\r\n" + ANSWER)
                else:
                    body = b'{"error": "the server is busy; retry later"}'
                    conn.sendall(b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: application/json\r\n"
                                 b"Retry-After: " + str(retry).encode() + b"\r\nContent-Length: "
                                 + str(len(body)).encode() + b"\r\n\r\n" + body)

    answers_default = 30

    def close(self):
        self.listener.close()


def _infer(client):
    return client.infer("m", {"x": np.zeros(1, np.float32)})["x"].tolist()


def test_a_busy_server_is_asked_again_after_its_hint():
    server = Scripted([0.8, 0.8, None])
    try:
        start = time.monotonic()
        assert _infer(V2Client(server.url)) == [7.0]
        gaps = np.diff(server.times)
        assert len(server.times) == 3
        assert 0.8 <= gaps[0] < 1.1  # the server's Retry-After, not the first backoff (0.5 s)
        assert 1.0 <= gaps[1] < 1.35  # then the backoff, longer than the hint
        assert time.monotonic() - start < 3
    finally:
        server.close()


def test_a_short_hint_repeated_lets_the_waits_double():
    server = Scripted([0.1, 0.1, None])
    try:
        assert _infer(V2Client(server.url)) == [7.0]
        gaps = np.diff(server.times)
        assert 0.5 <= gaps[0] < 0.7 and 1.0 <= gaps[1] < 1.35
    finally:
        server.close()


def test_a_503_without_a_hint_is_not_asked_again():
    """No Retry-After: a server shutting down or a model that cannot load, not a full queue."""
    server = Scripted(["x"])  # an unreadable Retry-After: no hint
    try:
        with pytest.raises(errors.ServerBusy, match="is busy: "):
            _infer(V2Client(server.url))
        assert len(server.times) == 1
    finally:
        server.close()


def test_retrying_is_bounded_and_says_so():
    server = Scripted([0.8, 0.8, 0.8])
    try:
        start = time.monotonic()
        with pytest.raises(errors.ServerBusy, match=r"is busy; retry in 0.8 s: .* \(still busy after 2 tries\)"):
            _infer(V2Client(server.url, busy_retry_s=1.5))
        assert time.monotonic() - start < 1.5 and len(server.times) == 2
        with pytest.raises(errors.ServerBusy, match=r"busy; retry in 0.8 s: [^(]*$"):  # 0: no retry
            _infer(V2Client(server.url, busy_retry_s=0))
    finally:
        server.close()


def test_the_wait_is_cancelled_by_interrupt():
    server = Scripted([])  # always busy, retry in 30 s
    client = V2Client(server.url)
    caught = []
    worker = threading.Thread(target=lambda: caught.append(pytest.raises(errors.RequestCancelled, _infer, client)))
    try:
        worker.start()
        deadline = time.monotonic() + 5
        while not server.times and time.monotonic() < deadline:
            time.sleep(0.01)
        time.sleep(0.1)
        start = time.monotonic()
        assert client.interrupt(worker.ident)
        worker.join(5)
        assert not worker.is_alive() and time.monotonic() - start < 1.0
        assert "while the server was busy" in str(caught[0].value)
    finally:
        server.close()
