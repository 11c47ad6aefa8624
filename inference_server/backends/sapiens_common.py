# SPDX-License-Identifier: GPL-3.0-or-later
"""What both Sapiens families share: one model per task, loaded lazily under one lock, run through
the shared pipeline for one photo or a batch. A family supplies how one task's model is found and
loaded (``_task_label``, ``_load_task``) and may adjust the device placement (``_placement``)."""

from __future__ import annotations

import logging
import threading

from . import devices
from ..dataplane.base import AnalyzeOptions, Backend, BackendError, CancelToken, ProgressFn, no_progress
from .sapiens_pipeline import StageTimes, device_synchronizer, run_pipeline
from .settings import SapiensSettings

log = logging.getLogger(__name__)


class SapiensTaskBackend(Backend):
    batching = True  # analyze_batch stacks photos into one forward pass per task
    #: last_times waits for the device at each stage boundary (exact per-stage times on a GPU,
    #: without the overlap of host and device work; sapiens_pipeline.StageTimes)
    exact_stage_times = False
    #: task names this family knows (a request may name only these)
    known_tasks: tuple[str, ...] = ("seg", "depth", "normal", "pose")

    def _init_state(self, runner, settings: SapiensSettings | None, **overrides) -> None:
        """``settings`` (from the server's flags/environment; read from the environment when None)
        with the constructor's explicit arguments applied over it."""
        self.settings = (settings or SapiensSettings.from_env()).replace(**overrides)
        self.weights_dir = self.settings.weights_dir
        self.models: dict = {}
        self.detector = None  # person_detector.PersonDetector once loaded (None: connected components)
        self.no_detector_reason = "no person detector configured (SAPIENS_DETECTOR=none)"
        self.placement = None
        self.last_times = StageTimes()
        self._lock = threading.RLock()
        self._runner = runner

    # --- what a family provides ---------------------------------------------------------------
    def _placement(self) -> devices.Placement:
        return devices.choose_placement(self.settings.device, self.settings.precision, self.settings.compile,
                                        self.settings.heads)

    def _task_label(self, task: str) -> str:
        raise NotImplementedError

    def _load_task(self, task: str, progress: ProgressFn, cancel: CancelToken | None):
        raise NotImplementedError

    # --- lifecycle -----------------------------------------------------------------------------
    def load(self, progress: ProgressFn = no_progress, cancel: CancelToken | None = None) -> None:
        with self._lock:
            if self.loaded:
                return
            try:
                self.placement = self._placement()
            except ValueError as exc:
                raise BackendError(str(exc), status=400) from exc
            for i, task in enumerate(self.tasks):
                if task in self.models:
                    continue
                if cancel is not None:
                    cancel.check()
                progress("load", i / len(self.tasks), f"loading {self._task_label(task)}")
                self.models[task] = self._load_task(task, progress, cancel)
            self._load_detector(progress, cancel)
            progress("load", 1.0, f"{self.source} ready on {self.placement.describe()}")
            log.info("%s loaded on %s", self.name, self.placement.describe())

    def _load_detector(self, progress: ProgressFn, cancel: CancelToken | None) -> None:
        """The person detector is optional: when it cannot be had (offline without it in the cache,
        a repo without a person class...) the people are connected components and the maps' notes
        say why; the Sapiens models themselves still serve."""
        repo = self.settings.detector
        if repo is None or self.detector is not None:
            return
        from .person_detector import load_detector

        progress("load", None, f"loading the person detector {repo}")
        try:
            self.detector = load_detector(repo, self.placement, self.weights_dir, progress, cancel)
        except BackendError as exc:
            self.no_detector_reason = f"person detector {repo} unavailable: {exc}"
            log.warning("%s: %s; people will be connected components", self.name, self.no_detector_reason)

    def _people_facts(self) -> dict:
        if self.detector is not None:
            return {"people": f"person detector {self.detector.repo}"}
        return {"people": f"connected components ({self.no_detector_reason})"}

    @property
    def loaded(self) -> bool:
        return bool(self.models) and all(t in self.models for t in self.tasks)

    def unload(self) -> None:
        with self._lock:
            if not self.models:
                return
            self.models.clear()
            self.detector = None
            devices.free_memory()
            log.info("%s unloaded", self.name)

    def _check_tasks(self, options: AnalyzeOptions) -> None:
        # seg is always needed: it finds the people every other task is cut to.
        missing = [t for t in options.tasks if t in self.known_tasks and t not in self.models]
        if missing or "seg" not in self.models:
            raise BackendError(f"{self.name} was built without task(s) {missing or ['seg']}", status=400)

    def analyze(self, image, options: AnalyzeOptions, progress: ProgressFn = no_progress,
                cancel: CancelToken | None = None) -> dict:
        self.load(progress, cancel)
        (result,) = self.analyze_batch([image], [options], [progress], [cancel])
        if isinstance(result, BaseException):
            raise result
        return result

    def analyze_batch(self, images, options_list, progress_list=None, cancel_list=None) -> list:
        """Several photos, one forward per task for all of them (sapiens_pipeline.py)."""
        self.load((progress_list or [no_progress])[0])
        with self._lock:
            for options in options_list:
                self._check_tasks(options)
            self.last_times = StageTimes(synchronize=device_synchronizer(self.placement.device)
                                         if self.exact_stage_times else None)
            return run_pipeline(self._runner, images, options_list, progress_list, cancel_list,
                                device=self.placement.device, times=self.last_times,
                                detector=self.detector, no_detector_reason=self.no_detector_reason,
                                depth_available="depth" in self.models)
