# SPDX-License-Identifier: GPL-3.0-or-later
"""Our bpy-free client against our real server subprocess, over real sockets."""

import socket
import sys
import threading
import time

import numpy as np
import pytest

from sapiens_blender.core import errors
from sapiens_blender.core.remote import v2_codec
from sapiens_blender.core.remote.client import V2Client
from sapiens_blender.core.local_server.process import ServerProcess
from sapiens_blender.core.remote.v2_codec import Tensor
from tensor_samples import FIXED, sample
from repo_paths import REPO, SUPPORT

MAX_BODY = 8 * 1024 * 1024

@pytest.fixture(scope="module")
def server(tmp_path_factory):
    manager = ServerProcess(
        sys.executable,
        ["--enable-echo", "--backend-module", "tiny_maps_backend", "--no-autoload",
         "--max-body-bytes", str(MAX_BODY), "--max-queue", "2"],
        log_dir=tmp_path_factory.mktemp("server-log"),
        env={"PYTHONPATH": f"{REPO}{__import__('os').pathsep}{SUPPORT}"},
        startup_timeout=60,
    )  # fmt: skip
    manager.ensure_running()
    yield manager
    manager.stop()


@pytest.fixture()
def client(server):
    return server.ensure_running()




def test_health_and_metadata(client):
    assert client.live() and client.ready()
    meta = client.server_metadata()
    assert "binary_tensor_data" in meta["extensions"]
    assert client.model_metadata("echo")["name"] == "echo"
    names = {m["name"] for m in client.repository_index()}
    assert {"echo", "tiny-maps", "tiny-broken"} <= names


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
@pytest.mark.parametrize("datatype", FIXED)
def test_every_datatype_roundtrips(client, datatype, binary):
    array = sample(datatype, shape=(3, 4), seed=7, specials=True)
    out = client.infer("echo", {"x": array}, binary=binary)
    assert out["x"].dtype == array.dtype and out["x"].shape == array.shape
    np.testing.assert_array_equal(out["x"], array)


def test_bytes_and_bf16_roundtrip(client):
    strings = np.array([b"", b"\x00\xff\xfe binary", "caf\u00e9".encode(), b"x" * 1000], dtype=object)
    bits = v2_codec.float32_to_bf16(np.array([[1.0, -0.5], [3.0, np.inf]], np.float32))
    out = client.infer("echo", {"s": strings.reshape(2, 2), "b": Tensor(bits, "BF16"), "one": b"\x89PNG"})
    assert list(out["s"].reshape(-1)) == list(strings)
    assert out["s"].shape == (2, 2)
    assert out["one"].tolist() == [b"\x89PNG"]
    # the server may hand BF16 back as raw uint16 or as ml_dtypes.bfloat16: compare the bits
    np.testing.assert_array_equal(np.asarray(out["b"]).view(np.uint16), bits)
    text = np.array(["h\u00e9llo", "w\u00f6rld"], dtype=object)
    out = client.infer("echo", {"t": text}, binary=False)
    assert list(out["t"]) == ["h\u00e9llo".encode(), "w\u00f6rld".encode()]


def test_dense_map_and_requested_outputs(client):
    depth = np.random.default_rng(0).random((384, 512, 3), dtype=np.float32)
    out = client.infer("echo", {"depth": depth, "tag": np.arange(3, dtype=np.int32)}, outputs=["depth"])
    assert list(out) == ["depth"]
    np.testing.assert_array_equal(out["depth"], depth)
    out["depth"][0, 0, 0] = -1  # writable: callers may edit maps in place


def test_server_not_running_is_clear():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    client = V2Client(f"http://127.0.0.1:{port}", "t")
    with pytest.raises(errors.ServerNotRunning, match=f"127.0.0.1:{port} is not running"):
        client.server_metadata()


@pytest.mark.parametrize("token", [None, "wrong-token"])
def test_wrong_or_missing_token(server, token):
    client = V2Client(server.url, token)
    assert client.live()  # health needs no token
    with pytest.raises(errors.AuthenticationError, match="wrong or missing token") as info:
        client.infer("echo", {"x": np.zeros(2, np.float32)})
    assert info.value.status == 401


def test_unknown_model_lists_the_available_ones(client):
    with pytest.raises(errors.ModelNotFound, match="no model 'nope'.*echo.*tiny-maps") as info:
        client.infer("nope", {"x": np.zeros(1, np.float32)})
    assert "tiny-maps" in info.value.available
    with pytest.raises(errors.ModelNotFound):
        client.model_metadata("nope")
    with pytest.raises(errors.ModelNotFound):
        client.model_ready("nope")


def test_model_not_ready_then_load_and_unload(client):
    client.unload_model("tiny-maps")
    assert client.model_ready("tiny-maps") is False
    with pytest.raises(errors.ModelNotReady, match="not loaded"):
        client.infer_image("tiny-maps", _tiny_png())
    client.load_model("tiny-maps")
    assert client.model_ready("tiny-maps") is True
    client.unload_model("tiny-maps")
    assert client.model_ready("tiny-maps") is False


