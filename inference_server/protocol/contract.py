# SPDX-License-Identifier: GPL-3.0-or-later
"""The maps and body tensors' contract, read from contract.json (the add-on ships the same file:
sapiens_blender/core/maps/contract.json; a test keeps them identical). Names, datatypes, shapes
and units are stated there once; this module checks tensors against them."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

_SPEC = json.loads(Path(__file__).with_name("contract.json").read_text(encoding="utf-8"))
MAPS: dict[str, dict] = _SPEC["maps"]  # the maps tensors (docs/maps_format.md)
FIT: dict[str, dict] = _SPEC["fit"]  # a fit's arrays (docs/body_format.md)
_NUMPY = {"UINT8": np.uint8, "INT32": np.int32, "FP32": np.float32, "BOOL": np.bool_}


def problem(name: str, array: np.ndarray, spec: dict) -> str | None:
    """Why ``array`` does not match its ``spec`` (datatype, shape, finiteness), or None."""
    arr = np.asarray(array)
    datatype, shape = spec["datatype"], spec["shape"]
    if datatype == "BYTES":
        ok = arr.dtype == object or arr.dtype.kind in "SU"
    else:
        ok = arr.dtype == _NUMPY[datatype]
    if not ok:
        return f"{name!r} must be {datatype}, got {arr.dtype}"
    if arr.ndim != len(shape) or any(s not in (-1, d) for s, d in zip(shape, arr.shape)):
        return f"{name!r} has shape {list(arr.shape)}, expected {shape}"
    if spec.get("finite") and not np.isfinite(arr).all():
        return f"{name!r} holds NaN or infinite values"
    return None
