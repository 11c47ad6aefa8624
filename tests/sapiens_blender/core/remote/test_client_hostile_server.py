# SPDX-License-Identifier: GPL-3.0-or-later
"""A remote --server may be anyone's: answers that lie about their size or shape must fail
cleanly (ProtocolError) before the client allocates what they claim."""

from __future__ import annotations

import json
import socket
import threading
import tracemalloc

import numpy as np
import pytest

from sapiens_blender.core import errors
from sapiens_blender.core.remote import v2_codec
from sapiens_blender.core.remote.client import V2Client


def _one_answer(raw: bytes):
    """A one-shot server on loopback that answers ``raw`` to the first request."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve():
        conn, _ = listener.accept()
        conn.recv(65536)
        try:
            conn.sendall(raw)
        finally:
            conn.close()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return V2Client(f"http://127.0.0.1:{listener.getsockname()[1]}", token="t"), listener


def _infer_answer(head: dict, tail: bytes = b"") -> bytes:
    header = json.dumps(head).encode()
    body = header + tail
    return (b"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n"
            b"Inference-Header-Content-Length: %d\r\nContent-Length: %d\r\n\r\n"
            % (len(header), len(body))) + body


def _bounded_peak(fn) -> int:
    tracemalloc.start()
    try:
        fn()
    finally:
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
    return peak


@pytest.mark.parametrize("outputs, tail, words", [
    # 114 bytes claiming 2**28 BYTES elements: formerly a 2 GB object array before failing
    ([{"name": "x", "datatype": "BYTES", "shape": [2**28],
       "parameters": {"binary_data_size": 4}}], b"\0\0\0\0", "needs at least"),
    # int64 overflow of the element count (numpy's product wraps to 0)
    ([{"name": "x", "datatype": "FP32", "shape": [2**62, 4],
       "parameters": {"binary_data_size": 0}}], b"", "more elements"),
    ([{"name": "x", "datatype": "FP32", "shape": [2**70, 0], "data": []}], b"", "more elements"),
    ([{"name": "x", "datatype": "FP32", "shape": [1], "parameters": {"binary_data_size": "4"}}],
     b"\0\0\0\0", "integer"),
])
def test_lying_shapes_are_protocol_errors_without_big_allocations(outputs, tail, words):
    body = json.dumps({"outputs": outputs}).encode()

    def decode():
        with pytest.raises(errors.ProtocolError, match=words):
            v2_codec.decode_response(body + tail, len(body))

    assert _bounded_peak(decode) < 8 << 20


def test_deeply_nested_answers_are_protocol_errors():
    body = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(errors.ProtocolError):
        v2_codec.decode_response(body, None)


def test_an_announced_huge_body_is_refused_before_allocating():
    client, listener = _one_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 100000000000\r\n\r\n{}")
    try:
        def call():
            with pytest.raises(errors.ProtocolError, match="announced an answer"):
                client.server_metadata()

        assert _bounded_peak(call) < 8 << 20
    finally:
        listener.close()


def test_a_cut_off_large_answer_allocates_what_arrived_not_what_was_announced():
    client, listener = _one_answer(b"HTTP/1.1 200 OK\r\nContent-Length: 4000000000\r\n\r\n{}")
    client.max_response_bytes = 8 * 1024**3
    try:
        def call():
            with pytest.raises(errors.ProtocolError, match="cut off"):
                client.server_metadata()

        assert _bounded_peak(call) < 128 << 20
    finally:
        listener.close()


def test_a_lying_infer_answer_through_the_client():
    head = {"outputs": [{"name": "x", "datatype": "BYTES", "shape": [2**28],
                         "parameters": {"binary_data_size": 4}}]}
    client, listener = _one_answer(_infer_answer(head, b"\0\0\0\0"))
    try:
        with pytest.raises(errors.ProtocolError, match="needs at least"):
            client.infer("m", {"x": np.zeros(1, np.float32)})
    finally:
        listener.close()
