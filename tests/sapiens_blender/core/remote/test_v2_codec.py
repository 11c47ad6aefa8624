# SPDX-License-Identifier: GPL-3.0-or-later
"""The client-side v2 codec alone: requests it builds decode back to the same tensors."""

import json
import struct

import numpy as np
import pytest

from sapiens_blender.core.remote import v2_codec
from sapiens_blender.core.errors import ProtocolError
from sapiens_blender.core.remote.v2_codec import Tensor, decode_response, encode_request
from tensor_samples import FIXED, sample




def as_response(chunks, header_length):
    """Turn a request body into the equivalent response (inputs renamed to outputs)."""
    body = b"".join(bytes(c) for c in chunks)
    end = len(body) if header_length is None else header_length
    header = json.loads(body[:end])
    new_head = json.dumps({"model_name": "echo", "outputs": header["inputs"]}).encode()
    return new_head + body[end:], (len(new_head) if header_length is not None else None)


@pytest.mark.parametrize("binary", [True, False])
@pytest.mark.parametrize("datatype", FIXED)
def test_fixed_datatypes_roundtrip(datatype, binary):
    array = sample(datatype)
    chunks, hlen = encode_request({"x": array}, binary=binary)
    head = json.loads(bytes(chunks[0]))
    assert head["inputs"][0]["datatype"] == datatype
    body, hlen2 = as_response(chunks, hlen)
    _, out = decode_response(bytearray(body), hlen2)
    assert out["x"].dtype == array.dtype and out["x"].shape == array.shape
    np.testing.assert_array_equal(out["x"], array)


def test_binary_outputs_are_writable_views_of_a_bytearray():
    chunks, hlen = encode_request({"x": np.arange(6, dtype=np.float32)})
    body, hlen2 = as_response(chunks, hlen)
    _, out = decode_response(bytearray(body), hlen2)
    out["x"][0] = 42  # the add-on may edit maps in place
    assert out["x"][0] == 42


def test_bytes_tensor_binary_and_json():
    values = np.array([b"", b"\x00\xffpng", "h\u00e9llo".encode()], dtype=object).reshape(3, 1)
    for binary in (True, False):
        if not binary:
            values = np.array([b"a", b"", "h\u00e9".encode()], dtype=object).reshape(3, 1)
        chunks, hlen = encode_request({"s": values}, binary=binary)
        body, hlen2 = as_response(chunks, hlen)
        _, out = decode_response(body, hlen2)
        assert out["s"].shape == (3, 1)
        assert list(out["s"].reshape(-1)) == list(values.reshape(-1))


def test_bytes_input_is_length_prefixed():
    chunks, hlen = encode_request({"image": b"\x89PNG"})
    head = json.loads(bytes(chunks[0]))
    assert head["inputs"][0] == {"name": "image", "shape": [1], "datatype": "BYTES",
                                 "parameters": {"binary_data_size": 8}}
    assert bytes(chunks[1]) == struct.pack("<I", 4) + b"\x89PNG"
    assert hlen == len(chunks[0])
    assert head["parameters"] == {"binary_data_output": True}


def test_bf16_raw_patterns():
    values = np.array([1.0, -2.5, 3.140625, np.inf, 0.0], np.float32)
    bits = v2_codec.float32_to_bf16(values)
    np.testing.assert_array_equal(v2_codec.bf16_to_float32(bits), values)  # all exact in bf16
    assert np.isnan(v2_codec.bf16_to_float32(v2_codec.float32_to_bf16(np.array([np.nan]))))[0]
    chunks, hlen = encode_request({"b": Tensor(bits, "BF16")}, binary=False)
    assert hlen is not None  # BF16 cannot travel as JSON: forced binary
    head = json.loads(bytes(chunks[0]))
    assert head["inputs"][0]["datatype"] == "BF16"
    body, hlen2 = as_response(chunks, hlen)
    _, out = decode_response(body, hlen2)
    np.testing.assert_array_equal(out["b"], bits)


