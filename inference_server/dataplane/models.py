# SPDX-License-Identifier: GPL-3.0-or-later
"""Servable models: one slot per registered name, holding its backend across requests.

A slot creates its backend on first use (so merely listing models loads nothing), loads it on
demand, and lets ``unload`` wait for the inferences running on it before freeing memory.
"""

from __future__ import annotations

import json
import threading

import numpy as np

from . import base
from .base import AnalyzeOptions, BackendError, CancelToken, ProgressFn, no_progress
from ..protocol.messages import MessageError
from ..errors import InferenceServerError

ECHO = "echo"
FIT_MODEL = "body_fit"  # the tensor model an analysis asked for a body (parameter body_fit) runs
KNOWN_TASKS = ("seg", "normal", "depth", "pose")
# Outputs that are always sent binary: JSON of a 1024x768 map is ~100x slower.
DENSE_OUTPUTS = frozenset({"image", "mask", "parts", "normal", "depth", "pointmap"})
MAP_INPUTS = [
    {"name": "image", "datatype": "BYTES", "shape": [1],
     "parameters": {"content": "one encoded photo (PNG/JPEG/...); send this OR pixels"}},
    {"name": "pixels", "datatype": "UINT8", "shape": [-1, -1, 3],
     "parameters": {"content": "decoded RGB pixels; send this OR image"}},
]


class NotLoaded(InferenceServerError):
    """The model is not loaded and the server does not load on demand (HTTP 409)."""


class ModelSlot:
    def __init__(self, name: str):
        self.name = name
        self._backend: base.Model | None = None
        self._create_lock = threading.Lock()
        self._load_lock = threading.Lock()  # serialises load/unload of this model
        self._cond = threading.Condition()
        self._running = 0  # inferences using the backend now
        self._unloading = False
        self.loading = False
        self.last_error: str | None = None

    @property
    def backend(self) -> base.Model:
        with self._create_lock:
            if self._backend is None:
                try:
                    self._backend = base.create(self.name)
                except Exception as exc:
                    raise BackendError(f"model {self.name!r} could not be created: {exc}") from exc
            return self._backend

    @property
    def version(self) -> str:
        return str(getattr(self._backend, "version", None) or "1")

    @property
    def loaded(self) -> bool:
        b = self._backend
        try:
            return bool(b is not None and b.loaded)
        except Exception:
            return False

    def load(self, progress: ProgressFn = no_progress, cancel: CancelToken | None = None) -> None:
        with self._load_lock:
            if self.loaded:
                return
            self.loading = True
            try:
                progress("load", 0.0, f"loading {self.name}")
                self.backend.load(progress, cancel)
                self.last_error = None
                progress("load", 1.0, f"{self.name} loaded")
            except base.Cancelled:
                raise
            except Exception as exc:
                self.last_error = str(exc)
                raise
            finally:
                self.loading = False

    def unload(self) -> None:
        with self._load_lock:
            with self._cond:
                self._unloading = True
                self._cond.wait_for(lambda: self._running == 0)
            try:
                if self._backend is not None:
                    self._backend.unload()
            finally:
                with self._cond:
                    self._unloading = False
                    self._cond.notify_all()

    def analyze(self, image: np.ndarray, options: AnalyzeOptions, progress: ProgressFn,
                cancel: CancelToken, autoload: bool) -> dict:
        self._acquire(progress, cancel, autoload)
        try:
            return self.backend.analyze(image, options, progress, cancel)
        finally:
            self._release()

    def analyze_batch(self, images: list, options_list: list, progress_list: list, cancel_list: list,
                      autoload: bool) -> list:
        """Backend.analyze_batch under the same load/unload guard as analyze."""
        self._acquire(progress_list[0], cancel_list[0], autoload)
        try:
            return self.backend.analyze_batch(images, options_list, progress_list, cancel_list)
        finally:
            self._release()

    @property
    def batching(self) -> bool:
        """True when the backend runs several photos in one forward pass (worth batching)."""
        try:
            backend = self.backend
        except Exception:  # a backend that cannot be created says so when it is used
            return False
        return isinstance(backend, base.PhotoModel) and bool(backend.batching)

    def acquire(self, progress: ProgressFn, cancel: CancelToken, autoload: bool) -> None:
        """Hold the loaded backend for one inference (loading it first when allowed); pair with
        ``release``."""
        self._acquire(progress, cancel, autoload)

    def release(self) -> None:
        self._release()

    @property
    def tensor_model(self) -> bool:
        """True for models that take and return plain tensors (the body fit), not photos."""
        try:
            return isinstance(self.backend, base.TensorModel)
        except Exception:
            return False

    def _acquire(self, progress: ProgressFn, cancel: CancelToken, autoload: bool) -> None:
        """Count an inference on the loaded backend (loading it first when allowed)."""
        while True:
            with self._cond:
                self._cond.wait_for(lambda: not self._unloading)
                if self.loaded:
                    self._running += 1
                    return
            if not autoload:
                raise NotLoaded(f"model {self.name!r} is not loaded; load it with "
                                f"POST /v2/repository/models/{self.name}/load")
            self.load(progress, cancel)

    def _release(self) -> None:
        with self._cond:
            self._running -= 1
            self._cond.notify_all()

    def state(self) -> tuple[str, str]:
        if self.loading:
            return "LOADING", ""
        if self.loaded:
            return "READY", ""
        return "UNAVAILABLE", self.last_error or "not loaded"


