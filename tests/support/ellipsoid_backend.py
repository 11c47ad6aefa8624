# SPDX-License-Identifier: GPL-3.0-or-later
"""Test backend served with ``--backend-module ellipsoid_backend``: the synthetic ellipsoid
person of synthetic_scene.py at the decoded photo's size (numpy only, no weights), so
`build PHOTO` and `batch` can be tested through a real server. ``ELLIPSOID_ANALYSIS_DELAY_S``
makes each analysis take that long (a test that interrupts a batch mid-run needs one)."""

from __future__ import annotations

import os
import time

import numpy as np

from inference_server.dataplane import base
from synthetic_scene import ellipsoid_maps, intrinsics


class EllipsoidPerson(base.LightweightBackend):
    name = "ellipsoid"

    def analyze(self, image, options, progress=base.no_progress, cancel=None):
        time.sleep(float(os.environ.get("ELLIPSOID_ANALYSIS_DELAY_S", "0")))
        h, w = image.shape[:2]
        maps = ellipsoid_maps(w, h, intrinsics(w, h, fx=150 * w / 128))
        out = maps.to_arrays()
        out["image"] = image  # the photo really travelled
        out["part_names"] = np.array([n.encode() for n in maps.part_names], dtype=object)
        out["source"] = np.array([b"ellipsoid"], dtype=object)
        out["metric"] = np.array([True])
        return out


base.register("ellipsoid", EllipsoidPerson)
