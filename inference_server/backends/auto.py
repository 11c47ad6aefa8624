# SPDX-License-Identifier: GPL-3.0-or-later
"""`auto`: Sapiens2 where it can run well, else the offline `mediapipe` backend. Says which, and why.

The choice is made lazily, on first load, so merely listing models never imports torch:
1. the Sapiens2 backend module must be installed (it is absent in a torch-free install);
2. an accelerator (CUDA / MPS) must be present: Sapiens2 on a laptop CPU takes tens of
   seconds per photo, MediaPipe well under one. Where no GPU driver exists at all, this is
   known without importing torch (which alone takes seconds);
3. Sapiens2's weights must be cached locally or downloadable (not offline without a cache).
If the chosen Sapiens2 model then fails to load, auto falls back to mediapipe and says so.
The decision is logged, returned by ``describe()`` and appended to every response's ``source``.
Settings (settings.py): ``auto_size`` (SAPIENS_AUTO_SIZE, default 0.4b) picks the Sapiens2 size;
``auto_model`` (SAPIENS_AUTO_MODEL) forces a model name (e.g. ``mediapipe``).
``auto`` batches exactly when the model it resolves to does (``batching``, ``analyze_batch``).
"""

from __future__ import annotations

import importlib
import importlib.util
import logging
import os
import platform
import threading

import numpy as np

from ..dataplane import base
from ..dataplane.base import AnalyzeOptions, Backend, BackendError, CancelToken, ProgressFn, no_progress
from .settings import SapiensSettings

log = logging.getLogger("inference_server.auto")

FALLBACK = "mediapipe"
DEFAULT_SAPIENS2_SIZE = "0.4b"


def may_have_accelerator() -> bool:
    """False only when this machine certainly has no GPU torch could use, checked without
    importing torch (seconds): no NVIDIA/AMD driver on Linux, no Apple silicon on macOS."""
    system = platform.system()
    if system == "Darwin":
        return platform.machine() == "arm64"
    if system == "Linux":
        return any(os.path.exists(p) for p in
                   ("/proc/driver/nvidia/version", "/dev/nvidia0", "/dev/nvidiactl", "/dev/kfd", "/dev/dxg"))
    return True  # Windows and others: let torch tell


def choose(sapiens2_module: str = "inference_server.backends.sapiens2",
           settings: SapiensSettings | None = None) -> tuple[str, str]:
    """(model name, human-readable reason). Imports torch only when Sapiens2 is installed."""
    settings = settings or SapiensSettings.from_env()
    forced = settings.auto_model
    if forced:
        return forced, f"SAPIENS_AUTO_MODEL={forced} is set"
    size = settings.auto_size or DEFAULT_SAPIENS2_SIZE
    try:
        sapiens2 = importlib.import_module(sapiens2_module)
    except ModuleNotFoundError as exc:
        return FALLBACK, f"the Sapiens2 backend is not installed ({exc.name} missing)"
    if importlib.util.find_spec("torch") is None:
        return FALLBACK, "torch is not installed (Sapiens2 needs torch and the 'sapiens' extra)"
    if not may_have_accelerator():
        return FALLBACK, "no GPU driver found (NVIDIA/AMD/Apple); Sapiens2 on this CPU would be slow"
    try:
        accelerator = sapiens2.accelerator_available()
    except Exception as exc:  # a broken torch install must not stop the offline path
        return FALLBACK, f"could not query for a GPU ({type(exc).__name__}: {exc})"
    if not accelerator:
        return FALLBACK, "no GPU/accelerator found (CUDA or MPS); Sapiens2 on this CPU would be slow"
    if not sapiens2.weights_available(size, weights_dir=settings.weights_dir):
        return FALLBACK, (f"Sapiens2 {size} weights are not cached and cannot be downloaded "
                          "(offline: HF_HUB_OFFLINE is set)")
    return f"sapiens2-{size}", f"{accelerator} available and Sapiens2 {size} weights available"


class AutoBackend(Backend):
    name = "auto"
    platform = "auto"

    def __init__(self, chooser=None, settings: SapiensSettings | None = None):
        self._chooser = chooser or (lambda: choose(settings=settings))
        self._lock = threading.Lock()
        self._inner: Backend | None = None
        self.choice: str | None = None
        self.reason: str = "not decided yet: decided when the model first loads"

    def _resolve(self) -> Backend:
        if self._inner is not None:
            return self._inner
        name, reason = self._chooser()
        try:
            inner = base.create(name)
        except KeyError:
            if name == FALLBACK:
                raise BackendError(f"auto chose {FALLBACK!r} ({reason}) but it is not registered", 503)
            reason = f"{reason}; but model {name!r} is not registered"
            name, inner = FALLBACK, base.create(FALLBACK)
        self._inner, self.choice, self.reason = inner, name, reason
        self.version = getattr(inner, "version", "1")
        log.info("auto: using %s because %s", name, reason)
        return inner

    def load(self, progress: ProgressFn = no_progress, cancel: CancelToken | None = None) -> None:
        with self._lock:
            inner = self._resolve()
            progress("load", None, f"auto: using {self.choice} ({self.reason})")
            try:
                inner.load(progress, cancel)
            except base.Cancelled:
                raise
            except Exception as exc:
                if self.choice == FALLBACK:
                    raise
                failed, why = self.choice, f"{type(exc).__name__}: {exc}"
                log.warning("auto: %s failed to load (%s); falling back to %s", failed, why, FALLBACK)
                self._inner, self.choice = base.create(FALLBACK), FALLBACK
                self.reason = f"{failed} failed to load ({why})"
                progress("load", None, f"auto: using {FALLBACK} ({self.reason})")
                self._inner.load(progress, cancel)

    def unload(self) -> None:
        with self._lock:
            if self._inner is not None:
                self._inner.unload()

    @property
    def loaded(self) -> bool:
        return self._inner is not None and self._inner.loaded

    @property
    def batching(self) -> bool:
        """As the model auto resolves to (deciding now if needed: the request loads it next)."""
        with self._lock:
            return bool(getattr(self._resolve(), "batching", False))

    def describe(self) -> dict:
        facts = {"resolved": self.choice, "reason": self.reason}
        if self._inner is not None:
            facts.update({f"{self.choice}.{k}": v for k, v in self._inner.describe().items()})
        return facts

    def analyze(
        self,
        image: np.ndarray,
        options: AnalyzeOptions,
        progress: ProgressFn = no_progress,
        cancel: CancelToken | None = None,
    ) -> dict[str, np.ndarray]:
        if not self.loaded:
            self.load(progress, cancel)
        return self._with_reason(self._inner.analyze(image, options, progress, cancel))

    def analyze_batch(self, images, options_list, progress_list=None, cancel_list=None) -> list:
        if not self.loaded:
            self.load((progress_list or [no_progress])[0], (cancel_list or [None])[0])
        results = self._inner.analyze_batch(images, options_list, progress_list, cancel_list)
        return [r if isinstance(r, BaseException) else self._with_reason(r) for r in results]

    def _with_reason(self, maps: dict) -> dict:
        inner_source = maps.get("source", self.choice)
        if isinstance(inner_source, np.ndarray):
            inner_source = str(inner_source.reshape(-1)[0])
        maps["source"] = f"{inner_source} (auto: {self.reason})"
        return maps


def register_all(settings: SapiensSettings | None = None) -> None:
    base.register("auto", lambda: AutoBackend(settings=settings))
