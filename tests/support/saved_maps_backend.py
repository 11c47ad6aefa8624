# SPDX-License-Identifier: GPL-3.0-or-later
"""Test backend served with ``--backend-module saved_maps_backend`` (numpy only, no weights).

``saved-maps``: whatever the photo, the maps of the .npz named by $SAVED_MAPS_FILE (e.g. a
ground-truth scene of anny's body), so an analysis asked for a body can be fitted for real and
compared with the same maps fitted through ``body_fit``. Runs inside the server process.
"""

from __future__ import annotations

import os

import numpy as np

from inference_server.dataplane import base


class SavedMaps(base.LightweightBackend):
    name = "saved-maps"

    def analyze(self, image, options, progress=base.no_progress, cancel=None):
        progress("seg", 0.5, "reading the saved maps")
        with np.load(os.environ["SAVED_MAPS_FILE"], allow_pickle=False) as saved:
            maps = {k: saved[k] for k in saved.files if k in base.MAP_OUTPUTS}
        maps["part_names"] = np.array([str(n).encode() for n in maps["part_names"]], dtype=object)
        maps["source"] = np.array([b"saved-maps"], dtype=object)
        return maps


base.register("saved-maps", SavedMaps)
