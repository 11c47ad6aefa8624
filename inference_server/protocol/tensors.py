# SPDX-License-Identifier: GPL-3.0-or-later
"""v2 tensors <-> numpy: every datatype of the Open Inference Protocol, as JSON ``data`` and as
raw binary (the binary tensor data extension). Pure numpy, no HTTP; messages are messages.py.
"""

from __future__ import annotations

import base64
import binascii
import math
import struct
from dataclasses import dataclass, field

import numpy as np

from ..errors import InferenceServerError

try:  # tritonclient maps BF16 to ml_dtypes.bfloat16; without it BF16 stays raw uint16 bits
    from ml_dtypes import bfloat16 as _BF16
except ImportError:  # pragma: no cover - ml_dtypes ships with tritonclient/jax, not required
    _BF16 = None

# v2 datatype -> little-endian numpy dtype; BYTES is an object array of ``bytes``.
NUMPY_DTYPES: dict[str, np.dtype] = {
    "BOOL": np.dtype("?"),
    "UINT8": np.dtype("u1"),
    "UINT16": np.dtype("<u2"),
    "UINT32": np.dtype("<u4"),
    "UINT64": np.dtype("<u8"),
    "INT8": np.dtype("i1"),
    "INT16": np.dtype("<i2"),
    "INT32": np.dtype("<i4"),
    "INT64": np.dtype("<i8"),
    "FP16": np.dtype("<f2"),
    "FP32": np.dtype("<f4"),
    "FP64": np.dtype("<f8"),
    "BF16": np.dtype(_BF16) if _BF16 is not None else np.dtype("<u2"),
    "BYTES": np.dtype(object),
}
DATATYPES = tuple(NUMPY_DTYPES)
MAX_DIMS = 32
MAX_DIM = 2**31 - 1  # one dimension
MAX_ELEMENTS = 2**40  # product of the non-zero dimensions (numpy's limit is near 2**63 bytes)
MAX_ID = 256  # request and job ids
_NONFINITE_IN = {"NaN": math.nan, "nan": math.nan, "Infinity": math.inf, "inf": math.inf,
                 "-Infinity": -math.inf, "-inf": -math.inf}


class MessageError(InferenceServerError, ValueError):
    """A malformed v2 message; the text is the human-readable reason (HTTP 400). The client's
    counterpart, a malformed answer, is sapiens_blender.core.errors.ProtocolError."""

    status = 400


@dataclass
class Tensor:
    """One named tensor. ``array`` has ``shape``; for BYTES it is an object array of bytes."""

    name: str
    datatype: str
    array: np.ndarray
    parameters: dict = field(default_factory=dict)
    binary: bool = False  # arrived as binary data (echo answers in kind)

    @property
    def shape(self) -> list[int]:
        return [int(d) for d in self.array.shape]


@dataclass
class RequestedOutput:
    name: str
    parameters: dict = field(default_factory=dict)


@dataclass
class InferRequest:
    id: str | None
    parameters: dict
    inputs: list[Tensor]
    outputs: list[RequestedOutput] | None  # None = all outputs


# ---- datatypes ---------------------------------------------------------------------------------

def datatype_of(array: np.ndarray) -> str:
    """The v2 datatype for a numpy array (object/str/bytes arrays are BYTES)."""
    dt = np.asarray(array).dtype
    if dt.kind in "OSU":
        return "BYTES"
    if _BF16 is not None and dt == NUMPY_DTYPES["BF16"]:
        return "BF16"
    for name, candidate in NUMPY_DTYPES.items():
        if name not in ("BYTES", "BF16") and dt.newbyteorder("<") == candidate.newbyteorder("<"):
            return name
    raise MessageError(f"numpy dtype {dt} has no v2 datatype")


