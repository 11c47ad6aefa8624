# SPDX-License-Identifier: GPL-3.0-or-later
"""What one infer request does, apart from HTTP: validate, run the model, encode the answer.

``prepare_*`` run on the event loop side before a job is admitted (cheap checks, so a bad
request is a 400 and never takes a queue slot); the returned callables run in a worker thread.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from . import base
from .base import BackendError
from .jobs import BatchItem, Job
from .models import DENSE_OUTPUTS, ECHO, ModelSlot, parse_body_fit, parse_options
from ..processing.image_io import DEFAULT_MAX_PIXELS, ImageError, check_pixels_array, decode_image
from ..protocol import contract
from ..protocol.messages import InferRequest, MessageError, Tensor, encode_chunks, tensor

MAX_ECHO_DELAY_MS = 10_000
Encoded = tuple[list, "int | None"]  # body buffers, Inference-Header-Content-Length


def _binary_flags(req: InferRequest, tensors: list[Tensor], default: Callable[[Tensor], bool],
                  forced: frozenset[str] = frozenset()) -> list[bool]:
    """Per-output binary choice: forced > per-output binary_data > binary_data_output > default."""
    per_output = {o.name: o.parameters.get("binary_data") for o in req.outputs or []}
    all_binary = req.parameters.get("binary_data_output")
    flags = []
    for t in tensors:
        if t.name in forced:
            flags.append(True)
        elif isinstance(per_output.get(t.name), bool):
            flags.append(per_output[t.name])
        elif isinstance(all_binary, bool):
            flags.append(all_binary)
        else:
            flags.append(default(t))
    return flags


def _select(req: InferRequest, available: list[str]) -> list[str]:
    """Names of the outputs to send, in request order; unknown names are a 400."""
    if req.outputs is None:
        return available
    names = [o.name for o in req.outputs]
    unknown = [n for n in names if n not in available]
    if unknown:
        raise MessageError(f"unknown output(s) {unknown}; this model has {available}")
    return list(dict.fromkeys(names))


def _header(req: InferRequest, job: Job, model: str, version: str) -> dict:
    return {"model_name": model, "model_version": version, "id": req.id or job.id}


# ---- echo -----------------------------------------------------------------------------------

def prepare_echo(req: InferRequest) -> Callable[[Job], Encoded]:
    delay = req.parameters.get("delay_ms", 0)
    if not isinstance(delay, int) or isinstance(delay, bool) or not 0 <= delay <= MAX_ECHO_DELAY_MS:
        raise MessageError(f"parameter 'delay_ms' must be an integer in 0..{MAX_ECHO_DELAY_MS}")
    by_name = {t.name: t for t in req.inputs}
    names = _select(req, list(by_name))

    def work(job: Job) -> Encoded:
        steps = delay // 10
        for i in range(steps):  # a slow model in miniature: progress + cancel checks
            job.token.check()
            time.sleep(0.01)
            job.report("echo", (i + 1) / steps)
        job.report("encode")
        outputs = [by_name[n] for n in names]
        flags = _binary_flags(req, outputs, lambda t: t.binary)
        return encode_chunks(_header(req, job, ECHO, "1"), "outputs", outputs, flags)

    return work


# ---- maps models --------------------------------------------------------------------------

def _check_photo_input(req: InferRequest) -> Tensor:
    names = sorted(t.name for t in req.inputs)
    if names not in (["image"], ["pixels"]):
        raise MessageError(
            f"send exactly one input, 'image' (BYTES [1], an encoded photo) or 'pixels' "
            f"(UINT8 [H,W,3]); got {names}")
    t = req.inputs[0]
    if t.name == "image" and (t.datatype != "BYTES" or t.shape != [1]):
        raise MessageError(f"input 'image' must be BYTES with shape [1], got {t.datatype} {t.shape}")
    if t.name == "pixels" and (t.datatype != "UINT8" or len(t.shape) != 3 or t.shape[2] != 3):
        raise MessageError(
            f"input 'pixels' must be UINT8 with shape [H,W,3], got {t.datatype} {t.shape}")
    return t


def prepare_maps(req: InferRequest, slot: ModelSlot, *, max_pixels: int, autoload: bool,
                 fit_slot: ModelSlot | None = None) -> Callable[[Job], Encoded] | BatchItem:
    """The work of one maps request: a BatchItem when the model batches (requests with the same
    tasks and flip test then share forward passes), else a plain callable. With the parameter
    ``body_fit`` the body fit (``fit_slot``) runs on the maps in the same job and its arrays are
    sent with them (docs/body_format.md): the maps never travel back to be fitted."""
    photo = _check_photo_input(req)
    options = parse_options(req.parameters)
    fit = parse_body_fit(req.parameters)
    if fit and fit_slot is None:
        raise MessageError("parameter 'body_fit': this server has no body fit (install '.[fit]')")
    names = _select(req, list(base.MAP_OUTPUTS) + (list(FIT_OUTPUTS) if fit else []))

    def decode(job: Job) -> tuple[np.ndarray, base.AnalyzeOptions]:
        job.report("decode")
        if photo.name == "image":
            image = decode_image(bytes(photo.array.reshape(-1)[0]), max_pixels)
        else:
            # A writable copy: binary tensors are read-only views of the request body.
            image = np.array(check_pixels_array(photo.array, max_pixels))
        job.token.check()
        return image, options

    def encode(job: Job, maps: dict) -> Encoded:
        job.token.check()
        job.report("encode")
        produced = maps_to_tensors(maps, slot.name)
        if fit:
            produced.update(_fit_maps(job, produced, fit_slot, autoload))
            job.token.check()
            job.report("encode")
        outputs = [produced[n] for n in names if n in produced]
        # the body's arrays binary as body_fit sends them (a body is ~14k vertices per person)
        flags = _binary_flags(req, outputs, lambda t: t.name in FIT_OUTPUTS and t.datatype != "BYTES",
                              DENSE_OUTPUTS)
        return encode_chunks(_header(req, job, slot.name, slot.version), "outputs", outputs, flags)

    if slot.batching:
        def run_batch(jobs: list[Job], inputs: list) -> list:
            return slot.analyze_batch([i for i, _ in inputs], [o for _, o in inputs],
                                      [j.report for j in jobs], [j.token for j in jobs], autoload)

        return BatchItem(("maps", slot.name, options.tasks, options.flip_test), decode, run_batch, encode)

    def work(job: Job) -> Encoded:
        image, _ = decode(job)
        return encode(job, slot.analyze(image, options, job.report, job.token, autoload))

    return work


# ---- tensor models (the body fit) ------------------------------------------------------------

def prepare_tensors(req: InferRequest, slot: ModelSlot, *, autoload: bool,
                    max_pixels: int = DEFAULT_MAX_PIXELS) -> Callable[[Job], Encoded]:
    """A model whose inputs and outputs are plain tensors (``backend.infer_tensors``): every
    numeric output travels binary (a body is ~14k vertices per person). Its pixel grids are
    held to ``max_pixels`` as photos are, before the request takes a worker."""
    inputs = {t.name: t.array for t in req.inputs}
    if len(inputs) != len(req.inputs):
        raise MessageError("each input name may appear once")
    for name in getattr(slot.backend, "grid_inputs", ()):
        shape = getattr(inputs.get(name), "shape", ())
        if len(shape) >= 2 and shape[0] * shape[1] > max_pixels:
            raise ImageError(f"input {name!r} is a {shape[1]}x{shape[0]} grid = {shape[0] * shape[1]:,} pixels, "
                             f"more than the server's limit of {max_pixels:,} (--max-image-pixels); "
                             f"analyse at a smaller max_side", 413)
    parameters = dict(req.parameters)

    def work(job: Job) -> Encoded:
        slot.acquire(job.report, job.token, autoload)
        try:
            produced = slot.backend.infer_tensors(inputs, parameters, job.report, job.token)
        finally:
            slot.release()
        job.token.check()
        job.report("encode")
        tensors = _tensors(produced)
        names = _select(req, list(tensors))
        outputs = [tensors[n] for n in names]
        flags = _binary_flags(req, outputs, lambda t: t.datatype != "BYTES")
        return encode_chunks(_header(req, job, slot.name, slot.version), "outputs", outputs, flags)

    return work


# What a fit answers (docs/body_format.md); none of these names is a maps name.
FIT_OUTPUTS = tuple(contract.FIT)
# The maps a fit reads, as a client sends them to body_fit; depth, pointmap and keypoints_3d only
# when they hold a finite value (as the client's body_fit call sends them).
_FIT_READS = ("mask", "parts", "part_names", "intrinsics", "keypoints", "metric")
_FIT_READS_IF_FINITE = ("depth", "pointmap", "keypoints_3d")


def _fit_maps(job: Job, maps: dict[str, Tensor], fit_slot: ModelSlot, autoload: bool) -> dict[str, Tensor]:
    """The body fit of the maps just made, as output tensors; none when the mask holds nobody
    (a photo without a person is maps only, as the client skipped the fit before)."""
    if not np.any(maps["mask"].array):
        return {}
    inputs = {k: maps[k].array for k in _FIT_READS}
    inputs.update({k: maps[k].array for k in _FIT_READS_IF_FINITE
                   if k in maps and np.isfinite(maps[k].array).any()})
    fit_slot.acquire(job.report, job.token, autoload)
    try:
        produced = fit_slot.backend.infer_tensors(inputs, {}, job.report, job.token)
    finally:
        fit_slot.release()
    return _tensors(produced)


def _tensors(produced: dict) -> dict[str, Tensor]:
    """A tensor model's numpy outputs as tensors (text arrays as BYTES)."""
    tensors = {}
    for key, value in produced.items():
        arr = np.asarray(value)
        if arr.dtype.kind in "US":
            arr = np.asarray([str(v) for v in arr.reshape(-1)], object).reshape(arr.shape or (1,))
            tensors[key] = tensor(key, arr, "BYTES")
        else:
            tensors[key] = tensor(key, arr)
    return tensors


