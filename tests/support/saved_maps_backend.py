# SPDX-License-Identifier: GPL-3.0-or-later
"""Test backend served with ``--backend-module saved_maps_backend`` (numpy only, no weights).

``saved-maps``: whatever the photo, the maps of the .npz named by $SAVED_MAPS_FILE (e.g. a
ground-truth scene of anny's body), so an analysis asked for a body can be fitted for real and
compared with the same maps fitted through ``body_fit``. Runs inside the server process.

With $SAVED_MAPS_DIR instead (a folder of maps .npz, each with its ``image``): the maps whose
image looks most like the photo (mean absolute difference on a coarse grid), so several photos
or a clip's frames of a ground-truth scene (e.g. a scan's views, written as PNGs or a video)
each get their own view's maps.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from inference_server.dataplane import base

GRID = (48, 36)


def _coarse(image: np.ndarray) -> np.ndarray:
    """The image sampled on a GRID of pixels (nearest), float: robust to compression and size."""
    h, w = image.shape[:2]
    rows = ((np.arange(GRID[0]) + 0.5) * h / GRID[0]).astype(int)
    cols = ((np.arange(GRID[1]) + 0.5) * w / GRID[1]).astype(int)
    return np.asarray(image, np.float32)[rows][:, cols, :3]


class SavedMaps(base.LightweightBackend):
    name = "saved-maps"

    def _file_for(self, image) -> str:
        folder = os.environ.get("SAVED_MAPS_DIR")
        if not folder:
            return os.environ["SAVED_MAPS_FILE"]
        best, best_err = None, np.inf
        probe = _coarse(image)
        for path in sorted(Path(folder).glob("*.npz")):
            with np.load(path, allow_pickle=False) as saved:
                err = float(np.abs(_coarse(saved["image"]) - probe).mean())
            if err < best_err:
                best, best_err = str(path), err
        if best is None:
            raise FileNotFoundError(f"no maps .npz in {folder}")
        return best

    def analyze(self, image, options, progress=base.no_progress, cancel=None):
        progress("seg", 0.5, "reading the saved maps")
        with np.load(self._file_for(image), allow_pickle=False) as saved:
            maps = {k: saved[k] for k in saved.files if k in base.MAP_OUTPUTS}
        maps["part_names"] = np.array([str(n).encode() for n in maps["part_names"]], dtype=object)
        maps["source"] = np.array([b"saved-maps"], dtype=object)
        return maps


base.register("saved-maps", SavedMaps)
