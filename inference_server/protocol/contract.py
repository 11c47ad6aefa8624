# SPDX-License-Identifier: GPL-3.0-or-later
"""The maps and body tensors' contract, read from contract.json (the add-on ships the same file:
sapiens_blender/core/maps/contract.json; a test keeps them identical). Names, datatypes, shapes,
units and the values allowed (finiteness, range, form) are stated there once; this module checks
tensors against them, and writes the fit's reports as strict JSON."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

_SPEC = json.loads(Path(__file__).with_name("contract.json").read_text(encoding="utf-8"))
MAPS: dict[str, dict] = _SPEC["maps"]  # the maps tensors (docs/maps_format.md)
FIT: dict[str, dict] = _SPEC["fit"]  # a fit's arrays (docs/body_format.md)
MOTION: dict[str, dict] = _SPEC["motion"]  # body_motion's inputs (docs/body_format.md)
_NUMPY = {"UINT8": np.uint8, "INT32": np.int32, "FP32": np.float32, "BOOL": np.bool_}


def problem(name: str, array: np.ndarray, spec: dict) -> str | None:
    """Why ``array`` does not match its ``spec`` (datatype, shape, finiteness, range, form), or
    None. One line, naming the tensor."""
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
    if datatype in ("BYTES", "BOOL"):
        return None
    if spec.get("finite") and not np.isfinite(arr).all():
        return f"{name!r} holds NaN or infinite values"
    bounds = spec.get("range")
    if bounds is not None:
        pairs = bounds if isinstance(bounds[0], list) else [bounds]
        for i, (lo, hi) in enumerate(pairs):
            part = arr if len(pairs) == 1 else arr[..., i]
            outside = (part < lo) | (part > hi)  # NaN compares False: unknown, where allowed
            if outside.any():
                where = "" if len(pairs) == 1 else f"[..., {i}]"
                return f"{name!r}{where} holds {float(part[outside].flat[0]):g}, outside [{lo:g}, {hi:g}]"
    form = spec.get("form")
    return _FORMS[form](name, arr.astype(np.float64)) if form else None


def _pinhole(name: str, k: np.ndarray) -> str | None:
    if k[0, 0] >= 1 and k[1, 1] >= 1 and k[1, 0] == 0 and np.array_equal(k[2], [0, 0, 1]):
        return None
    return f"{name!r} is not a pinhole K (fx and fy at least 1 pixel, bottom row 0 0 1)"


def _rigid(name: str, m: np.ndarray) -> str | None:
    m = m.reshape(-1, 4, 4)
    r = m[:, :3, :3]
    off = np.abs(r @ np.swapaxes(r, 1, 2) - np.eye(3)).max(axis=(1, 2))
    bad = (off > 1e-3) | (np.linalg.det(r) <= 0) | (np.abs(m[:, 3] - [0, 0, 0, 1]).max(axis=1) > 1e-6)
    if not bad.any():
        return None
    which = f" (matrix {int(np.flatnonzero(bad)[0])})" if len(m) > 1 else ""
    return f"{name!r}{which} is not a rigid transform (a rotation and a translation, bottom row 0 0 0 1)"


_FORMS = {"pinhole": _pinhole, "rigid": _rigid}


def report_json(report) -> str:
    """``report`` as strict JSON: NaN and infinities (not JSON) as null, numpy numbers as Python's."""
    return json.dumps(_plain(report), allow_nan=False)


def _plain(v):
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    if isinstance(v, (list, tuple, np.ndarray)):
        return [_plain(x) for x in (v.tolist() if isinstance(v, np.ndarray) else v)]
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    if isinstance(v, (int, np.integer)):
        return int(v)
    if isinstance(v, (float, np.floating)):
        return float(v) if math.isfinite(float(v)) else None
    return v