def maps_to_tensors(maps: dict, model: str) -> dict[str, Tensor]:
    """A backend's maps dict -> output tensors with the contract's datatypes and shapes."""
    if not isinstance(maps, dict):
        raise BackendError(f"model {model!r} returned {type(maps).__name__}, not a dict of maps")
    missing = [k for k in base.MAP_OUTPUTS if k not in maps and k not in base.OPTIONAL_OUTPUTS]
    if missing:
        raise BackendError(f"model {model!r} returned no {missing}")
    out: dict[str, Tensor] = {}
    for key, (datatype, shape) in base.MAP_OUTPUTS.items():
        if maps.get(key) is None:
            continue
        value = maps[key]
        if datatype == "BYTES":
            items = [value] if isinstance(value, (str, bytes)) else list(np.asarray(value).reshape(-1))
            arr = np.asarray([i if isinstance(i, (str, bytes)) else str(i) for i in items], object)
        else:
            arr = np.asarray(value)
            if key == "metric":
                arr = arr.reshape(1)
        if arr.ndim != len(shape) or any(s not in (-1, d) for s, d in zip(shape, arr.shape)):
            raise BackendError(
                f"model {model!r} returned {key!r} with shape {list(arr.shape)}, expected {shape}")
        try:
            out[key] = tensor(key, arr, datatype)
        except (TypeError, ValueError) as exc:
            raise BackendError(f"model {model!r} returned {key!r} not convertible to {datatype}: "
                               f"{exc}") from None
    grid = out["image"].shape[:2]
    for key in ("mask", "parts", "normal", "depth", "pointmap"):
        if key in out and out[key].shape[:2] != grid:
            raise BackendError(f"model {model!r} returned {key!r} of {out[key].shape[:2]} pixels "
                               f"but image is {grid}")
    return out
