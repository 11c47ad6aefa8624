# SPDX-License-Identifier: GPL-3.0-or-later
"""protocol.py on its own: every datatype through JSON and binary, and malformed messages."""

from __future__ import annotations

import json

import numpy as np
import pytest

from inference_server.protocol import messages as protocol
import v2_messages
from inference_server.protocol.messages import MessageError, Tensor, tensor
from server_harness import assert_same, sample

ml_dtypes = pytest.importorskip("ml_dtypes")


@pytest.mark.parametrize("datatype", protocol.DATATYPES)
@pytest.mark.parametrize("binary", [True, False])
def test_every_datatype_round_trips(datatype, binary):
    if datatype == "BF16" and not binary:
        pytest.skip("BF16 is binary-only (tested below)")
    t = tensor("t", sample(datatype), datatype)
    body, hlen = v2_messages.encode_infer_request([t], binary=binary, id="r1")
    assert (hlen is not None) == binary
    req = protocol.parse_infer_request(body, hlen)
    assert req.id == "r1" and req.inputs[0].datatype == datatype
    assert_same(req.inputs[0].array, t.array)


def test_bf16_is_binary_only():
    t = tensor("b", sample("BF16"), "BF16")
    assert t.array.dtype == ml_dtypes.bfloat16
    with pytest.raises(MessageError, match="BF16 can only travel as binary"):
        protocol.to_json(t)
    body = json.dumps({"inputs": [{"name": "b", "datatype": "BF16", "shape": [1], "data": [1.0]}]})
    with pytest.raises(MessageError, match="BF16"):
        protocol.parse_infer_request(body.encode(), None)


def test_nested_json_data_and_nonfinite_strings():
    body = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 2],
                        "data": [[1, "NaN"], ["Infinity", "-Infinity"]]}]}
    x = protocol.parse_infer_request(json.dumps(body).encode(), None).inputs[0].array
    assert x[0, 0] == 1 and np.isnan(x[0, 1]) and x[1, 0] == np.inf and x[1, 1] == -np.inf


def test_bytes_json_base64_both_ways():
    t = tensor("b", np.array([b"\xff\x00"], object), "BYTES")
    data, params = protocol.to_json(t)
    assert params == {"content_type": "base64"} and data == ["/wA="]
    body = {"inputs": [{"name": "b", "datatype": "BYTES", "shape": [1], "data": data,
                        "parameters": params}]}
    back = protocol.parse_infer_request(json.dumps(body).encode(), None).inputs[0]
    assert back.array.tolist() == [b"\xff\x00"]


def test_response_mixes_binary_and_json():
    outs = [tensor("a", np.arange(6, dtype=np.float32).reshape(2, 3)), tensor("s", ["x"], "BYTES")]
    body, hlen = v2_messages.encode_message({"model_name": "m", "id": "1"}, "outputs", outs,
                                         [True, False])
    header, tensors = v2_messages.parse_infer_response(body, hlen)
    assert header["outputs"][0]["parameters"]["binary_data_size"] == 24
    assert "data" in header["outputs"][1]
    assert_same(tensors["a"].array, outs[0].array)
    assert tensors["s"].array.tolist() == [b"x"]


def _binary_body(meta: list[dict], blob: bytes) -> tuple[bytes, int]:
    head = json.dumps({"inputs": meta}).encode()
    return head + blob, len(head)


BAD = {
    "not json": (b"{nope", None, "not valid JSON"),
    "json array": (b"[1]", None, "must be an object"),
    "no inputs": (b"{}", None, "'inputs' must be a list"),
    "unknown datatype": (json.dumps({"inputs": [{"name": "x", "datatype": "FP128", "shape": [1],
                                                 "data": [1]}]}).encode(), None, "unknown datatype"),
    "negative shape": (json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [-1],
                                               "data": [1]}]}).encode(), None, "shape"),
    "count mismatch": (json.dumps({"inputs": [{"name": "x", "datatype": "INT8", "shape": [3],
                                               "data": [1, 2]}]}).encode(), None, "needs 3"),
    "int out of range": (json.dumps({"inputs": [{"name": "x", "datatype": "UINT8", "shape": [1],
                                                 "data": [256]}]}).encode(), None, "out of range"),
    "float for int": (json.dumps({"inputs": [{"name": "x", "datatype": "INT32", "shape": [1],
                                              "data": [1.5]}]}).encode(), None, "integers"),
    "string for float": (json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1],
                                                 "data": ["one"]}]}).encode(), None, "numbers"),
    "no data": (json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1]}]}).encode(),
                None, "neither"),
    "duplicate names": (json.dumps({"inputs": [
        {"name": "x", "datatype": "BOOL", "shape": [1], "data": [True]},
        {"name": "x", "datatype": "BOOL", "shape": [1], "data": [True]}]}).encode(), None, "unique"),
}


@pytest.mark.parametrize("case", sorted(BAD))
def test_malformed_json_requests(case):
    body, hlen, message = BAD[case]
    with pytest.raises(MessageError, match=message):
        protocol.parse_infer_request(body, hlen)


def test_binary_framing_errors():
    meta = [{"name": "x", "datatype": "FP32", "shape": [2], "parameters": {"binary_data_size": 8}}]
    body, hlen = _binary_body(meta, b"\0" * 8)
    assert protocol.parse_infer_request(body, hlen).inputs[0].array.tolist() == [0.0, 0.0]
    with pytest.raises(MessageError, match="body has"):
        protocol.parse_infer_request(body, len(body) + 1)  # header longer than the body
    with pytest.raises(MessageError, match="runs past"):
        protocol.parse_infer_request(body[:-1], hlen)
    with pytest.raises(MessageError, match="not claimed"):
        protocol.parse_infer_request(body + b"\0", hlen)
    wrong = [{**meta[0], "parameters": {"binary_data_size": 4}}]
    with pytest.raises(MessageError, match="needs 8"):
        protocol.parse_infer_request(*_binary_body(wrong, b"\0" * 4))
    with pytest.raises(MessageError, match="Inference-Header-Content-Length is missing"):
        protocol.parse_infer_request(json.dumps({"inputs": meta}).encode(), None)
    bad_bool = [{"name": "b", "datatype": "BOOL", "shape": [1],
                 "parameters": {"binary_data_size": 1}}]
    with pytest.raises(MessageError, match="0 or 1"):
        protocol.parse_infer_request(*_binary_body(bad_bool, b"\x07"))
    strings = [{"name": "s", "datatype": "BYTES", "shape": [1],
                "parameters": {"binary_data_size": 6}}]
    with pytest.raises(MessageError, match="claims 9 bytes"):
        protocol.parse_infer_request(*_binary_body(strings, b"\x09\0\0\0ab"))


def test_zero_size_tensor_round_trips():
    t = Tensor("z", "FP32", np.zeros((0, 3), np.float32))
    req = protocol.parse_infer_request(*v2_messages.encode_infer_request([t]))
    assert req.inputs[0].array.shape == (0, 3)
