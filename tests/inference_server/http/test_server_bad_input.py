# SPDX-License-Identifier: GPL-3.0-or-later
"""Bad input against the real server: each gets a clear {"error"} with the right status, and
the server keeps serving afterwards (the ``alive_after`` fixture checks with an echo)."""

from __future__ import annotations

import io
import json
import socket
import struct
import zlib

import numpy as np
import pytest
from PIL import Image
from server_harness import TINY_MODEL, png_bytes, raw_exchange, start_server, status_of

from inference_server.protocol import messages as protocol
import v2_messages


def post_infer(server, body: bytes, model: str = "echo", header_length=None):
    headers = {"Content-Type": "application/octet-stream"}
    if header_length is not None:
        headers["Inference-Header-Content-Length"] = str(header_length)
    return server.request("POST", f"/v2/models/{model}/infer", body, headers)


def expect_error(reply, status: int, *words: str) -> str:
    assert reply.status == status, (reply.status, reply.body[:300])
    message = reply.json()["error"]
    assert isinstance(message, str) and message
    for word in words:
        assert word in message, message
    return message


def image_input(data: bytes) -> protocol.Tensor:
    return protocol.tensor("image", np.array([data], dtype=object), "BYTES")


def test_malformed_json(alive_after):
    expect_error(post_infer(alive_after, b'{"inputs": [ {"name": '), 400, "not valid JSON")


def test_header_length_larger_than_body(alive_after):
    body, hlen = v2_messages.encode_infer_request([protocol.tensor("x", np.zeros(4, np.float32))])
    expect_error(post_infer(alive_after, body, header_length=len(body) + 10), 400,
                 "Inference-Header-Content-Length")
    expect_error(post_infer(alive_after, body, header_length="twelve"), 400, "not an integer")


def test_binary_size_not_matching_shape_and_dtype(alive_after):
    head = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [3],
                                   "parameters": {"binary_data_size": 8}}]}).encode()
    expect_error(post_infer(alive_after, head + b"\0" * 8, header_length=len(head)), 400, "needs 12")


def test_unknown_datatype(alive_after):
    body = json.dumps({"inputs": [{"name": "x", "datatype": "COMPLEX64", "shape": [1],
                                   "data": [1]}]}).encode()
    expect_error(post_infer(alive_after, body), 400, "unknown datatype")


@pytest.mark.parametrize("inputs, words", [
    ([protocol.tensor("image", np.zeros(1, np.float32))], ["BYTES"]),
    ([protocol.tensor("pixels", np.zeros((4, 4, 4), np.uint8))], ["[H,W,3]"]),
    ([protocol.tensor("pixels", np.zeros((4, 4, 3), np.float32))], ["UINT8"]),
    ([protocol.tensor("photo", np.zeros((4, 4, 3), np.uint8))], ["exactly one input"]),
    ([], ["exactly one input"]),
])
def test_wrong_input_for_the_model(alive_after, inputs, words):
    reply, _ = alive_after.infer(TINY_MODEL, inputs)
    expect_error(reply, 400, *words)


def test_unknown_model(alive_after):
    reply, _ = alive_after.infer("no-such-model", [protocol.tensor("x", [1])])
    expect_error(reply, 404, "unknown model", "no-such-model")
    expect_error(alive_after.get("/v2/models/no-such-model"), 404)
    expect_error(alive_after.get("/v2/no/such/path"), 404)


def test_bytes_that_are_not_an_image(alive_after):
    reply, _ = alive_after.infer(TINY_MODEL, [image_input(b"GIF89a but not really" * 10)])
    expect_error(reply, 400, "not an image")


def _png_chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def test_zero_size_images(alive_after):
    reply, _ = alive_after.infer(TINY_MODEL, [image_input(b"")])
    expect_error(reply, 400, "empty")
    reply, _ = alive_after.infer(TINY_MODEL, [protocol.tensor("pixels", np.zeros((0, 0, 3), np.uint8))])
    expect_error(reply, 400, "empty")
    # A PNG whose header claims 0 x 0 pixels.
    header = struct.pack(">IIBBBBB", 0, 0, 8, 2, 0, 0, 0)
    png = (b"\x89PNG\r\n\x1a\n" + _png_chunk(b"IHDR", header)
           + _png_chunk(b"IDAT", zlib.compress(b"")) + _png_chunk(b"IEND", b""))
    reply, _ = alive_after.infer(TINY_MODEL, [image_input(png)])
    assert reply.status == 400, reply.body