def tensor(name: str, array, datatype: str | None = None, **parameters) -> Tensor:
    """Build a Tensor from any array-like; str elements of BYTES tensors become UTF-8 bytes."""
    arr = np.asarray(array)
    datatype = datatype or datatype_of(arr)
    if datatype == "BYTES":
        out = np.empty(arr.shape, dtype=object)
        flat = out.reshape(-1)
        for i, item in enumerate(arr.reshape(-1).tolist()):
            flat[i] = item.encode("utf-8") if isinstance(item, str) else bytes(item)
        arr = out
    else:
        _check_datatype(datatype)
        arr = arr.astype(NUMPY_DTYPES[datatype], copy=False)
    return Tensor(name, datatype, arr, dict(parameters))


def _check_datatype(datatype) -> None:
    if datatype not in NUMPY_DTYPES:
        raise MessageError(
            f"unknown datatype {datatype!r}; expected one of {', '.join(DATATYPES)}")


def _check_shape(name: str, shape) -> tuple[int, ...]:
    if not isinstance(shape, list) or len(shape) > MAX_DIMS or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
        raise MessageError(
            f"tensor {name!r}: shape must be a list of at most {MAX_DIMS} non-negative integers, "
            f"got {shape!r}")
    if any(d > MAX_DIM for d in shape) or math.prod(max(d, 1) for d in shape) > MAX_ELEMENTS:
        raise MessageError(
            f"tensor {name!r}: shape {shape!r} is too large (each dimension at most {MAX_DIM}, "
            f"at most {MAX_ELEMENTS} elements)")
    return tuple(shape)


# ---- binary ----------------------------------------------------------------------------------

def to_bytes(t: Tensor) -> bytes | memoryview:
    """Raw little-endian row-major bytes of a tensor (BYTES: 4-byte length prefix each).

    Numeric tensors come back as a zero-copy memoryview when the array is already contiguous
    little-endian: a 1024x768 map is never copied on its way to the socket.
    """
    if t.datatype == "BYTES":
        parts = []
        for item in t.array.reshape(-1).tolist():
            parts.append(struct.pack("<I", len(item)))
            parts.append(item)
        return b"".join(parts)
    arr = np.ascontiguousarray(t.array, dtype=NUMPY_DTYPES[t.datatype])
    return memoryview(arr.reshape(-1).view(np.uint8))


def from_bytes(name: str, datatype: str, shape: tuple[int, ...], raw: memoryview) -> np.ndarray:
    """Decode raw bytes (zero-copy, read-only for numeric types)."""
    count = math.prod(shape)
    if datatype == "BYTES":
        return _bytes_elements(name, shape, count, raw)
    expected = count * NUMPY_DTYPES[datatype].itemsize
    if len(raw) != expected:
        raise MessageError(
            f"tensor {name!r}: binary_data_size is {len(raw)} bytes but shape {list(shape)} of "
            f"{datatype} needs {expected}")
    arr = np.frombuffer(raw, dtype=NUMPY_DTYPES[datatype], count=count)
    if datatype == "BOOL" and count and int(arr.view(np.uint8).max()) > 1:
        raise MessageError(f"tensor {name!r}: BOOL bytes must be 0 or 1")
    return arr.reshape(shape)


def _bytes_elements(name: str, shape, count: int, raw: memoryview) -> np.ndarray:
    if count * 4 > len(raw):
        raise MessageError(
            f"tensor {name!r}: {count} BYTES elements need at least {count * 4} bytes, "
            f"got {len(raw)}")
    out = np.empty(count, dtype=object)
    pos, end = 0, len(raw)
    for i in range(count):
        if pos + 4 > end:
            raise MessageError(f"tensor {name!r}: BYTES element {i} runs past the data")
        (length,) = struct.unpack_from("<I", raw, pos)
        pos += 4
        if pos + length > end:
            raise MessageError(
                f"tensor {name!r}: BYTES element {i} claims {length} bytes, only {end - pos} left")
        out[i] = bytes(raw[pos:pos + length])
        pos += length
    if pos != end:
        raise MessageError(
            f"tensor {name!r}: {end - pos} bytes left after its {count} BYTES elements")
    return out.reshape(shape)


# ---- JSON data -------------------------------------------------------------------------------

