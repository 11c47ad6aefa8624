# SPDX-License-Identifier: GPL-3.0-or-later
"""numpy <-> Open Inference Protocol (v2) tensors, JSON and binary, on the client side.

Binary tensor data extension: the body is a JSON header immediately followed by each binary
tensor's raw bytes (little-endian, row-major, no padding), in the order the tensors appear in the
JSON; ``Inference-Header-Content-Length`` gives the header's length and each tensor's
``parameters.binary_data_size`` its byte count. BYTES elements are a 4-byte little-endian length
followed by the bytes. numpy + stdlib only (runs inside Blender's Python).
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
from dataclasses import dataclass

import numpy as np

from ..errors import ProtocolError

HEADER_LENGTH = "Inference-Header-Content-Length"
MAX_DIMS = 32
MAX_ELEMENTS = 2**40  # product of the non-zero dimensions of one answer tensor

# Fixed-size v2 datatypes -> little-endian numpy dtype. BF16 has no numpy dtype: its raw 16-bit
# patterns travel as uint16 (see bf16_to_float32 / float32_to_bf16).
DATATYPE_TO_DTYPE: dict[str, np.dtype] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype("<u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("<i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "BF16": np.dtype("<u2"),
}
_KIND_SIZE_TO_DATATYPE = {
    ("b", 1): "BOOL",
    ("u", 1): "UINT8", ("u", 2): "UINT16", ("u", 4): "UINT32", ("u", 8): "UINT64",
    ("i", 1): "INT8", ("i", 2): "INT16", ("i", 4): "INT32", ("i", 8): "INT64",
    ("f", 2): "FP16", ("f", 4): "FP32", ("f", 8): "FP64",
}  # fmt: skip
_NONFINITE_OUT = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
# Datatypes JSON cannot carry faithfully: always sent binary.
_BINARY_ONLY = frozenset({"FP16", "BF16"})


@dataclass
class Tensor:
    """An input with an explicit datatype, e.g. ``Tensor(bits_uint16, "BF16")``."""

    data: object
    datatype: str


def datatype_of(array: np.ndarray) -> str:
    """The v2 datatype of a numpy array (object/bytes/str arrays are BYTES)."""
    kind = array.dtype.kind
    if kind in "OSU":
        return "BYTES"
    try:
        return _KIND_SIZE_TO_DATATYPE[(kind, array.dtype.itemsize)]
    except KeyError:
        raise TypeError(f"numpy dtype {array.dtype} has no v2 datatype") from None


def bf16_to_float32(bits: np.ndarray) -> np.ndarray:
    """Raw BF16 patterns (uint16) -> float32 (exact: BF16 is the top half of a float32)."""
    return (np.asarray(bits, np.uint16).astype(np.uint32) << 16).view(np.float32)


def float32_to_bf16(values: np.ndarray) -> np.ndarray:
    """float32 -> raw BF16 patterns (uint16), rounding to nearest even; NaN stays NaN."""
    f = np.ascontiguousarray(values, np.float32)
    u = f.view(np.uint32)
    rounded = (u + (0x7FFF + ((u >> 16) & 1))) >> 16
    return np.where(np.isnan(f), (u >> 16) | 0x40, rounded).astype(np.uint16)


def _as_bytes_element(item) -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    if isinstance(item, (bytearray, memoryview, np.bytes_)):
        return bytes(item)
    return str(item).encode("utf-8")


def serialize_bytes_tensor(array: np.ndarray) -> bytes:
    """BYTES tensor -> length-prefixed elements in row-major order."""
    parts = []
    for item in np.asarray(array, dtype=object).reshape(-1):
        data = _as_bytes_element(item)
        parts.append(struct.pack("<I", len(data)))
        parts.append(data)
    return b"".join(parts)


def deserialize_bytes_tensor(buffer, count: int) -> np.ndarray:
    """Length-prefixed elements -> 1-D object array of ``bytes`` with ``count`` elements."""
    view = memoryview(buffer)
    if count * 4 > len(view):  # checked before allocating: the count comes from the peer
        raise ProtocolError(f"BYTES tensor of {count} elements needs at least {count * 4} bytes, "
                            f"got {len(view)}")
    out = np.empty(count, dtype=object)
    offset = 0
    for i in range(count):
        if offset + 4 > len(view):
            raise ProtocolError(f"BYTES tensor ends after {i} of {count} elements")
        (length,) = struct.unpack_from("<I", view, offset)
        offset += 4
        if offset + length > len(view):
            raise ProtocolError(f"BYTES element {i} claims {length} bytes past the tensor's end")
        out[i] = bytes(view[offset : offset + length])
        offset += length
    if offset != len(view):
        raise ProtocolError(f"BYTES tensor has {len(view) - offset} stray bytes after {count} elements")
    return out


def _normalize_input(value) -> tuple[np.ndarray, str]:
    """Any accepted input value -> (array, datatype)."""
    if isinstance(value, Tensor):
        datatype = value.datatype.upper()
        if datatype == "BYTES":
            return np.asarray(value.data, dtype=object), datatype
        if datatype not in DATATYPE_TO_DTYPE:
            raise ValueError(f"unknown v2 datatype {value.datatype!r}")
        return np.asarray(value.data).astype(DATATYPE_TO_DTYPE[datatype], copy=False), datatype
    if isinstance(value, (bytes, bytearray, memoryview, str)):
        arr = np.empty(1, dtype=object)
        arr[0] = _as_bytes_element(value)
        return arr, "BYTES"
    array = np.asarray(value)
    datatype = datatype_of(array)
    if datatype == "BYTES":
        return array.astype(object), datatype
    return array, datatype


def _raw_view(array: np.ndarray, datatype: str) -> memoryview:
    """Little-endian, C-contiguous bytes of a fixed-size tensor without copying when possible."""
    dtype = DATATYPE_TO_DTYPE[datatype]
    array = np.ascontiguousarray(array.astype(dtype, copy=False))
    return memoryview(array.reshape(-1).view(np.uint8))


def _json_data(array: np.ndarray, datatype: str) -> list:
    if datatype == "BYTES":
        out = []
        for item in array.reshape(-1):
            data = _as_bytes_element(item)
            try:
                out.append(data.decode("utf-8"))
            except UnicodeDecodeError:
                raise ValueError("a BYTES element is not UTF-8 text: send it with binary=True") from None
        return out
    flat = array.reshape(-1)
    if flat.dtype.kind == "f" and not np.all(np.isfinite(flat)):
        # JSON has no NaN/Infinity: the v2 servers we target spell them as strings.
        return [v if math.isfinite(v) else _NONFINITE_OUT[str(v)] for v in flat.tolist()]
    return flat.tolist()


def encode_request(
    inputs: dict,
    outputs: list[str] | None = None,
    parameters: dict | None = None,
    request_id: str | None = None,
    binary: bool = True,
) -> tuple[list, int | None]:
    """Build an infer request body.

    Returns ``(chunks, header_length)``: the body as a list of buffers to send in order (big
    tensors are not copied) and the JSON header's length, or ``None`` when the body is pure JSON.
    """
    header: dict = {}
    if request_id is not None:
        header["id"] = str(request_id)
    params = dict(parameters or {})
    if binary:
        params["binary_data_output"] = True
    if params:
        header["parameters"] = params
    blobs: list = []
    tensors = []
    for name, value in inputs.items():
        array, datatype = _normalize_input(value)
        entry: dict = {"name": str(name), "shape": [int(d) for d in array.shape], "datatype": datatype}
        if binary or datatype in _BINARY_ONLY:
            blob = serialize_bytes_tensor(array) if datatype == "BYTES" else _raw_view(array, datatype)
            entry["parameters"] = {"binary_data_size": len(blob) if datatype == "BYTES" else blob.nbytes}
            blobs.append(blob)
        else:
            entry["data"] = _json_data(array, datatype)
        tensors.append(entry)
    header["inputs"] = tensors
    if outputs is not None:
        header["outputs"] = [
            {"name": str(n), "parameters": {"binary_data": bool(binary)}} for n in outputs
        ]
    head = json.dumps(header, separators=(",", ":"), allow_nan=False).encode("utf-8")
    if not blobs:
        return [head], None
    return [head, *blobs], len(head)


def _decode_json_tensor(entry: dict, shape: tuple, datatype: str) -> np.ndarray:
    data = entry.get("data")
    if data is None:
        raise ProtocolError(f"output {entry.get('name')!r} has neither data nor binary_data_size")
    if datatype == "BYTES":
        if not isinstance(data, list):
            raise ProtocolError(f"output {entry.get('name')!r}: data must be a list")
        flat = np.asarray(data, dtype=object).reshape(-1)
        if flat.size != math.prod(shape):
            raise ProtocolError(f"output {entry.get('name')!r}: {flat.size} elements do not fit {list(shape)}")
        b64 = (entry.get("parameters") or {}).get("content_type") == "base64"
        out = np.empty(flat.size, dtype=object)
        for i, item in enumerate(flat):
            try:
                out[i] = base64.b64decode(item, validate=True) if b64 else _as_bytes_element(item)
            except (binascii.Error, TypeError, ValueError) as exc:
                raise ProtocolError(f"output {entry.get('name')!r}: element {i} is not base64") from exc
        return out.reshape(shape)
    try:
        return np.asarray(data, dtype=DATATYPE_TO_DTYPE[datatype]).reshape(shape)
    except (ValueError, TypeError, OverflowError, RecursionError) as exc:
        raise ProtocolError(f"output {entry.get('name')!r}: data does not fit shape {list(shape)}: {exc}") from exc


def decode_response(body, header_length: int | None) -> tuple[dict, dict[str, np.ndarray]]:
    """Parse an infer response body -> (the JSON header, {output name: array}).

    Arrays over binary data are views into ``body`` (writable when ``body`` is a bytearray).
    """
    view = memoryview(body)
    end = len(view) if header_length is None else int(header_length)
    if end < 0 or end > len(view):
        raise ProtocolError(f"{HEADER_LENGTH} is {header_length} but the body has {len(view)} bytes")
    try:
        header = json.loads(bytes(view[:end]))
    except (ValueError, RecursionError) as exc:  # bad UTF-8/JSON, huge numbers, deep nesting
        raise ProtocolError(f"the server's answer is not valid JSON: {exc}") from exc
    if not isinstance(header, dict) or not isinstance(header.get("outputs", []), list):
        raise ProtocolError("the server's answer has no 'outputs' list")
    offset = end
    result: dict[str, np.ndarray] = {}
    for entry in header.get("outputs", []):
        try:
            name = str(entry["name"])
            datatype = str(entry["datatype"]).upper()
            shape = tuple(int(d) for d in entry["shape"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ProtocolError(f"an output lacks name, datatype or shape: {entry!r:.200}") from exc
        if datatype != "BYTES" and datatype not in DATATYPE_TO_DTYPE:
            raise ProtocolError(f"output {name!r} has unknown datatype {datatype!r}")
        if any(d < 0 for d in shape) or len(shape) > MAX_DIMS:
            raise ProtocolError(f"output {name!r} has a negative dimension or too many in "
                                f"{list(shape)[:MAX_DIMS + 1]}")
        count = math.prod(shape)  # exact (numpy's int64 product would wrap around)
        if math.prod(max(d, 1) for d in shape) > MAX_ELEMENTS:
            raise ProtocolError(f"output {name!r} claims shape {list(shape)}: more elements than "
                                f"any answer can hold")
        size = (entry.get("parameters") or {}).get("binary_data_size")
        if size is None:
            result[name] = _decode_json_tensor(entry, shape, datatype)
            continue
        if not isinstance(size, int) or isinstance(size, bool):
            raise ProtocolError(f"output {name!r}: binary_data_size must be an integer")
        if size < 0 or offset + size > len(view):
            raise ProtocolError(f"output {name!r} claims {size} bytes but only {len(view) - offset} remain")
        chunk = view[offset : offset + size]
        offset += size
        if datatype == "BYTES":
            result[name] = deserialize_bytes_tensor(chunk, count).reshape(shape)
            continue
        dtype = DATATYPE_TO_DTYPE[datatype]
        if size != count * dtype.itemsize:
            raise ProtocolError(
                f"output {name!r} has {size} bytes but shape {list(shape)} x {datatype} needs "
                f"{count * dtype.itemsize}"
            )
        array = np.frombuffer(chunk, dtype=dtype, count=count).reshape(shape)
        result[name] = array.astype(dtype.newbyteorder("="), copy=False)
    if offset != len(view):
        raise ProtocolError(f"the server's answer has {len(view) - offset} unexplained trailing bytes")
    return header, result
