# SPDX-License-Identifier: GPL-3.0-or-later
"""Interop: NVIDIA's own v2 client (tritonclient.http) against our server, binary tensors."""

from __future__ import annotations

import numpy as np
import pytest
from server_harness import TINY_MODEL, png_bytes

httpclient = pytest.importorskip("tritonclient.http")
from tritonclient.utils import InferenceServerException  # noqa: E402


@pytest.fixture(scope="module")
def client(server):
    c = httpclient.InferenceServerClient(url=server.url, connection_timeout=60, network_timeout=120)
    # A fresh dict per call: tritonclient adds Inference-Header-Content-Length to the dict given.
    yield c, lambda: {"Authorization": f"Bearer {server.token}"}
    c.close()


def test_health_and_metadata(client):
    c, auth = client
    assert c.is_server_live() and c.is_server_ready()
    meta = c.get_server_metadata(headers=auth())
    assert "binary_tensor_data" in meta["extensions"]
    model = c.get_model_metadata(TINY_MODEL, headers=auth())
    assert {o["name"] for o in model["outputs"]} >= {"image", "depth", "keypoints"}
    assert c.is_model_ready("echo", headers=auth())
    names = {m["name"] for m in c.get_model_repository_index(headers=auth())}
    assert {"echo", TINY_MODEL} <= names


def test_wrong_token_is_a_clear_error(client):
    c, _ = client
    with pytest.raises(InferenceServerException, match="token"):
        c.get_server_metadata(headers={"Authorization": "Bearer nope"})


@pytest.mark.parametrize("binary", [True, False])
def test_echo_exact_tensors(client, binary):
    c, auth = client
    rng = np.random.default_rng(0)
    arrays = {
        "f32": rng.standard_normal((7, 5, 3)).astype(np.float32),
        "f64": rng.standard_normal(4),
        "u8": rng.integers(0, 255, (3, 4), dtype=np.uint8),
        "i64": rng.integers(-2**62, 2**62, (5,), dtype=np.int64),
        "u16": rng.integers(0, 65535, (2, 2), dtype=np.uint16),
        "b": rng.random(6) > 0.5,
        "s": np.array([b"alpha", b"\x00\x01", b""], dtype=object),
    }
    if binary:
        arrays["f16"] = rng.standard_normal(8).astype(np.float16)
    inputs, outputs = [], []
    for name, arr in arrays.items():
        dt = {"s": "BYTES"}.get(name) or httpclient.np_to_triton_dtype(arr.dtype)
        inp = httpclient.InferInput(name, list(arr.shape), dt)
        inp.set_data_from_numpy(arr, binary_data=binary)
        inputs.append(inp)
        outputs.append(httpclient.InferRequestedOutput(name, binary_data=binary))
    result = c.infer("echo", inputs, outputs=outputs, headers=auth(), request_id="triton-echo")
    assert result.get_response()["id"] == "triton-echo"
    for name, arr in arrays.items():
        got = result.as_numpy(name)
        assert got.shape == arr.shape
        if arr.dtype == object:  # tritonclient gives JSON strings back as str
            assert [g.encode() if isinstance(g, str) else g for g in got.tolist()] == arr.tolist()
        else:
            assert got.dtype == arr.dtype and got.tobytes() == arr.tobytes()


def test_tiny_model_with_an_encoded_photo(client):
    c, auth = client
    photo = np.random.default_rng(1).integers(0, 256, (64, 40, 3), dtype=np.uint8)
    inp = httpclient.InferInput("image", [1], "BYTES")
    inp.set_data_from_numpy(np.array([png_bytes(photo)], dtype=object), binary_data=True)
    result = c.infer(TINY_MODEL, [inp], headers=auth(), parameters={"tasks": "seg", "max_side": 64})
    assert np.array_equal(result.as_numpy("image"), photo)
    parts = result.as_numpy("parts")
    assert parts.shape == (64, 40) and parts.dtype == np.uint8
    assert np.array_equal(result.as_numpy("mask"), (parts > 0).astype(np.uint8))
    assert result.as_numpy("keypoints").shape == (0, 308, 3)
    assert result.as_numpy("intrinsics").shape == (3, 3)
    assert result.as_numpy("source").tolist() == [TINY_MODEL.encode()]


def test_unknown_model_and_load_unload(client):
    c, auth = client
    with pytest.raises(InferenceServerException, match="unknown model"):
        c.get_model_metadata("nope", headers=auth())
    c.load_model(TINY_MODEL, headers=auth())
    assert c.is_model_ready(TINY_MODEL, headers=auth())
    c.unload_model(TINY_MODEL, headers=auth())
    assert not c.is_model_ready(TINY_MODEL, headers=auth())
    c.load_model(TINY_MODEL, headers=auth())