def _flatten(name: str, data, shape: tuple[int, ...]) -> list:
    """Flat row-major list from flat or nested JSON data; checks the element count."""
    if not isinstance(data, list):
        raise MessageError(f"tensor {name!r}: data must be a JSON array")
    flat = data
    if any(isinstance(x, list) for x in data):
        # Iterative, so a deeply nested body cannot exhaust the recursion limit.
        flat, stack = [], [(data, 0)]
        while stack:  # depth-first, left to right
            node, depth = stack.pop()
            if isinstance(node, list):
                if depth > MAX_DIMS:
                    raise MessageError(f"tensor {name!r}: data nested deeper than {MAX_DIMS}")
                stack.extend((x, depth + 1) for x in reversed(node))
            else:
                flat.append(node)
    count = math.prod(shape)
    if len(flat) != count:
        raise MessageError(
            f"tensor {name!r}: data has {len(flat)} elements but shape {list(shape)} needs {count}")
    return flat


def from_json(name: str, datatype: str, shape: tuple[int, ...], data, parameters: dict) -> np.ndarray:
    if datatype == "BF16":
        raise MessageError(f"tensor {name!r}: BF16 can only travel as binary data")
    flat = _flatten(name, data, shape)
    if datatype == "BYTES":
        b64 = parameters.get("content_type") == "base64"
        out = np.empty(len(flat), dtype=object)
        for i, item in enumerate(flat):
            if not isinstance(item, str):
                raise MessageError(f"tensor {name!r}: BYTES elements must be strings in JSON")
            try:
                out[i] = base64.b64decode(item, validate=True) if b64 else item.encode("utf-8")
            except (binascii.Error, UnicodeEncodeError) as exc:
                raise MessageError(f"tensor {name!r}: element {i} is not valid: {exc}") from None
        return out.reshape(shape)
    dtype = NUMPY_DTYPES[datatype]
    kind = dtype.kind
    if kind == "b":
        if not all(type(x) is bool or (type(x) is int and x in (0, 1)) for x in flat):
            raise MessageError(f"tensor {name!r}: BOOL data must be true/false")
        return np.array(flat, dtype=bool).reshape(shape)
    if kind in "iu":
        if not all(type(x) is int for x in flat):
            raise MessageError(f"tensor {name!r}: {datatype} data must be integers")
        info = np.iinfo(dtype)
        if flat and (min(flat) < info.min or max(flat) > info.max):
            raise MessageError(f"tensor {name!r}: value out of range for {datatype}")
        return np.array(flat, dtype=dtype).reshape(shape)
    # floats: numbers, or NaN/Infinity as strings (and as JSON's non-standard literals)
    values = []
    for x in flat:
        if type(x) in (int, float):
            values.append(x)
        elif isinstance(x, str) and x in _NONFINITE_IN:
            values.append(_NONFINITE_IN[x])
        else:
            raise MessageError(f"tensor {name!r}: {datatype} data must be numbers, got {x!r}")
    try:
        as_float = np.array(values, dtype=np.float64)
    except OverflowError:  # an integer beyond any float
        raise MessageError(f"tensor {name!r}: a value is out of range for {datatype}") from None
    with np.errstate(over="ignore"):
        return as_float.astype(dtype).reshape(shape)


def to_json(t: Tensor) -> tuple[list, dict]:
    """Flat JSON data of a tensor and the parameters it needs (BYTES base64 marker)."""
    if t.datatype == "BF16":
        raise MessageError(f"tensor {t.name!r}: BF16 can only travel as binary data")
    if t.datatype == "BYTES":
        items = t.array.reshape(-1).tolist()
        try:
            return [b.decode("utf-8") for b in items], {}
        except UnicodeDecodeError:
            return [base64.b64encode(b).decode("ascii") for b in items], {"content_type": "base64"}
    flat = t.array.reshape(-1)
    values = flat.tolist()
    if flat.dtype.kind == "f" and not np.isfinite(flat).all():
        for i in np.flatnonzero(~np.isfinite(flat)).tolist():
            v = values[i]
            values[i] = "NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")
    return values, {}
