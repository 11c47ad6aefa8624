# SPDX-License-Identifier: GPL-3.0-or-later
"""The scan as a v2 tensor model, ``body_scan``: several views of one person -> one body
(``scan.fit_views``). Inputs are the maps tensors of docs/maps_format.md stacked per view (the
views share one size): ``mask`` [V,H,W] (the scanned person's pixels non-zero), ``parts``
[V,H,W], ``part_names``, ``intrinsics`` [V,3,3], ``keypoints`` [V,308,3] (the person's), and
``depth`` [V,H,W] or ``pointmap`` [V,H,W,3], ``metric``. Outputs: the per-person arrays of
docs/body_format.md with one row per fitted view, ``views`` (their input indices), ``skipped``
(the views that could not be fitted, and why) and ``scan_report``."""

from __future__ import annotations

import numpy as np

from ..dataplane.base import BackendError, CancelToken, ProgressFn, no_progress
from .serving import MAX_PART_NAME, MAX_PART_NAMES, _BodyModelBackend, _text

SCAN_INPUTS = {  # name: (datatype, shape, required)
    "mask": ("UINT8", [-1, -1, -1], True),
    "parts": ("UINT8", [-1, -1, -1], True),
    "part_names": ("BYTES", [-1], True),
    "intrinsics": ("FP32", [-1, 3, 3], True),
    "keypoints": ("FP32", [-1, 308, 3], True),
    "depth": ("FP32", [-1, -1, -1], False),
    "pointmap": ("FP32", [-1, -1, -1, 3], False),
    "metric": ("BOOL", [1], False),
}


class BodyScanBackend(_BodyModelBackend):
    name = "body_scan"
    inputs_spec = SCAN_INPUTS
    on_fit_device = True

    def infer_tensors(self, inputs: dict, parameters: dict, progress: ProgressFn = no_progress,
                      cancel: CancelToken | None = None) -> dict[str, np.ndarray]:
        from .observations import ObservationError, observe
        from .scan import MAX_VIEWS, fit_views
        from .solver import FitSettings

        arr = _check(inputs)
        n = len(arr["mask"])
        observations, views, skipped = [], [], []
        for v in range(n):
            try:
                observations.append(observe(
                    1, mask=(arr["mask"][v] > 0).astype(np.uint8), parts=arr["parts"][v],
                    part_names_in=arr["part_names"], intrinsics=arr["intrinsics"][v],
                    keypoints=arr["keypoints"][v:v + 1],
                    depth=arr["depth"][v] if "depth" in arr else None,
                    pointmap=arr["pointmap"][v] if "pointmap" in arr else None, metric=arr["metric"]))
                views.append(v)
            except ObservationError as exc:
                skipped.append(f"view {v + 1}: {exc}")
        if len(observations) < 1:
            raise BackendError("no view could be fitted: " + "; ".join(skipped), 422)
        if len(observations) > MAX_VIEWS:
            raise BackendError(f"{len(observations)} views: more than the {MAX_VIEWS} one scan fits", 400)
        settings = FitSettings(compile=self._settings.compile)
        try:
            out = fit_views(self._body, observations, settings, progress=progress, cancel=cancel)
        except FloatingPointError as exc:
            raise BackendError(str(exc), 500) from exc
        out["views"] = np.asarray(views, np.int32)
        if skipped:
            out["skipped"] = np.asarray(skipped)
        return out


def _check(inputs: dict) -> dict:
    missing = [k for k, (_d, _s, req) in SCAN_INPUTS.items() if req and k not in inputs]
    if missing:
        raise BackendError(f"body_scan needs the stacked maps tensors {missing} (docs/body.md, 'Scan')", 400)
    out = {}
    for k, v in inputs.items():
        if k not in SCAN_INPUTS:
            continue
        a = np.asarray(v)
        if k == "part_names":
            out[k] = [_text(x) for x in a.reshape(-1)]
            if len(out[k]) > MAX_PART_NAMES or any(not s or len(s) > MAX_PART_NAME for s in out[k]):
                raise BackendError(f"part_names: at most {MAX_PART_NAMES} names of 1 to {MAX_PART_NAME} characters", 400)
            continue
        if k == "metric":
            out[k] = bool(a.reshape(-1)[0]) if a.size else True
            continue
        shape = SCAN_INPUTS[k][1]
        if a.ndim != len(shape) or any(s not in (-1, d) for s, d in zip(shape, a.shape)):
            raise BackendError(f"input {k!r} has shape {list(a.shape)}, expected {shape}", 400)
        out[k] = a
    out.setdefault("metric", True)
    n, h, w = out["mask"].shape
    if n < 1:
        raise BackendError("body_scan needs at least one view", 400)
    for k in ("parts", "depth", "pointmap", "intrinsics", "keypoints"):
        if k in out and len(out[k]) != n:
            raise BackendError(f"input {k!r} has {len(out[k])} views, mask has {n}", 400)
    for k in ("parts", "depth", "pointmap"):
        if k in out and out[k].shape[1:3] != (h, w):
            raise BackendError(f"input {k!r} is {list(out[k].shape[1:3])} pixels per view but mask is {[h, w]}", 400)
    if int(out["parts"].max(initial=0)) >= len(out["part_names"]):
        raise BackendError("parts holds class ids beyond part_names", 400)
    return out
