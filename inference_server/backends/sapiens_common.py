# SPDX-License-Identifier: GPL-3.0-or-later
"""What both Sapiens families share: one model per task, loaded lazily under one lock, run through
the shared pipeline for one photo or a batch. A family supplies how one task's model is found and
loaded (``_task_label``, ``_load_task``) and may adjust the device placement (``_placement``)."""

from __future__ import annotations

import logging
import threading

from . import devices
from .base import AnalyzeOptions, Backend, BackendError, CancelToken, ProgressFn, no_progress
from .sapiens_batch import run_pipeline_batch
from .sapiens_pipeline import StageTimes, run_pipeline

log = logging.getLogger(__name__)


class SinglePhotoCalls:
    """A runner's one-photo calls, as batches of one (a runner implements the ``*_batch`` ones)."""

    def segment(self, photo, hw):
        return self.segment_batch([photo], [hw])[0]

    def depth(self, photo, hw):
        return self.depth_batch([photo], [hw])[0]

    def normals(self, photo, hw):
        return self.normals_batch([photo], [hw])[0]


class SapiensTaskBackend(Backend):
    batching = True  # analyze_batch stacks photos into one forward pass per task
    #: task names this family knows (a request may name only these)
    known_tasks: tuple[str, ...] = ("seg", "depth", "normal", "pose")

    def _init_state(self, runner) -> None:
        self.models: dict = {}
        self.placement = None
        self.last_times = StageTimes()
        self._lock = threading.RLock()
        self._runner = runner

    # --- what a family provides ---------------------------------------------------------------
    def _placement(self) -> devices.Placement:
        return devices.choose_placement(self._device, self._precision)

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
            progress("load", 1.0, f"{self.source} ready on {self.placement.describe()}")
            log.info("%s loaded on %s", self.name, self.placement.describe())

    @property
    def loaded(self) -> bool:
        return bool(self.models) and all(t in self.models for t in self.tasks)

    def unload(self) -> None:
        with self._lock:
            if not self.models:
                return
            self.models.clear()
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
        with self._lock:
            self._check_tasks(options)
            self.last_times = StageTimes()
            return run_pipeline(self._runner, image, options, progress, cancel, device=self.placement.device,
                                times=self.last_times, normal_signs_hint=self._runner.last_normal_signs)

    def analyze_batch(self, images, options_list, progress_list=None, cancel_list=None) -> list:
        """Several photos, one forward per task for all of them (see sapiens_batch.py)."""
        self.load((progress_list or [no_progress])[0])
        with self._lock:
            for options in options_list:
                self._check_tasks(options)
            self.last_times = StageTimes()
            return run_pipeline_batch(self._runner, images, options_list, progress_list, cancel_list,
                                      device=self.placement.device, times=self.last_times,
                                      normal_signs_hint=self._runner.last_normal_signs)
