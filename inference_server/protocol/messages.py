# SPDX-License-Identifier: GPL-3.0-or-later
"""Open Inference Protocol (v2) messages <-> numpy, JSON and binary tensors. No HTTP here.

A message (request or response) is a JSON header, optionally followed by raw tensor bytes
(binary tensor data extension): each binary tensor has ``parameters.binary_data_size`` and its
bytes follow the JSON in the order the tensors appear. Everything malformed raises
:class:`MessageError` whose message says what is wrong, for a 400 answer. The per-datatype
codecs live in tensors.py and are re-exported here.
"""

from __future__ import annotations

import json
from collections.abc import Iterable

from .tensors import (  # noqa: F401  (re-exported: the one import clients and tests need)
    DATATYPES,
    MAX_DIMS,
    MAX_ID,
    NUMPY_DTYPES,
    InferRequest,
    MessageError,
    RequestedOutput,
    Tensor,
    _check_datatype,
    _check_shape,
    datatype_of,
    from_bytes,
    from_json,
    tensor,
    to_bytes,
    to_json,
)


# ---- messages --------------------------------------------------------------------------------

def encode_chunks(header: dict, key: str, tensors: Iterable[Tensor],
                  binary: Iterable[bool]) -> tuple[list, int | None]:
    """Body as a list of buffers (JSON header first, then the binary tensors, uncopied) and the
    Inference-Header-Content-Length (None when the body is pure JSON)."""
    metas, blobs = [], []
    for t, as_binary in zip(tensors, binary):
        meta = {"name": t.name, "datatype": t.datatype, "shape": t.shape}
        # Framing parameters are recomputed here, never copied from the input.
        params = {k: v for k, v in t.parameters.items()
                  if k not in ("binary_data_size", "content_type")}
        if as_binary or t.datatype == "BF16":
            blob = to_bytes(t)
            blobs.append(blob)
            params["binary_data_size"] = len(blob) if isinstance(blob, bytes) else blob.nbytes
        else:
            meta["data"], extra = to_json(t)
            params.update(extra)
        if params:
            meta["parameters"] = params
        metas.append(meta)
    head = json.dumps({**header, key: metas}, separators=(",", ":"), allow_nan=False).encode()
    return [head, *blobs], (len(head) if blobs else None)


def decode_message(body: bytes | memoryview, header_length: int | None,
                   key: str) -> tuple[dict, list[Tensor]]:
    """Parse a v2 message; returns the JSON header and its decoded tensors."""
    view = memoryview(body)
    if header_length is None:
        head_bytes, rest = view, view[len(view):]
    else:
        if header_length <= 0 or header_length > len(view):
            raise MessageError(
                f"Inference-Header-Content-Length is {header_length} but the body has "
                f"{len(view)} bytes")
        head_bytes, rest = view[:header_length], view[header_length:]
    try:
        header = json.loads(bytes(head_bytes))
    except (ValueError, RecursionError) as exc:  # bad UTF-8 or JSON, 5,000-digit numbers
        hint = "" if header_length is not None else (
            " (binary data needs the Inference-Header-Content-Length header)")
        raise MessageError(f"body is not valid JSON: {exc}{hint}") from None
    if not isinstance(header, dict):
        raise MessageError("the JSON body must be an object")
    items = header.get(key)
    if not isinstance(items, list):
        raise MessageError(f"'{key}' must be a list of tensors")
    tensors, pos = [], 0
    for i, meta in enumerate(items):
        if not isinstance(meta, dict):
            raise MessageError(f"{key}[{i}] must be an object")
        name, datatype = meta.get("name"), meta.get("datatype")
        if not isinstance(name, str) or not name:
            raise MessageError(f"{key}[{i}] needs a string 'name'")
        _check_datatype(datatype)
        shape = _check_shape(name, meta.get("shape"))
        params = meta.get("parameters") or {}
        if not isinstance(params, dict):
            raise MessageError(f"tensor {name!r}: 'parameters' must be an object")
        size = params.get("binary_data_size")
        if size is not None:
            if "data" in meta:
                raise MessageError(f"tensor {name!r} has both 'data' and binary_data_size")
            if header_length is None:
                raise MessageError(
                    f"tensor {name!r} is binary but Inference-Header-Content-Length is missing")
            if not isinstance(size, int) or isinstance(size, bool) or size < 0:
                raise MessageError(f"tensor {name!r}: binary_data_size must be an integer >= 0")
            if pos + size > len(rest):
                raise MessageError(
                    f"tensor {name!r}: binary_data_size {size} runs past the end of the body "
                    f"({len(rest) - pos} bytes left)")
            arr = from_bytes(name, datatype, shape, rest[pos:pos + size])
            pos += size
        elif "data" in meta:
            arr = from_json(name, datatype, shape, meta["data"], params)
        else:
            raise MessageError(f"tensor {name!r} has neither 'data' nor binary_data_size")
        tensors.append(Tensor(name, datatype, arr,
                              {k: v for k, v in params.items() if k != "binary_data_size"},
                              binary=size is not None))
    if pos != len(rest):
        raise MessageError(
            f"{len(rest) - pos} bytes of binary data after the JSON are not claimed by any tensor")
    return header, tensors


def parse_infer_request(body: bytes, header_length: int | None) -> InferRequest:
    header, inputs = decode_message(body, header_length, "inputs")
    rid = header.get("id")
    if rid is not None and (not isinstance(rid, str) or len(rid) > MAX_ID):
        raise MessageError(f"'id' must be a string of at most {MAX_ID} characters")
    params = header.get("parameters") or {}
    if not isinstance(params, dict):
        raise MessageError("'parameters' must be an object")
    names = [t.name for t in inputs]
    if len(set(names)) != len(names):
        raise MessageError("input names must be unique")
    outputs = header.get("outputs")
    requested = None
    if outputs is not None:
        if not isinstance(outputs, list):
            raise MessageError("'outputs' must be a list")
        requested = []
        for i, o in enumerate(outputs):
            if not isinstance(o, dict) or not isinstance(o.get("name"), str):
                raise MessageError(f"outputs[{i}] must be an object with a string 'name'")
            p = o.get("parameters") or {}
            if not isinstance(p, dict):
                raise MessageError(f"outputs[{i}].parameters must be an object")
            requested.append(RequestedOutput(o["name"], p))
    return InferRequest(rid, params, inputs, requested)
