# SPDX-License-Identifier: GPL-3.0-or-later
"""Test backend served with ``--backend-module tiny_person_backend`` (numpy only, no weights).

``tiny-person``: the exact synthetic ellipsoid people of synthetic_scene.py on the photo's own
pixel grid, so every builder has real geometry, parts and keypoints to work with. People count
and per-stage delay come from TINY_PERSON_PEOPLE / TINY_PERSON_STAGE_SECONDS; progress is
reported and cancellation honoured at every step. Runs inside the server process.
"""

from __future__ import annotations

import os
import time

import numpy as np
from synthetic_scene import ellipsoid_maps

from inference_server.dataplane import base

PEOPLE = int(os.environ.get("TINY_PERSON_PEOPLE", "2"))
STAGE_SECONDS = float(os.environ.get("TINY_PERSON_STAGE_SECONDS", "0"))


class TinyPerson(base.LightweightBackend):
    name = "tiny-person"

    def analyze(self, image, options, progress=base.no_progress, cancel=None):
        for stage in ("seg", "normal", "depth", "pose"):
            for step in range(5):
                if cancel is not None:
                    cancel.check()
                progress(stage, step / 5, f"{stage} {step * 20}%")
                time.sleep(STAGE_SECONDS / 5)
        h, w = image.shape[:2]
        maps = ellipsoid_maps(w, h, people=PEOPLE)
        return {
            "image": np.ascontiguousarray(image),
            "mask": maps.mask,
            "parts": maps.parts,
            "part_names": np.array([n.encode() for n in maps.part_names], dtype=object),
            "normal": maps.normal,
            "depth": maps.depth,
            "metric": np.array([True]),
            "intrinsics": maps.intrinsics.astype(np.float32),
            "keypoints": maps.keypoints,
            "source": np.array([b"tiny-person"], dtype=object),
        }


base.register("tiny-person", TinyPerson)
