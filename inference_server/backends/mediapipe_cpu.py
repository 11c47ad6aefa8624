# SPDX-License-Identifier: GPL-3.0-or-later
"""`mediapipe`: the offline CPU backend. Real maps from a real photo with nothing to download.

Uses only the models bundled in the ``mediapipe`` 0.10.21 wheel: the legacy Holistic solution's
models (pose detector; pose landmarks at model complexity 1 = ``pose_landmark_full.tflite``,
person segmentation, face mesh, hands), in two graphs of ours: the detector on the photo and its
tiles (every person: mediapipe_detector), then Holistic's landmark subgraphs at each person
(mediapipe_landmarker). Complexity 0 and 2 are NOT bundled (MediaPipe would download them at
construction), so they are never used. No torch anywhere on this path.

The work itself (people, keypoints, parts, pseudo-depth, normals) is in ``mediapipe_people``,
imported on load: this module imports neither mediapipe nor OpenCV, so a server environment
without them still starts and this model answers with the reason. See docs/offline_backend.md for the depth, normals, parts and camera models.
"""

from __future__ import annotations

import threading
from pathlib import Path

import numpy as np

from ..dataplane.base import (AnalyzeOptions, Backend, BackendError, CancelToken, ProgressFn, no_progress,
                              register)

MODEL_COMPLEXITY = 1  # the only pose landmark model inside the wheel
# The files the Holistic graph at complexity 1 opens (checked with strace on 0.10.21; the
# segmentation comes out of the pose landmark model); all ship inside the mediapipe wheel.
BUNDLED_MODELS = (
    "modules/pose_detection/pose_detection.tflite",
    "modules/pose_landmark/pose_landmark_full.tflite",
    "modules/face_detection/face_detection_short_range.tflite",
    "modules/face_landmark/face_landmark.tflite",
    "modules/hand_landmark/hand_landmark_full.tflite",
    "modules/holistic_landmark/hand_recrop.tflite",
)
INSTALL_HINT = "install the server extra: pip install 'sapiens-blender[server]' (mediapipe==0.10.21)"


def mediapipe_version() -> str:
    """The installed mediapipe version without importing it (importing takes ~2 s)."""
    from importlib import metadata

    try:
        return metadata.version("mediapipe")
    except metadata.PackageNotFoundError:
        return "unavailable"


def check_bundled_models() -> Path:
    """The mediapipe package dir, after checking every model we need is inside it."""
    try:
        import mediapipe
    except ImportError as exc:
        raise BackendError(f"the offline backend needs the 'mediapipe' package ({exc}); {INSTALL_HINT}",
                           503) from None
    root = Path(mediapipe.__file__).parent
    missing = [m for m in BUNDLED_MODELS if not (root / m).is_file()]
    if missing:
        raise BackendError(
            f"mediapipe {mediapipe_version()} at {root} lacks bundled models {missing}; "
            "install mediapipe==0.10.21, which ships them (nothing is downloaded)", 503)
    return root


class MediaPipeBackend(Backend):
    name = "mediapipe"
    platform = "mediapipe"

    def __init__(self, max_people: int = 16):  # the fit's limit per request (fit/serving.py)
        self.max_people = max(1, int(max_people))
        self._holistic = None
        self._detector = None  # mediapipe_detector.PoseDetector, once loaded
        self._pose = None  # the landmarker without hands and face, to place people
        self._work = None  # the mediapipe_people module, once loaded
        self._lock = threading.Lock()  # one MediaPipe graph; its calls must not overlap
        self.version = mediapipe_version()
        self.timings: dict[str, float] = {}  # seconds per stage of the last analyze()

    # --- lifecycle ---------------------------------------------------------------------------
    def load(self, progress: ProgressFn = no_progress, cancel: CancelToken | None = None) -> None:
        with self._lock:
            if self._holistic is not None:
                return
            progress("load", None, "loading MediaPipe's pose detector and Holistic models (bundled, CPU)")
            check_bundled_models()
            try:
                from . import mediapipe_detector, mediapipe_landmarker, mediapipe_people
            except ImportError as exc:
                raise BackendError(f"the offline backend cannot start: {exc}; {INSTALL_HINT}", 503) from None

            self._holistic = mediapipe_landmarker.PersonLandmarker(MODEL_COMPLEXITY)
            self._pose = mediapipe_landmarker.PersonLandmarker(MODEL_COMPLEXITY, hands_and_face=False)
            self._detector = mediapipe_detector.PoseDetector()
            # The first inference initialises the XNNPACK delegate (~0.5 s): pay it at load.
            warm = np.full((64, 64, 3), 127, np.uint8)
            self._detector.detect(warm)
            self._holistic.process(warm, (32, 40), (32, 8))
            self._pose.process(warm, (32, 40), (32, 8))
            self._work = mediapipe_people
            progress("load", 1.0, "MediaPipe ready")

    def unload(self) -> None:
        with self._lock:
            if self._holistic is not None:
                self._holistic.close()
                self._holistic = None
            for graph in (self._detector, self._pose):
                if graph is not None:
                    graph.close()
            self._detector = self._pose = None

    @property
    def loaded(self) -> bool:
        return self._holistic is not None

    def describe(self) -> dict:
        return {
            "device": "cpu",
            "weights": "bundled in the mediapipe wheel (nothing downloaded)",
            "models": "MediaPipe pose detector on tiles (every person), then Holistic per person: "
                      "pose (complexity 1), segmentation, face mesh, hands",
            "depth": "pseudo-depth: silhouette inflation + landmark depths, metric from body proportions",
            "max_people": self.max_people,
            "source": self.source,
        }

    @property
    def source(self) -> str:
        return f"mediapipe-{self.version}"

    # --- analysis ----------------------------------------------------------------------------
    def _process(self, image: np.ndarray, hips, top, full: bool = True):
        """Holistic's landmarks of the person at ``hips``/``top``, with hands and face when
        ``full`` (the graphs are shared: calls must not overlap)."""
        with self._lock:
            if self._holistic is None:
                raise BackendError("the mediapipe model was unloaded during the request", 503)
            return (self._holistic if full else self._pose).process(image, hips, top)

    def _find(self, image: np.ndarray, cancel: CancelToken | None = None):
        """The pose detector's people in the photo and its tiles (shares the lock: one graph)."""
        with self._lock:
            if self._detector is None:
                raise BackendError("the mediapipe model was unloaded during the request", 503)
            return self._detector.find_people(image, cancel)

    def analyze(
        self,
        image: np.ndarray,
        options: AnalyzeOptions,
        progress: ProgressFn = no_progress,
        cancel: CancelToken | None = None,
    ) -> dict[str, np.ndarray]:
        cancel = cancel or CancelToken()
        image = np.asarray(image)
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise BackendError(f"expected an RGB uint8 [H,W,3] photo, got {image.dtype} {image.shape}", 400)
        self.load(progress, cancel)
        maps, self.timings = self._work.analyze_photo(self._process, self._find, image, options, self.max_people,
                                                      progress, cancel)
        maps["source"] = self.source
        return maps


def register_all() -> None:
    register("mediapipe", MediaPipeBackend)
