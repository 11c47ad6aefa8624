# SPDX-License-Identifier: GPL-3.0-or-later
"""One person's landmarks where the detector saw them: Holistic's own parts (the wheel's
``PoseLandmarkByRoiCpu``, ``HandLandmarksLeftAndRightCpu``, ``FaceLandmarksFromPoseCpu``
subgraphs), fed the detector's box instead of running their own detector.

Holistic re-detects inside whatever it is given and keeps the best person: in a crop around one
of several people it often lands on a neighbour, and it misses people cut by the photo's edge.
Given the box, the landmark model looks exactly there (turned as the detector says the body is);
it reports nobody when its presence score is low. Same models, same settings (complexity 1,
segmentation on, face refinement off), nothing downloaded.
"""

from __future__ import annotations

import numpy as np

_GRAPH = r"""
input_stream: "image"
input_stream: "detection"
output_stream: "pose_landmarks"
output_stream: "pose_world_landmarks"
output_stream: "segmentation_mask"
output_stream: "auxiliary_landmarks"
node { calculator: "ImagePropertiesCalculator" input_stream: "IMAGE_CPU:image" output_stream: "SIZE:size" }
node { calculator: "PoseDetectionToRoi" input_stream: "DETECTION:detection"
       input_stream: "IMAGE_SIZE:size" output_stream: "ROI:roi" }
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
        from mediapipe.framework.formats import detection_pb2, location_data_pb2

        h, w = image.shape[:2]
        det = detection_pb2.Detection()
        det.location_data.format = location_data_pb2.LocationData.RELATIVE_BOUNDING_BOX
        for x, y in (hips, top):  # PoseDetectionToRoi reads only these two keypoints
            k = det.location_data.relative_keypoints.add()
            k.x, k.y = float(x) / w, float(y) / h
        res = self._graph.process({"image": np.ascontiguousarray(image), "detection": det})
        return res if self.hands_and_face else _with_none(res, HANDS_AND_FACE_OUTPUTS)


def _with_none(res, names):
    """``res``'s fields plus ``names`` as None: the pose-only graph's answer shaped as the full
    one's (SolutionBase answers with a class whose attributes are the streams)."""
    from types import SimpleNamespace

    return SimpleNamespace(**{n: getattr(res, n, None) for n in POSE_OUTPUTS + list(names)})
