# SPDX-License-Identifier: GPL-3.0-or-later
"""Test backends served with ``--backend-module tiny_maps_backend`` (numpy only, no weights).

``tiny-maps``: deterministic canonical maps derived from the decoded photo (so a test can check
the photo really travelled), in four stages of ``TINY_STAGE_SECONDS`` each, reporting progress
and honouring cancellation. ``tiny-broken``: always fails with a user-facing message.
Runs inside the server process; never imported by the client side.
"""

from __future__ import annotations

import os
import time

import numpy as np

from inference_server.dataplane import base
from inference_server.processing import goliath

STAGE_SECONDS = float(os.environ.get("TINY_STAGE_SECONDS", "0"))
BROKEN_MESSAGE = "the tiny-broken model ran out of imaginary GPU memory"


class TinyMaps(base.LightweightBackend):
    name = "tiny-maps"

    def analyze(self, image, options, progress=base.no_progress, cancel=None):
        h, w = image.shape[:2]
        for stage in ("seg", "normal", "depth", "pose"):
            for step in range(10):
                if cancel is not None:
                    cancel.check()
                progress(stage, step / 10, f"{stage} {step * 10}%")
                time.sleep(STAGE_SECONDS / 10)
        mask = np.zeros((h, w), np.uint8)
        mask[h // 4 : 3 * h // 4, w // 4 : 3 * w // 4] = 1
        normal = np.zeros((h, w, 3), np.float32)
        normal[..., 2] = -1.0
        depth = np.where(mask > 0, 2.0, np.nan).astype(np.float32)
        keypoints = np.zeros((1, len(goliath.KEYPOINT_NAMES), 3), np.float32)
        keypoints[0, :, :2] = (w / 2, h / 2)
        keypoints[0, :, 2] = 0.9
        names = goliath.PART_NAMES_SAPIENS2
        return {
            "image": image,
            "mask": mask,
            "parts": (mask * (len(names) - 1)).astype(np.uint8),
            "part_names": np.array([n.encode() for n in names], dtype=object),
            "normal": normal,
            "depth": depth,
            "metric": np.array([True]),
            "intrinsics": np.array([[w, 0, w / 2], [0, w, h / 2], [0, 0, 1]], np.float32),
            "keypoints": keypoints,
            "source": np.array([b"tiny-maps"], dtype=object),
        }


class TinyBroken(TinyMaps):
    name = "tiny-broken"

    def analyze(self, image, options, progress=base.no_progress, cancel=None):
        raise base.BackendError(BROKEN_MESSAGE, status=500)


base.register("tiny-maps", TinyMaps)
base.register("tiny-broken", TinyBroken)