def test_request_too_large_then_server_still_serves(client):
    big = np.zeros(MAX_BODY + 1024, np.uint8)
    with pytest.raises(errors.RequestTooLarge) as info:
        client.infer("echo", {"x": big})
    assert info.value.status == 413
    assert client.infer("echo", {"x": np.ones(2, np.int8)})["x"].tolist() == [1, 1]


def test_server_error_message_is_surfaced(client):
    from tiny_maps_backend import BROKEN_MESSAGE

    client.load_model("tiny-broken")
    png = _tiny_png()
    with pytest.raises(errors.ServerError, match=BROKEN_MESSAGE) as info:
        client.infer_image("tiny-broken", png)
    assert info.value.status == 500


def test_bad_image_bytes_is_a_clear_invalid_request(client):
    client.load_model("tiny-maps")
    with pytest.raises(errors.InvalidRequest) as info:
        client.infer_image("tiny-maps", b"this is not an image")
    assert info.value.status == 400 and "image" in str(info.value)


def test_progress_and_cancel(client):
    result = {}

    def run():
        try:
            client.infer("echo", {"x": np.zeros(1, np.float32)}, parameters={"delay_ms": 5000},
                         request_id="cancel-me")  # fmt: skip
        except errors.SapiensServerError as exc:
            result["error"] = exc

    worker = threading.Thread(target=run)
    start = time.monotonic()
    worker.start()
    job = None
    while time.monotonic() - start < 5:
        job = client.progress("cancel-me")
        if job and job.get("progress"):
            break
        time.sleep(0.05)
    assert job and job["state"] == "running" and 0 < job["progress"] < 1
    assert client.cancel("cancel-me") is not None
    worker.join(5)
    assert isinstance(result.get("error"), errors.RequestCancelled)
    assert time.monotonic() - start < 4.5  # it stopped early, not after the full delay
    assert client.progress("no-such-job") is None


def test_timeout_is_typed_and_the_client_recovers(client):
    with pytest.raises(errors.Timeout, match="did not answer within 0.3 s"):
        client.infer("echo", {"x": np.zeros(1, np.float32)}, parameters={"delay_ms": 1500},
                     request_id="slow", timeout=0.3)  # fmt: skip
    client.cancel("slow")
    assert client.infer("echo", {"x": np.ones(1, np.uint8)})["x"].tolist() == [1]


def test_busy_server_says_when_to_retry(client):
    # max-concurrency 1 + max-queue 2: a fourth simultaneous request is refused with 503.
    ids = [f"busy-{i}" for i in range(3)]
    threads = [threading.Thread(target=_swallow, args=(client, rid)) for rid in ids]
    for t in threads:
        t.start()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and not all(client.progress(rid) for rid in ids):
        time.sleep(0.02)
    try:
        client.busy_retry_s = 0  # say it at once (the default asks again: test_busy_retry.py)
        with pytest.raises(errors.ServerBusy) as info:
            client.infer("echo", {"x": np.zeros(1, np.float32)})
        assert info.value.retry_after is not None and info.value.retry_after >= 0
        client.busy_retry_s = 30  # by default the client waits its turn
        assert client.infer("echo", {"x": np.ones(1, np.float32)})["x"].tolist() == [1.0]
    finally:
        client.busy_retry_s = 120.0
        for rid in ids:
            client.cancel(rid)
        for t in threads:
            t.join(5)


def test_one_client_shared_by_threads(client):
    failures = []

    def work(seed):
        rng = np.random.default_rng(seed)
        for _ in range(10):
            x = rng.random((64, 48), dtype=np.float32)
            try:
                if not np.array_equal(client.infer("echo", {"x": x})["x"], x):
                    failures.append("mismatch")
            except errors.SapiensServerError as exc:
                failures.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert failures == []


def test_stale_keep_alive_socket_is_retried_once():
    """A server that closes an idle keep-alive connection: the next call reconnects silently."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(2)
    answer = b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{"live":true}'
    served = []

    def serve():
        for _ in range(2):
            conn, _ = listener.accept()
            conn.recv(65536)
            conn.sendall(answer)  # keep-alive by HTTP/1.1 default ...
            served.append(1)
            conn.close()  # ... but the server drops it, as idle timeouts do

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client = V2Client(f"http://127.0.0.1:{listener.getsockname()[1]}")
    assert client.live()
    time.sleep(0.1)
    assert client.live()  # the first attempt hits the closed socket, the retry succeeds
    thread.join(5)
    listener.close()
    assert len(served) == 2


def _swallow(client, request_id):
    try:
        client.infer("echo", {"x": np.zeros(1, np.float32)}, parameters={"delay_ms": 3000},
                     request_id=request_id)  # fmt: skip
    except errors.SapiensServerError:
        pass


def _tiny_png() -> bytes:
    import io

    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(np.full((8, 6, 3), 200, np.uint8)).save(buf, format="PNG")
    return buf.getvalue()
