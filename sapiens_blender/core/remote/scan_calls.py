# SPDX-License-Identifier: GPL-3.0-or-later
"""The server's ``body_scan``: one body fitted over several views of one person
(inference_server/fit/scan_serving.py)."""

from __future__ import annotations

import json

import numpy as np

from ..body.records import BodyFit, scalar_str
from ..body.scan_views import ScanError
from . import analysis
from .body_calls import template_for

SCAN_MODEL = "body_scan"


def scan_inputs(views: list, person_ids: list) -> dict:
    """The stacked tensors of ``views`` (Maps of one size), each view's person alone in its mask.
    Depth travels instead of the pointmap where there is one (a quarter of the bytes: 24 views of
    720x960 would be 600 MB of pointmaps); the server rebuilds the points from it."""
    sizes = {(m.height, m.width) for m in views}
    if len(sizes) != 1:
        raise ScanError(f"the views of a scan must share one image size, got {sorted(sizes)}")
    kp = np.zeros((len(views), 308, 3), np.float32)
    for i, (m, pid) in enumerate(zip(views, person_ids)):
        if pid - 1 < len(m.keypoints):
            kp[i] = m.keypoints[pid - 1]
    inputs = {"mask": np.stack([(np.asarray(m.mask) == pid).astype(np.uint8) for m, pid in zip(views, person_ids)]),
              "parts": np.stack([np.asarray(m.parts, np.uint8) for m in views]),
              "part_names": np.asarray([str(n).encode() for n in views[0].part_names], object),
              "intrinsics": np.stack([np.asarray(m.intrinsics, np.float32) for m in views]),
              "keypoints": kp, "metric": np.asarray([all(bool(m.metric) for m in views)])}
    if any(list(m.part_names) != list(views[0].part_names) for m in views):
        raise ScanError("the views of a scan must use one set of part names (analyse them with one model)")
    if all(m.depth is not None and np.isfinite(m.depth).any() for m in views):
        inputs["depth"] = np.stack([np.asarray(m.depth, np.float32) for m in views])
    elif all(m.pointmap is not None for m in views):
        inputs["pointmap"] = np.stack([np.asarray(m.pointmap, np.float32) for m in views])
    return inputs


def scan_body(client, views: list, person_ids: list, progress=None, cancel_event=None, timeout=None):
    """(template, fit, fitted view indices, notes, scan report): ``fit`` holds one row per fitted
    view (person ``k`` is the k-th fitted view), all with one shape."""
    outputs = analysis._infer_watched(client, SCAN_MODEL, scan_inputs(views, person_ids), None, progress,
                                      cancel_event, timeout=timeout, what="scan fit")
    arrays = analysis.decode_outputs(outputs)
    template = template_for(client, arrays, timeout)
    fit = BodyFit.from_arrays(arrays, template=template)
    notes = [str(s) for s in np.asarray(arrays.get("skipped", [])).reshape(-1) if str(s)]
    report = json.loads(scalar_str(arrays.get("scan_report", "{}")) or "{}")
    return template, fit, np.asarray(arrays["views"]).astype(int).tolist(), notes, report


def gather_scan(client, frames: list, names: list, model: str, max_views: int | None = None, progress=None,
                cancel_event=None):
    """Everything a scan needs from the server, numpy only (the panel runs it off Blender's main
    thread, ``api.scan`` inline): frames (core.motion.sources.Frame: maps files or encoded images)
    analysed, the views worth fitting chosen, one body fitted to them.
    Returns (template, fit, ScanView list, notes)."""
    from ..body.scan import ScanView, fit_quality
    from ..body.scan_views import person_of, select_views
    from .analysis import analyze_photo

    say = progress or (lambda stage, fraction, text: None)

    def cancelled():
        if cancel_event is not None and cancel_event.is_set():
            raise ScanError("the scan was cancelled")

    views = []
    for i, frame in enumerate(frames):
        cancelled()
        if frame.maps_path is not None:
            views.append(frame.load_maps())
        else:
            say("analysis", i / len(frames), f"analysing view {i + 1} of {len(frames)}")
            views.append(analyze_photo(client, frame.data, model, cancel_event=cancel_event))
    chosen = select_views(views, max_views)
    kept = [views[i] for i in chosen.kept]
    ids = [person_of(m) for m in kept]
    cancelled()
    say("fit", 0.0, f"fitting one body to {len(kept)} views")
    template, fit, fitted, skipped, report = scan_body(client, kept, ids, progress=progress, cancel_event=cancel_event)
    quality = fit_quality([fit.report(p).get("surface_residual_m") for p in fit.person_ids])
    out = [ScanView(kept[k], ids[k], fit.vertices[j], float(quality[j])) for j, k in enumerate(fitted)]
    kept_names = [names[i] for i in chosen.kept]
    notes = chosen.lines(names) + [f"fit skipped {n}" for n in skipped]
    notes += [f"{kept_names[k]} fits less well (its texture weighs {q:.2f})" for k, q in zip(fitted, quality) if q < 0.5]
    notes.append(f"scan fit: {report.get('views')} views in {report.get('seconds')} s")
    return template, fit, out, notes
