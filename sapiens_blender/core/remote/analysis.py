# SPDX-License-Identifier: GPL-3.0-or-later
"""One photo -> canonical Maps through the inference server, with progress and cancellation.

The photo's file bytes travel undecoded (a BYTES ``image`` tensor): the server decodes it, so
Blender's Python never needs an image library. While the infer call blocks the caller's thread,
a poller thread reads the job's progress from the server and forwards it, and turns a set
``cancel_event`` into a cancel request. This is what the CLI and the Blender panel call.
"""

from __future__ import annotations

import logging
import os
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path

import numpy as np

from .client import V2Client
from ..maps import contract
from ..errors import ProtocolError, RequestCancelled, SapiensServerError
from ..maps.canonical import Maps, MapsError

log = logging.getLogger(__name__)

# progress(stage, fraction in [0, 1] or None when unknown, human-readable message)
ProgressCallback = Callable[[str, "float | None", str], None]


def analyze_photo(
    client: V2Client,
    photo: str | os.PathLike | bytes,
    model: str,
    tasks: list[str] | tuple[str, ...] | None = None,
    max_side: int | None = None,
    flip_test: bool | None = None,
    progress: ProgressCallback | None = None,
    cancel_event: threading.Event | None = None,
    request_id: str | None = None,
    poll_interval: float = 0.25,
    timeout: float | None = None,
    cancel_grace: float = 5.0,
    clip_frame: bool = False,
) -> Maps:
    """Analyse one photo with ``model`` and return validated :class:`Maps` (no body: see
    ``body_calls.analyze`` for the analysis with the body fit in the same request).

    ``progress`` is called from a poller thread (keep it cheap and thread-safe). Setting
    ``cancel_event`` cancels the request on the server and raises RequestCancelled; when the
    server has not answered ``cancel_grace`` seconds later (it lacks our cancel endpoint, or its
    backend checks rarely) the request is abandoned client-side. ``clip_frame``: the photo is
    one frame of a clip (parameter ``clip_frame``: the backend may skip averaging that smoothing
    over the frames replaces).
    """
    return analyze_photo_and_body(client, photo, model, tasks, max_side, flip_test, progress, cancel_event,
                                  request_id, poll_interval, timeout, cancel_grace, clip_frame=clip_frame)[0]


def analyze_photo_and_body(client: V2Client, photo, model: str, tasks=None, max_side=None, flip_test=None,
                           progress: ProgressCallback | None = None, cancel_event=None, request_id=None,
                           poll_interval: float = 0.25, timeout: float | None = None, cancel_grace: float = 5.0,
                           body_fit: bool = False, clip_frame: bool = False) -> tuple[Maps, dict | None]:
    """:func:`analyze_photo`; with ``body_fit`` the server also fits the body to the maps it made,
    in the same request (parameter ``body_fit``): ``(maps, the fit's arrays)``, the arrays None
    when the server sent none (nobody in the photo, or a server that does not know the
    parameter: it ignores it)."""
    data = _photo_bytes(photo)
    parameters: dict = {}
    if tasks is not None:
        parameters["tasks"] = ",".join(tasks)
    if max_side is not None:
        parameters["max_side"] = int(max_side)
    if flip_test is not None:
        parameters["flip_test"] = bool(flip_test)
    if body_fit:
        parameters["body_fit"] = True
    if clip_frame:
        parameters["clip_frame"] = True
    outputs = _infer_watched(client, model, {"image": data}, parameters or None, progress, cancel_event,
                             request_id, poll_interval, timeout, cancel_grace, "analysis")
    fit = {k: outputs.pop(k) for k in list(outputs) if k in FIT_OUTPUTS}
    maps = maps_from_outputs(outputs)
    if progress is not None:
        progress("done", 1.0, "body fitted" if fit else "maps received")
    return maps, (decode_outputs(fit) if fit else None)


