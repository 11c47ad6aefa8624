# SPDX-License-Identifier: GPL-3.0-or-later
"""The backend interface every model family plugs into, and the registry of model names.

A backend turns one decoded RGB photo into the canonical maps (docs/maps_format.md) as a dict of
numpy arrays keyed exactly like the maps file. The server core owns HTTP, concurrency,
progress and cancellation; a backend only reports progress and checks the cancel token.
"""

from __future__ import annotations

import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..errors import InferenceServerError
from ..protocol import contract

# Canonical output tensors: name -> (v2 datatype, shape with -1 for variable dims), as the
# contract states them (protocol/contract.json). The optional ones (`pointmap`, `keypoints_3d`, the
# diagnostics `normal_agreement_deg` and `notes`) are sent when the backend provides them.
MAP_OUTPUTS: dict[str, tuple[str, list[int]]] = {k: (v["datatype"], v["shape"]) for k, v in contract.MAPS.items()}
OPTIONAL_OUTPUTS = frozenset(k for k, v in contract.MAPS.items() if v["optional"])


class Cancelled(InferenceServerError):
    """Raised inside a backend when its request was cancelled; the server answers 499."""


class BackendError(InferenceServerError):
    """A failure with a message meant for the user (missing weights, out of memory, ...).

    ``status`` is the HTTP status the server should answer with.
    """

    def __init__(self, message: str, status: int = 500):
        super().__init__(message)
        self.status = status


class CancelToken:
    """Set by the server when the client cancels; backends poll it between stages."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def check(self) -> None:
        if self._event.is_set():
            raise Cancelled("request cancelled")


# progress(stage, fraction in [0,1] or None if unknown, human-readable message)
ProgressFn = Callable[[str, "float | None", str], None]


def no_progress(stage: str, fraction: float | None, message: str = "") -> None:
    return None


@dataclass
class AnalyzeOptions:
    """Per-request options (v2 request `parameters`)."""

    tasks: tuple[str, ...] = ("seg", "normal", "depth", "pose")
    max_side: int = 1024  # the maps' long side; the photo is resized to fit (never upscaled)
    # pose on the crop and its mirror image, averaged (as the Sapiens2 pose configs test): costs a
    # second pose forward per person batch; the parameter flip_test=false turns it off
    flip_test: bool = True
    # the photo is one frame of a clip: a backend may skip averaging that the clip's smoothing over
    # frames replaces (the offline backend's six looks for each person's 3D pose, 1.8x its time)
    clip_frame: bool = False


class Model(ABC):
    """One servable model (a v2 model name). Load lazily, unload on request. The server serves a
    model by its type: a :class:`PhotoModel` takes a photo and answers the maps, a
    :class:`TensorModel` takes and answers plain tensors (the body fit)."""

    #: v2 model name, e.g. "sapiens2-0.4b", "sapiens-1b", "mediapipe"
    name: str = ""
    #: v2 "platform" string in model metadata
    platform: str = "sapiens_blender"
    #: v2 version string
    version: str = "1"

    @abstractmethod
    def load(self, progress: ProgressFn = no_progress, cancel: CancelToken | None = None) -> None:
        """Make the model ready (download/locate weights, build, move to device). Idempotent."""

    @abstractmethod
    def unload(self) -> None:
        """Free the model's memory (GPU included). Idempotent."""

    @property
    @abstractmethod
    def loaded(self) -> bool: ...

    def describe(self) -> dict:
        """Extra, human-readable facts for model metadata (device, precision, weights)."""
        return {}


class TensorModel(Model):
    """A model whose inputs and outputs are named tensors (docs/body_format.md)."""

    #: inputs that are pixel grids [H,W,...]: the server's pixel cap (--max-image-pixels, the
    #: one photos get) applies to them before the request takes a worker
    grid_inputs: tuple[str, ...] = ()

    @abstractmethod
    def infer_tensors(self, inputs: dict, parameters: dict, progress: ProgressFn = no_progress,
                      cancel: CancelToken | None = None) -> dict[str, np.ndarray]:
        """Outputs by name (numpy; text as str arrays) for ``inputs`` (numpy, text as bytes)."""


class PhotoModel(Model):
    """A model that turns one photo into the canonical maps (docs/maps_format.md)."""

    #: True when analyze_batch runs several photos in one forward pass: the server then batches
    #: queued requests for this model (with a plain loop it would only serialise them)
    batching: bool = False

    @abstractmethod
    def analyze(
        self,
        image: np.ndarray,
        options: AnalyzeOptions,
        progress: ProgressFn = no_progress,
        cancel: CancelToken | None = None,
    ) -> dict[str, np.ndarray]:
        """Canonical maps for one uint8 RGB [H,W,3] photo, keys as in MAP_OUTPUTS."""

    def analyze_batch(
        self,
        images: list[np.ndarray],
        options_list: list[AnalyzeOptions],
        progress_list: list[ProgressFn] | None = None,
        cancel_list: list[CancelToken | None] | None = None,
    ) -> list:
        """Maps for several photos, in order; each entry is the maps dict, or the exception that
        ended that photo (e.g. :class:`Cancelled`) without ending the others. The server's
        dynamic batching calls this; backends that can stack photos into one forward pass per
        task override it. This default runs them one by one."""
        n = len(images)
        progress_list = progress_list or [no_progress] * n
        cancel_list = cancel_list or [None] * n
        results: list = []
        for image, options, progress, cancel in zip(images, options_list, progress_list, cancel_list):
            try:
                if cancel is not None:
                    cancel.check()
                results.append(self.analyze(image, options, progress, cancel))
            except Exception as exc:  # one photo's failure is that photo's answer, not the batch's
                results.append(exc)
        return results


Backend = PhotoModel  # the name the backends (and plug-ins) subclass


class LightweightBackend(Backend):
    """A backend with nothing heavy to load (diagnostics, plug-ins, test doubles): ``load`` only
    marks it ready. Subclasses implement ``analyze``; override ``load`` to report real work."""

    def __init__(self) -> None:
        self._loaded = False

    def load(self, progress: ProgressFn = no_progress, cancel: CancelToken | None = None) -> None:
        progress("load", 1.0, f"{self.name} ready")
        self._loaded = True

    def unload(self) -> None:
        self._loaded = False

    @property
    def loaded(self) -> bool:
        return self._loaded


BackendFactory = Callable[[], Model]
_REGISTRY: dict[str, BackendFactory] = {}


def register(name: str, factory: BackendFactory) -> None:
    """Make ``name`` servable; the factory is called once, on first use (nothing loads here)."""
    _REGISTRY[name] = factory


def registered_names() -> list[str]:
    return sorted(_REGISTRY)


def create(name: str) -> Model:
    try:
        factory = _REGISTRY[name]
    except KeyError:
        raise KeyError(name) from None
    return factory()
