# SPDX-License-Identifier: GPL-3.0-or-later
"""Backends that misbehave on purpose, served by the real server (``--backend-module``).

- ``faulty``: the first pixel's red value picks the failure: 1 raises a plain bug
  (RuntimeError), 2 a BackendError meant for the user (503), 3 returns maps of the wrong shape;
  anything else answers valid (empty) maps.
- ``slow-load``: loading takes ~3 s in small steps, reporting progress and honouring cancel.
"""

from __future__ import annotations

import time

import numpy as np

from inference_server.dataplane import base


def empty_maps(image: np.ndarray, source: str) -> dict:
    h, w = image.shape[:2]
    return {"image": image, "mask": np.zeros((h, w), np.uint8), "parts": np.zeros((h, w), np.uint8),
            "part_names": ["Background"], "normal": np.full((h, w, 3), np.nan, np.float32),
            "depth": np.full((h, w), np.nan, np.float32), "metric": False,
            "intrinsics": np.eye(3, dtype=np.float32), "keypoints": np.zeros((0, 308, 3), np.float32),
            "source": source}


class Faulty(base.LightweightBackend):
    name = "faulty"

    def analyze(self, image, options, progress=base.no_progress, cancel=None):
        mode = int(image[0, 0, 0])
        if mode == 1:
            raise RuntimeError("simulated bug deep inside the model")
        if mode == 2:
            raise base.BackendError("weights for 'faulty' are missing: put them in X", 503)
        maps = empty_maps(image, self.name)
        if mode == 3:
            maps["depth"] = np.zeros((2, 2), np.float32)
        return maps


class SlowLoad(base.LightweightBackend):
    name = "slow-load"

    def load(self, progress=base.no_progress, cancel=None) -> None:
        for step in range(60):
            if cancel is not None:
                cancel.check()
            progress("load", step / 60, f"downloading weights {step}/60")
            time.sleep(0.05)
        self._loaded = True

    def analyze(self, image, options, progress=base.no_progress, cancel=None):
        return empty_maps(image, self.name)


def register_all() -> None:
    base.register(Faulty.name, Faulty)
    base.register(SlowLoad.name, SlowLoad)