def _infer_watched(client, model, inputs, parameters, progress, cancel_event, request_id=None,
                   poll_interval=0.25, timeout=None, cancel_grace=5.0, what="request") -> dict:
    """client.infer with progress polled and cancellation forwarded from another thread."""
    request_id = request_id or uuid.uuid4().hex
    cancel_event = cancel_event or threading.Event()
    if cancel_event.is_set():
        raise RequestCancelled(f"the {what} was cancelled before it started")
    done = threading.Event()
    poller = threading.Thread(
        target=_watch,
        args=(client, request_id, progress, cancel_event, done, poll_interval, cancel_grace,
              threading.get_ident()),
        daemon=True, name=f"sapiens-progress-{request_id[:8]}",
    )  # fmt: skip
    poller.start()
    try:
        outputs = client.infer(model, inputs, parameters=parameters, request_id=request_id,
                               timeout=timeout)
    except (KeyboardInterrupt, SystemExit):
        # Ctrl-C: the server's job must not run on for nobody (the closed connection says so
        # too, but a proxy between us may keep the server's side open)
        done.set()
        _cancel_quietly(client, request_id)
        raise
    finally:
        done.set()
        poller.join(5)
    if cancel_event.is_set():
        raise RequestCancelled(f"the {what} was cancelled")
    return outputs


FIT_MODEL = "body_fit"
TEMPLATE_MODEL = "body_template"
# The arrays of a fit (docs/body_format.md), as an analysis asked for a body sends them with the maps.
FIT_OUTPUTS = frozenset(contract.FIT)


def fit_body(client: V2Client, maps: Maps, people: list[int] | None = None,
             progress: ProgressCallback | None = None, cancel_event: threading.Event | None = None,
             timeout: float | None = None) -> dict[str, np.ndarray]:
    """Fit the parametric body to ``maps`` on the server: the per-person arrays of
    docs/body_format.md (numpy; text as str arrays). The first fit on a machine also prepares the
    body model (~1-2 min, reported as a progress stage)."""
    inputs = {"mask": maps.mask, "parts": maps.parts,
              "part_names": np.asarray([str(n).encode() for n in maps.part_names], object),
              "intrinsics": np.asarray(maps.intrinsics, np.float32),
              "keypoints": np.asarray(maps.keypoints, np.float32),
              "metric": np.asarray([bool(maps.metric)])}
    for key in ("depth", "pointmap", "keypoints_3d"):
        value = getattr(maps, key)
        if value is not None and np.isfinite(value).any():
            inputs[key] = np.asarray(value, np.float32)
    parameters = {"people": ",".join(str(p) for p in people)} if people else None
    outputs = _infer_watched(client, FIT_MODEL, inputs, parameters, progress, cancel_event,
                             timeout=timeout, what="body fit")
    out = decode_outputs(outputs)
    if progress is not None:
        progress("done", 1.0, "body fitted")
    return out


MOTION_MODEL = "body_motion"


def body_motion(client: V2Client, *, phenotypes, reference_bone_matrices, reference_placement,
                reference_frame: int, targets, target_names, weights, smoothing: str = "causal",
                progress: ProgressCallback | None = None, cancel_event: threading.Event | None = None,
                timeout: float | None = None) -> dict[str, np.ndarray]:
    """One track's fitted body posed on every frame's joints (``targets`` [T,N,3], camera frame,
    NaN = unknown; ``weights`` [T,N]), the shape held: per-frame ``rotvecs``, ``placement``,
    ``bone_matrices``, ``joints`` (docs/body_format.md, "A body through a clip"). ``smoothing``
    of the solved poses: "causal" (reads no later frame), "centred" (whole clip) or "none"."""
    inputs = {"phenotypes": np.asarray(phenotypes, np.float32).reshape(6),
              "reference_bone_matrices": np.asarray(reference_bone_matrices, np.float32),
              "reference_placement": np.asarray(reference_placement, np.float32),
              "reference_frame": np.asarray([int(reference_frame)], np.int32),
              "targets": np.asarray(targets, np.float32),
              "target_names": np.asarray([str(n).encode() for n in target_names], object),
              "weights": np.asarray(weights, np.float32),
              "smoothing": np.asarray([smoothing.encode()], object)}
    outputs = _infer_watched(client, MOTION_MODEL, inputs, None, progress, cancel_event,
                             timeout=timeout, what="body motion")
    return decode_outputs(outputs)


