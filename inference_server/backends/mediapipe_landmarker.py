# SPDX-License-Identifier: GPL-3.0-or-later
"""One person's landmarks where the detector saw them: Holistic's own parts (the wheel's
``PoseLandmarkByRoiCpu``, ``HandLandmarksLeftAndRightCpu``, ``FaceLandmarksFromPoseCpu``
subgraphs), fed the detector's box instead of running their own detector.

Holistic re-detects inside whatever it is given and keeps the best person: in a crop around one
of several people it often lands on a neighbour, and it misses people cut by the photo's edge.
Given the box, the landmark model looks exactly there (turned as the detector says the body is);
it reports nobody when its presence score is low. Same models, same settings (complexity 1,
segmentation on, face refinement off), nothing downloaded. ``Looks`` takes these looks on
the maps' grid, or on the larger photo the grid was shrunk from, answering in the grid's pixels.
"""

from __future__ import annotations

import cv2
import numpy as np

# The landmark model's crop ("roi") from the streams "image" and "detection" (detection_at's).
ROI_NODES = r"""
node { calculator: "ImagePropertiesCalculator" input_stream: "IMAGE_CPU:image" output_stream: "SIZE:size" }
node { calculator: "PoseDetectionToRoi" input_stream: "DETECTION:detection"
       input_stream: "IMAGE_SIZE:size" output_stream: "ROI:roi" }
"""
_GRAPH = r"""
input_stream: "image"
input_stream: "detection"
output_stream: "pose_landmarks"
output_stream: "pose_world_landmarks"
output_stream: "segmentation_mask"
output_stream: "auxiliary_landmarks"
""" + ROI_NODES + r"""
node {
  calculator: "PoseLandmarkByRoiCpu"
  input_stream: "IMAGE:image" input_stream: "ROI:roi"
  output_stream: "LANDMARKS:pose_landmarks" output_stream: "AUXILIARY_LANDMARKS:auxiliary_landmarks"
  output_stream: "WORLD_LANDMARKS:pose_world_landmarks" output_stream: "SEGMENTATION_MASK:segmentation"
  input_side_packet: "MODEL_COMPLEXITY:model_complexity"
  input_side_packet: "ENABLE_SEGMENTATION:enable_segmentation"
}
node { calculator: "FromImageCalculator" input_stream: "IMAGE:segmentation"
       output_stream: "IMAGE_CPU:segmentation_mask" }
"""
_HANDS_AND_FACE = r"""
node { calculator: "HandLandmarksLeftAndRightCpu" input_stream: "IMAGE:image"
       input_stream: "POSE_LANDMARKS:pose_landmarks"
       output_stream: "LEFT_HAND_LANDMARKS:left_hand_landmarks"
       output_stream: "RIGHT_HAND_LANDMARKS:right_hand_landmarks" }
node { calculator: "SplitNormalizedLandmarkListCalculator" input_stream: "pose_landmarks"
       output_stream: "face_landmarks_from_pose"
       options { [mediapipe.SplitVectorCalculatorOptions.ext] { ranges { begin: 0 end: 11 } } } }
node { calculator: "FaceLandmarksFromPoseCpu" input_stream: "IMAGE:image"
       input_stream: "FACE_LANDMARKS_FROM_POSE:face_landmarks_from_pose"
       output_stream: "FACE_LANDMARKS:face_landmarks"
       input_side_packet: "REFINE_LANDMARKS:refine_face_landmarks" }
"""
POSE_OUTPUTS = ["pose_landmarks", "pose_world_landmarks", "segmentation_mask", "auxiliary_landmarks"]
HANDS_AND_FACE_OUTPUTS = ["left_hand_landmarks", "right_hand_landmarks", "face_landmarks"]

# People are found on the maps' grid (the detector's tiles and the keep rules are set there), but
# their 3D pose is read on the photo itself, at up to this long side: a person 1/8 of a 2048-px
# photo is a 256-px crop there, not a 128-px one upscaled (mediapipe_people.detect_people).
LOOK_SIDE = 2048