def test_requested_outputs_and_id():
    chunks, _ = encode_request({"x": np.zeros(1, np.int32)}, outputs=["depth"], request_id="r1",
                               parameters={"max_side": 512})
    head = json.loads(bytes(chunks[0]))
    assert head["id"] == "r1"
    assert head["outputs"] == [{"name": "depth", "parameters": {"binary_data": True}}]
    assert head["parameters"] == {"max_side": 512, "binary_data_output": True}


def test_non_contiguous_and_big_endian_inputs():
    base = np.arange(24, dtype=">i4").reshape(4, 6)[:, ::2]
    chunks, hlen = encode_request({"x": base})
    body, hlen2 = as_response(chunks, hlen)
    _, out = decode_response(body, hlen2)
    np.testing.assert_array_equal(out["x"], base)


@pytest.mark.parametrize(
    "header, tail, message",
    [
        (b"{not json", b"", "not valid JSON"),
        (json.dumps({"outputs": [{"name": "x", "datatype": "FP32", "shape": [2],
                                  "parameters": {"binary_data_size": 8}}]}).encode(), b"\0" * 4, "remain"),
        (json.dumps({"outputs": [{"name": "x", "datatype": "FP32", "shape": [3],
                                  "parameters": {"binary_data_size": 8}}]}).encode(), b"\0" * 8, "needs 12"),
        (json.dumps({"outputs": [{"name": "x", "datatype": "COMPLEX", "shape": [1],
                                  "data": [1]}]}).encode(), b"", "unknown datatype"),
        (json.dumps({"outputs": [{"name": "x", "datatype": "INT32", "shape": [3],
                                  "data": [1, 2]}]}).encode(), b"", "does not fit"),
        (json.dumps({"outputs": [{"name": "s", "datatype": "BYTES", "shape": [2],
                                  "parameters": {"binary_data_size": 8}}]}).encode(),
         struct.pack("<I", 2) + b"ab\0\0", "ends after 1"),
        (json.dumps({"outputs": []}).encode(), b"junk", "trailing"),
        (json.dumps({"outputs": [{"name": "x"}]}).encode(), b"", "lacks"),
    ],
)
def test_malformed_responses_raise_protocol_error(header, tail, message):
    with pytest.raises(ProtocolError, match=message):
        decode_response(header + tail, len(header) if tail else None)


def test_header_length_past_body():
    with pytest.raises(ProtocolError, match="body has 2 bytes"):
        decode_response(b"{}", 10)


def test_unsupported_dtype_is_a_clear_type_error():
    with pytest.raises(TypeError, match="no v2 datatype"):
        encode_request({"x": np.zeros(2, np.complex64)})


def test_json_non_finite_floats_travel_as_strings():
    values = np.array([np.nan, np.inf, -np.inf, 1.5], np.float32)
    chunks, hlen = encode_request({"x": values}, binary=False)
    assert hlen is None
    assert json.loads(bytes(chunks[0]))["inputs"][0]["data"] == ["NaN", "Infinity", "-Infinity", 1.5]
    body, _ = as_response(chunks, None)
    _, out = decode_response(body, None)
    np.testing.assert_array_equal(out["x"], values)


def test_json_base64_bytes_output():
    head = {"outputs": [{"name": "s", "datatype": "BYTES", "shape": [2],
                         "parameters": {"content_type": "base64"}, "data": ["/wA=", ""]}]}
    _, out = decode_response(json.dumps(head).encode(), None)
    assert list(out["s"]) == [b"\xff\x00", b""]


def test_client_side_modules_need_only_numpy_and_the_standard_library():
    """They run inside Blender's Python: no torch, bpy, server stack or image library."""
    import subprocess
    import sys

    code = ("import sys\nimport sapiens_blender.core.remote.analysis, sapiens_blender.core.local_server.process\n"
            "print(sorted({m.split('.')[0] for m in sys.modules} & {'torch', 'bpy', 'fastapi', "
            "'uvicorn', 'PIL', 'inference_server', 'cv2', 'requests', 'urllib3'}))")  # fmt: skip
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