def body_template(client: V2Client, timeout: float | None = None) -> dict[str, np.ndarray]:
    """The constant body data (faces, UVs, bones, weights, parts) of docs/body_format.md."""
    outputs = client.infer(TEMPLATE_MODEL, {"version": np.asarray([b"?"], object)}, timeout=timeout)
    return decode_outputs(outputs)


def decode_outputs(outputs: dict) -> dict[str, np.ndarray]:
    """The one decoding of the server's tensors: text (BYTES) as str arrays, the contract's
    one-value tensors (``source``, ``metric``, ``body_version``) as numpy scalars."""
    out = {}
    for key, value in outputs.items():
        arr = np.asarray(value)
        if arr.dtype == object:
            arr = np.asarray([_text(v) for v in arr.reshape(-1)], np.str_).reshape(arr.shape)
        if key in contract.SCALARS and arr.size:
            arr = np.asarray(arr.reshape(-1)[0])
        out[key] = arr
    return out


def maps_from_outputs(outputs: dict[str, np.ndarray]) -> Maps:
    """The server's canonical output tensors (BYTES/BOOL as sent) -> validated Maps."""
    try:
        return Maps.from_arrays(decode_outputs(outputs))
    except (MapsError, IndexError) as exc:
        raise ProtocolError(f"the server sent invalid maps: {exc}") from exc


def _photo_bytes(photo) -> bytes:
    if isinstance(photo, (bytes, bytearray, memoryview)):
        data = bytes(photo)
    else:
        path = Path(photo)
        if not path.is_file():
            raise FileNotFoundError(f"the photo {path} does not exist or is not a file")
        data = path.read_bytes()
    if not data:
        raise ValueError("the photo is empty (0 bytes)")
    return data


def _text(value) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, (bytes, np.bytes_)) else str(value)


def _cancel_quietly(client, request_id: str) -> None:
    try:
        client.cancel(request_id, timeout=2.0)
    except SapiensServerError as exc:
        log.debug("cancel of %s failed: %s", request_id, exc)
    finally:
        client.release_connection()


def _watch(client, request_id, progress, cancel_event, done, interval, grace, caller) -> None:
    """Poll the job's progress and forward changes; cancel on the server once asked to, and
    abandon the caller's request if the server has not stopped it after ``grace`` seconds."""
    last = None
    cancel_sent = False
    cancel_asked = None
    try:
        while not done.wait(interval):
            if cancel_event.is_set():
                cancel_asked = cancel_asked or time.monotonic()
                if time.monotonic() - cancel_asked > grace:
                    client.interrupt(caller)
                    continue
            if cancel_event.is_set() and not cancel_sent:
                try:  # None = the job does not exist yet: try again next round
                    cancel_sent = client.cancel(request_id) is not None
                except SapiensServerError as exc:
                    log.debug("cancel of %s failed: %s", request_id, exc)
            if progress is None:
                continue
            try:
                job = client.progress(request_id)
            except SapiensServerError as exc:  # transient: the infer call reports real failures
                log.debug("progress of %s unavailable: %s", request_id, exc)
                continue
            if not job:
                continue
            fraction = job.get("progress")
            state = (str(job.get("stage") or job.get("state") or ""), fraction, str(job.get("message") or ""))
            if state != last:
                last = state
                try:
                    progress(state[0], None if fraction is None else float(fraction), state[2])
                except Exception:  # noqa: BLE001 - a broken callback must not break the analysis
                    log.exception("progress callback failed")
    finally:
        client.release_connection()
