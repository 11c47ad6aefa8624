# SPDX-License-Identifier: GPL-3.0-or-later
"""Real server subprocesses for the server tests, and small HTTP helpers (http.client only).

Tests that need special flags or kill the server start their own with :func:`start_server`.
"""

from __future__ import annotations

import http.client
import json
import os
import secrets
import subprocess
import sys
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from inference_server.protocol import messages as protocol
import v2_messages
from repo_paths import REPO, SUPPORT

TINY_MODEL = "tiny-sapiens2-seg"


@dataclass
class Reply:
    status: int
    headers: dict
    body: bytes

    def json(self):
        return json.loads(self.body)


@dataclass
class Server:
    proc: subprocess.Popen
    host: str
    port: int
    token: str
    ready: dict
    log_file: Path

    @property
    def url(self) -> str:
        return f"{self.host}:{self.port}"

    def auth(self, extra: dict | None = None) -> dict:
        return {"Authorization": f"Bearer {self.token}", **(extra or {})}

    def request(self, method: str, path: str, body: bytes | None = None,
                headers: dict | None = None, auth: bool = True, timeout: float = 60) -> Reply:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        try:
            hdrs = self.auth(headers) if auth else dict(headers or {})
            conn.request(method, path, body=body, headers=hdrs)
            resp = conn.getresponse()
            return Reply(resp.status, {k.lower(): v for k, v in resp.getheaders()}, resp.read())
        finally:
            conn.close()

    def get(self, path: str, **kw) -> Reply:
        return self.request("GET", path, **kw)

    def post_json(self, path: str, obj, **kw) -> Reply:
        return self.request("POST", path, json.dumps(obj).encode(),
                            {"Content-Type": "application/json"}, **kw)

    def infer(self, model: str, inputs: list[protocol.Tensor], *, binary: bool = True,
              parameters: dict | None = None, id: str | None = None, outputs=None,
              timeout: float = 120) -> tuple[Reply, dict[str, protocol.Tensor]]:
        """POST an infer; returns the reply and, when it is 200, the decoded output tensors."""
        body, hlen = v2_messages.encode_infer_request(inputs, binary=binary, id=id,
                                                   parameters=parameters, outputs=outputs)
        headers = {"Content-Type": "application/octet-stream" if hlen else "application/json"}
        if hlen is not None:
            headers["Inference-Header-Content-Length"] = str(hlen)
        reply = self.request("POST", f"/v2/models/{model}/infer", body, headers, timeout=timeout)
        if reply.status != 200:
            return reply, {}
        length = reply.headers.get("inference-header-content-length")
        _, tensors = v2_messages.parse_infer_response(reply.body, int(length) if length else None)
        return reply, tensors

    def alive(self) -> bool:
        return self.proc.poll() is None and self.get("/v2/health/live", auth=False).status == 200

    def stop(self, timeout: float = 15) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def server_env(token: str | None) -> dict:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(SUPPORT), env.get("PYTHONPATH", "")])
    env.pop("SAPIENS_TOKEN", None)
    if token is not None:
        env["SAPIENS_TOKEN"] = token
    return env


def start_server(tmp_path: Path, *args: str, token: str | None = "auto",
                 timeout: float = 60, env: dict | None = None) -> Server:
    """Start ``python -m inference_server --port 0 ARGS`` and wait for its ready line."""
    token = secrets.token_hex(24) if token == "auto" else token
    log_file = tmp_path / f"server-{secrets.token_hex(4)}.log"
    proc = subprocess.Popen(
        [sys.executable, "-m", "inference_server", "--port", "0", "--log-file", str(log_file),
         *args],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env or server_env(token), cwd=REPO)
    line: list[bytes] = []
    reader = threading.Thread(target=lambda: line.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout)
    if not line or not line[0]:
        proc.kill()
        _, err = proc.communicate(timeout=10)
        raise RuntimeError(f"server did not start: {err.decode(errors='replace')[-3000:]}")
    ready = json.loads(line[0])
    # Drain stderr so a chatty server never blocks on a full pipe.
    threading.Thread(target=lambda: proc.stderr.read(), daemon=True).start()
    return Server(proc, "127.0.0.1", ready["port"], token, ready, log_file)


def png_bytes(image, **save) -> bytes:
    """Encode a numpy array or a PIL image (PNG unless ``format=`` says otherwise)."""
    import io

    from PIL import Image

    if not isinstance(image, Image.Image):
        image = Image.fromarray(image)
    buf = io.BytesIO()
    image.save(buf, format=save.pop("format", "PNG"), **save)
    return buf.getvalue()


def sample(datatype: str) -> np.ndarray:
    rng = np.random.default_rng(7)
    if datatype == "BYTES":
        return np.array([b"", b"\x00\xffbinary", "héllo".encode()], dtype=object).reshape(3, 1)
    if datatype == "BOOL":
        return rng.random((2, 3)) > 0.5
    dt = protocol.NUMPY_DTYPES[datatype]
    if dt.kind in "iu":
        info = np.iinfo(dt)
        return np.array([[info.min, info.max, 0], [1, info.max - 1, info.min + 1]], dt)
    arr = rng.standard_normal((2, 3)).astype(dt)
    if datatype != "BF16":
        arr[0, 0], arr[0, 1], arr[0, 2] = np.nan, np.inf, -np.inf
    return arr


def assert_same(a: np.ndarray, b: np.ndarray) -> None:
    assert a.shape == b.shape
    if a.dtype == object:
        assert a.tolist() == b.tolist()
    else:
        assert a.dtype == b.dtype
        assert a.tobytes() == b.tobytes()  # bit-exact, NaN included


def raw_exchange(server: Server, request: bytes, *, send_all: bool = True,
                 timeout: float = 30) -> bytes:
    """Send raw bytes on a fresh socket and read the answer until the server closes."""
    import socket

    with socket.create_connection((server.host, server.port), timeout=timeout) as sock:
        try:
            sock.sendall(request)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server may answer and close before it reads everything
        if not send_all:
            sock.shutdown(socket.SHUT_WR)
        chunks = []
        while True:
            try:
                data = sock.recv(65536)
            except (ConnectionResetError, TimeoutError):
                break
            if not data:
                break
            chunks.append(data)
            if b"\r\n\r\n" in b"".join(chunks) and _complete(b"".join(chunks)):
                break
        return b"".join(chunks)


def _complete(raw: bytes) -> bool:
    head, _, body = raw.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def status_of(raw: bytes) -> int:
    return int(raw.split(b" ", 2)[1])