class PersonLandmarker:
    """Holistic's landmark models at a given person (call it from one thread). ``hands_and_face``
    False: the pose alone (landmarks, world landmarks, segmentation), about half the time, for
    the looks that only place the person."""

    def __init__(self, model_complexity: int = 1, hands_and_face: bool = True):
        from mediapipe.python.solution_base import SolutionBase

        extra = HANDS_AND_FACE_OUTPUTS if hands_and_face else []
        graph = _GRAPH + (_HANDS_AND_FACE if hands_and_face else "") + "".join(
            f'output_stream: "{o}"\n' for o in extra)
        self.hands_and_face = hands_and_face
        self._graph = SolutionBase(
            graph_config=graph, outputs=POSE_OUTPUTS + extra,
            side_inputs={"model_complexity": model_complexity, "enable_segmentation": True,
                         **({"refine_face_landmarks": False} if hands_and_face else {})})

    def close(self) -> None:
        self._graph.close()

    def process(self, image: np.ndarray, hips, top):
        """Holistic-like results (``pose_landmarks`` ... ``face_landmarks``, None where not
        found or not asked for) of the person whose hips' centre and body-circle point are
        ``hips``, ``top`` (pixels of ``image``, an RGB uint8 photo)."""
        det = detection_at(hips, top, image.shape[:2])
        res = self._graph.process({"image": np.ascontiguousarray(image), "detection": det})
        return res if self.hands_and_face else _with_none(res, HANDS_AND_FACE_OUTPUTS)


def detection_at(hips, top, hw: tuple[int, int]):
    """The pose detector's answer for a person whose hips' centre and body-circle point are
    ``hips``, ``top`` (pixels of an image ``hw`` = (height, width)), as the landmark graph's
    ``PoseDetectionToRoi`` reads it (those two keypoints only)."""
    from mediapipe.framework.formats import detection_pb2, location_data_pb2

    h, w = hw
    det = detection_pb2.Detection()
    det.location_data.format = location_data_pb2.LocationData.RELATIVE_BOUNDING_BOX
    for x, y in (hips, top):
        k = det.location_data.relative_keypoints.add()
        k.x, k.y = float(x) / w, float(y) / h
    return det


def _with_none(res, names):
    """``res``'s fields plus ``names`` as None: the pose-only graph's answer shaped as the full
    one's (SolutionBase answers with a class whose attributes are the streams)."""
    from types import SimpleNamespace

    return SimpleNamespace(**{n: getattr(res, n, None) for n in POSE_OUTPUTS + list(names)})


def shrunk(image: np.ndarray, side: int) -> np.ndarray:
    """``image`` resized (area-averaged) to at most ``side`` pixels on its long side; itself when
    it already fits or ``side`` is 0."""
    h, w = image.shape[:2]
    if side <= 0 or max(h, w) <= side:
        return image
    s = side / max(h, w)
    return cv2.resize(image, (max(1, round(w * s)), max(1, round(h * s))), interpolation=cv2.INTER_AREA)


class Looks:
    """The landmark models' looks at people placed on ``image`` (the maps' grid): ``look(hips,
    top, full, mirror)`` answers in that grid's terms (landmarks are relative to the image, the
    segmentation is resized to the grid). Where the ``photo`` the grid was shrunk from is larger,
    the models look at it (at most LOOK_SIDE long), so a small person keeps their own pixels;
    ``mirror``: at the photo flipped left to right (the box given unflipped)."""

    def __init__(self, process, image: np.ndarray, photo: np.ndarray | None = None):
        self.process, self.hw = process, image.shape[:2]
        h, w = self.hw
        source = image if photo is None or max(photo.shape[:2]) <= max(h, w) else photo
        self.source = np.ascontiguousarray(shrunk(source, LOOK_SIDE))
        self.larger = self.source.shape[:2] != (h, w)
        self.factor = np.array([self.source.shape[1] / w, self.source.shape[0] / h])
        self._mirrored = None

    def __call__(self, hips, top, full: bool = False, mirror: bool = False):
        hips, top = np.asarray(hips, np.float64), np.asarray(top, np.float64)
        image = self.source
        if mirror:
            if self._mirrored is None:
                self._mirrored = np.ascontiguousarray(self.source[:, ::-1])
            image, w = self._mirrored, self.hw[1]
            hips, top = np.array([w - hips[0], hips[1]]), np.array([w - top[0], top[1]])
        res = self.process(image, hips * self.factor, top * self.factor, full)
        if not self.larger or res.segmentation_mask is None:
            return res
        res = _with_none(res, HANDS_AND_FACE_OUTPUTS)  # a copy whose mask can be replaced
        h, w = self.hw
        res.segmentation_mask = cv2.resize(np.asarray(res.segmentation_mask, np.float32), (w, h),
                                           interpolation=cv2.INTER_AREA)
        return res

    def nobody_at(self, hips, top, looks, enough: int) -> int:
        """How many of ``looks`` ((mirror, box scale) each, pose only) at the box of ``hips`` and
        ``top`` find nobody (the landmark model's presence under its threshold); it stops once
        ``enough`` have, or once too few are left for it."""
        hips, top = np.asarray(hips, np.float64), np.asarray(top, np.float64)
        nobody = 0
        for n, (mirror, scale) in enumerate(looks):
            if nobody >= enough or nobody + len(looks) - n < enough:
                break
            nobody += self(hips, hips + scale * (top - hips), False, mirror).pose_landmarks is None
        return nobody