def parse_options(parameters: dict) -> AnalyzeOptions:
    """Request parameters -> AnalyzeOptions; bad values are a 400 with the reason."""
    opts = AnalyzeOptions()
    tasks = parameters.get("tasks")
    if tasks is not None:
        if isinstance(tasks, str):
            tasks = [t.strip() for t in tasks.split(",") if t.strip()]
        if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) for t in tasks):
            raise MessageError("parameter 'tasks' must be a comma-separated string, e.g. 'seg,depth'")
        unknown = [t for t in tasks if t not in KNOWN_TASKS]
        if unknown:
            raise MessageError(f"unknown task(s) {unknown}; known: {', '.join(KNOWN_TASKS)}")
        opts.tasks = tuple(dict.fromkeys(tasks))
    side = parameters.get("max_side")
    if side is not None:
        if isinstance(side, str) and side.isdigit():
            side = int(side)
        if not isinstance(side, int) or isinstance(side, bool) or not 16 <= side <= 16384:
            raise MessageError(f"parameter 'max_side' must be an integer in 16..16384, got {side!r}")
        opts.max_side = side
    opts.flip_test = _flag(parameters, "flip_test", opts.flip_test)
    opts.clip_frame = _flag(parameters, "clip_frame", opts.clip_frame)
    return opts


def _flag(parameters: dict, name: str, default: bool) -> bool:
    """A true/false request parameter (also "true"/"false"/"1"/"0"); absent or null: ``default``."""
    value = parameters.get(name)
    if value is None:
        return default
    if isinstance(value, str) and value.lower() in ("true", "false", "1", "0"):
        value = value.lower() in ("true", "1")
    if not isinstance(value, bool):
        raise MessageError(f"parameter '{name}' must be true or false, got {value!r}")
    return value


def parse_body_fit(parameters: dict) -> bool:
    """The parameter ``body_fit``: true runs the body fit on the maps in the same request."""
    return _flag(parameters, "body_fit", False)


def model_metadata(name: str, slot: ModelSlot | None) -> dict:
    if name == ECHO:
        return {"name": ECHO, "versions": ["1"], "platform": "sapiens_blender_echo",
                "inputs": [], "outputs": [],
                "parameters": {"description": "returns every input tensor unchanged (any name, "
                                              "datatype, shape); parameter delay_ms slows it"}}
    if slot is not None and slot.tensor_model:
        meta = {"name": name, "versions": [slot.version], "platform": slot.backend.platform,
                "inputs": [], "outputs": [], "parameters": {"contract": "docs/body_format.md"}}
        described = json.loads(json.dumps(slot.backend.describe(), default=str))
        meta["inputs"] = [{"name": k, "datatype": v["datatype"], "shape": v["shape"]}
                          for k, v in described.pop("inputs", {}).items()]
        meta["parameters"]["backend"] = described
        return meta
    outputs = [{"name": k, "datatype": dt, "shape": list(shape)}
               for k, (dt, shape) in base.MAP_OUTPUTS.items()]
    meta = {"name": name, "versions": [slot.version if slot else "1"],
            "platform": "sapiens_blender", "inputs": MAP_INPUTS, "outputs": outputs,
            "parameters": {"tasks": ",".join(KNOWN_TASKS), "max_side": 1024,
                           "flip_test": base.AnalyzeOptions().flip_test, "clip_frame": False, "body_fit": False}}
    if slot is not None and slot._backend is not None:
        meta["platform"] = slot._backend.platform
        try:  # via JSON with str() fallback: a torch.device or Path must not turn this into a 500
            described = json.loads(json.dumps(slot._backend.describe(), default=str))
            meta["parameters"]["backend"] = described
        except Exception as exc:  # describe is informative only
            meta["parameters"]["backend"] = {"error": str(exc)}
    return meta
