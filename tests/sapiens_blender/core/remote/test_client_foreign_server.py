# SPDX-License-Identifier: GPL-3.0-or-later
"""The client against a v2 server that is not ours (remote mode: Triton/KServe on a GPU box).

A stdlib HTTP server answers the way Triton does: empty health bodies, 400 "Request for unknown
model" instead of 404, no jobs extension, a binary infer answer. The client must not depend on
anything of ours for health, metadata and infer.
"""

import json
import struct
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest

from sapiens_blender.core import errors
from sapiens_blender.core.remote.analysis import analyze_photo
from sapiens_blender.core.remote.client import V2Client

MODELS = [{"name": "densenet_onnx", "version": "1", "state": "READY"},
          {"name": "slow_model", "version": "1", "state": "READY"},
          {"name": "sapiens_depth", "version": "1", "state": "UNAVAILABLE", "reason": "unloaded"}]  # fmt: skip


class TritonLike(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # keep pytest output clean
        pass

    def _send(self, status, body=b"", headers=None):
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _unknown(self, name):
        self._send(400, json.dumps({"error": f"Request for unknown model: '{name}' is not found"}).encode())

    def do_GET(self):
        parts = self.path.strip("/").split("/")
        if self.path in ("/v2/health/live", "/v2/health/ready"):
            return self._send(200)  # Triton: 200 with an empty body
        if self.path == "/v2":
            return self._send(200, json.dumps({"name": "triton", "version": "2.51.0",
                                               "extensions": ["binary_tensor_data"]}).encode())  # fmt: skip
        if parts[:2] == ["v2", "models"] and len(parts) >= 3:
            name = parts[2]
            if name not in {m["name"] for m in MODELS}:
                return self._unknown(name)
            if parts[-1] == "ready":
                ready = name == "densenet_onnx"
                return self._send(200 if ready else 400,
                                  b"" if ready else b'{"error":"model is not ready"}')  # fmt: skip
            return self._send(200, json.dumps({"name": name, "platform": "onnxruntime_onnx"}).encode())
        self._send(400, b'{"error":"Not Found"}')

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        parts = self.path.strip("/").split("/")
        if self.path == "/v2/repository/index":
            return self._send(200, json.dumps(MODELS).encode())
        if parts[:2] == ["v2", "models"] and parts[-1] == "infer":
            if parts[2] == "slow_model":  # a long inference; this server has no cancel endpoint
                time.sleep(3)
                return self._send(500, b'{"error":"too late"}')
            if parts[2] != "densenet_onnx":
                return self._unknown(parts[2])
            hlen = int(self.headers["Inference-Header-Content-Length"])
            request = json.loads(body[:hlen])
            size = request["inputs"][0]["parameters"]["binary_data_size"]
            x = np.frombuffer(body[hlen : hlen + size], "<f4")
            out = (x * 2).astype("<f4").tobytes()
            label = b"cat"
            labels = struct.pack("<I", len(label)) + label
            head = json.dumps({"model_name": parts[2], "model_version": "1", "outputs": [
                {"name": "doubled", "datatype": "FP32", "shape": request["inputs"][0]["shape"],
                 "parameters": {"binary_data_size": len(out)}},
                {"name": "label", "datatype": "BYTES", "shape": [1],
                 "parameters": {"binary_data_size": len(labels)}},
                {"name": "score", "datatype": "FP32", "shape": [1], "data": [0.5]}]}).encode()  # fmt: skip
            return self._send(200, head + out + labels, {
                "Content-Type": "application/octet-stream",
                "Inference-Header-Content-Length": str(len(head))})  # fmt: skip
        self._send(400, b'{"error":"Not Found"}')


class QuietServer(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False

    def handle_error(self, request, client_address):  # a client that hung up: expected here
        pass


@pytest.fixture(scope="module")
def client():
    httpd = QuietServer(("127.0.0.1", 0), TritonLike)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield V2Client(f"http://127.0.0.1:{httpd.server_address[1]}", token="unused")
    httpd.shutdown()
    httpd.server_close()


def test_health_and_metadata_with_empty_bodies(client):
    assert client.live() and client.ready()
    assert client.server_metadata()["name"] == "triton"
    assert client.model_ready("densenet_onnx") is True
    assert client.model_ready("sapiens_depth") is False


def test_binary_infer(client):
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    out = client.infer("densenet_onnx", {"input": x})
    np.testing.assert_array_equal(out["doubled"], x * 2)
    assert out["label"].tolist() == [b"cat"] and out["score"].tolist() == [0.5]


def test_triton_unknown_model_is_model_not_found(client):
    with pytest.raises(errors.ModelNotFound, match="densenet_onnx, sapiens_depth, slow_model") as info:
        client.infer("nope", {"x": np.zeros(1, np.float32)})
    assert info.value.status == 400
    with pytest.raises(errors.ModelNotFound):
        client.model_ready("nope")


def test_no_jobs_extension_means_unknown_progress(client):
    assert client.progress("anything") is None
    assert client.cancel("anything") is None


def test_answer_cut_off_mid_body_is_a_protocol_error():
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)

    def serve():
        conn, _ = listener.accept()
        conn.recv(65536)
        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n\r\n" + b"{" * 10)
        conn.close()  # a crash mid-answer

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = V2Client(f"http://127.0.0.1:{listener.getsockname()[1]}")
    with pytest.raises(errors.ProtocolError, match="cut off after 10 "):
        client.server_metadata()
    thread.join(5)
    listener.close()


def test_cancel_without_a_jobs_endpoint_abandons_the_request(client):
    cancel = threading.Event()
    timer = threading.Timer(0.2, cancel.set)
    timer.start()
    start = time.monotonic()
    with pytest.raises(errors.RequestCancelled):
        analyze_photo(client, b"\xff\xd8 jpeg bytes", "slow_model", cancel_event=cancel,
                      poll_interval=0.05, cancel_grace=0.3)  # fmt: skip
    assert time.monotonic() - start < 2.5  # not the 3 s the server takes
    assert client.live()  # the client's next call works on a fresh connection