def test_decompression_bomb_is_refused_from_its_header(alive_after):
    buf = io.BytesIO()
    Image.new("1", (10_000, 10_000)).save(buf, format="PNG")  # 100 Mpx in ~13 kB
    assert len(buf.getvalue()) < 100_000
    reply, _ = alive_after.infer(TINY_MODEL, [image_input(buf.getvalue())])
    expect_error(reply, 413, "megapixels")


def test_body_over_the_cap_is_refused_before_reading(alive_after):
    cap = 256 * 1024 * 1024
    request = (f"POST /v2/models/echo/infer HTTP/1.1\r\nHost: 127.0.0.1:{alive_after.port}\r\n"
               f"Authorization: Bearer {alive_after.token}\r\nContent-Length: {cap + 1}\r\n\r\n")
    raw = raw_exchange(alive_after, request.encode() + b"{" * 1000)
    assert status_of(raw) == 413 and b"larger than the server's limit" in raw


def test_chunked_body_over_the_cap_is_cut_off(tmp_path):
    small = start_server(tmp_path, "--enable-echo", "--max-body-bytes", "100000")
    try:
        def chunks():
            for _ in range(40):
                yield b"x" * 10_000
        import http.client

        conn = http.client.HTTPConnection(small.host, small.port, timeout=30)
        try:
            conn.request("POST", "/v2/models/echo/infer", body=chunks(),
                         headers=small.auth({"Transfer-Encoding": "chunked"}),
                         encode_chunked=True)
            resp = conn.getresponse()
            status, message = resp.status, json.loads(resp.read())["error"]
        except (BrokenPipeError, ConnectionResetError):
            raw = raw_exchange(small, b"")  # pragma: no cover - depends on timing
            status, message = status_of(raw), ""
        finally:
            conn.close()
        assert status == 413 and "100000" in message
        reply, out = small.infer("echo", [protocol.tensor("x", [1.5])])
        assert reply.status == 200 and out["x"].array.tolist() == [1.5]
    finally:
        assert small.stop() == 0


def test_missing_or_wrong_token(alive_after):
    for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": alive_after.token}):
        reply = alive_after.request("GET", "/v2", headers=headers, auth=False)
        expect_error(reply, 401, "token")
        assert reply.headers.get("www-authenticate") == "Bearer"
    body, _ = v2_messages.encode_infer_request([protocol.tensor("x", [1])], binary=False)
    reply = alive_after.request("POST", "/v2/models/echo/infer", body, auth=False)
    expect_error(reply, 401)


@pytest.mark.parametrize("host", ["evil.example", "127.0.0.1.nip.io", "localhost:1",
                                  "attacker.com:{port}"])
def test_foreign_host_header(alive_after, host):
    host = host.format(port=alive_after.port)
    request = (f"GET /v2 HTTP/1.1\r\nHost: {host}\r\n"
               f"Authorization: Bearer {alive_after.token}\r\n\r\n")
    raw = raw_exchange(alive_after, request.encode())
    assert status_of(raw) == 403 and b"DNS-rebinding" in raw


def test_loopback_host_names_are_accepted(alive_after):
    for host in (f"127.0.0.1:{alive_after.port}", f"localhost:{alive_after.port}", "localhost"):
        request = (f"GET /v2 HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n"
                   f"Authorization: Bearer {alive_after.token}\r\n\r\n")
        assert status_of(raw_exchange(alive_after, request.encode())) == 200


def test_client_disconnecting_mid_upload(alive_after):
    for _ in range(3):
        with socket.create_connection((alive_after.host, alive_after.port), timeout=10) as sock:
            sock.sendall((f"POST /v2/models/echo/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                          f"Authorization: Bearer {alive_after.token}\r\n"
                          f"Inference-Header-Content-Length: 100\r\n"
                          f"Content-Length: 10000000\r\n\r\n").encode() + b"\0" * 50_000)
        # closed with 9.95 MB still owed; the next request must work (alive_after checks)
    reply, _ = alive_after.infer(TINY_MODEL, [image_input(png_bytes(np.zeros((8, 8, 3), np.uint8)))])
    assert reply.status == 200


def test_json_part_over_its_cap(tmp_path):
    small = start_server(tmp_path, "--enable-echo", "--max-json-bytes", "2000")
    try:
        big = protocol.tensor("x", np.zeros(1000, np.float32))
        reply, _ = small.infer("echo", [big], binary=False)
        expect_error(reply, 413, "send large tensors as binary")
        reply, out = small.infer("echo", [big], binary=True)
        assert reply.status == 200 and out["x"].array.shape == (1000,)
    finally:
        assert small.stop() == 0
