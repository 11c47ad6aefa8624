# SPDX-License-Identifier: GPL-3.0-or-later
"""Every person in a photo, offline: the BlazePose person detector of the mediapipe wheel
(``modules/pose_detection/pose_detection.tflite``, the one Holistic runs before its landmarks),
run on the whole photo and on overlapping tiles, all its detections kept.

Holistic keeps only its detector's best person, and that detector sees the photo squeezed to
224 x 224: people under ~1/4 of the photo's long side are too small for it (docs/design_notes.md:
the Tasks multi-pose landmarker recalled 7-9 of 36 labelled people). Tiles of 1/2 and 1/4 of the
long side show them at a size it knows, and tiles of 1/8 where a coarser tile hinted at someone.
The graph is the wheel's own ``PoseDetectionCpu`` subgraph written out, so its score threshold is
ours; nothing is downloaded.

A detection gives the hips' centre, a point on the circle holding the whole body, and the
shoulders' centre (BlazePose's alignment keypoints); ``person_box`` turns it into the square
Holistic would crop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# Detections from 0.3: a wheelchair user, someone turned away or hugging scores 0.3-0.5 on every
# tile; those under SURE_SCORE are kept only when the landmark model confirms them
# (mediapipe_people: a face found, or the torso and arms seen).
SCORE_THRESHOLD = 0.3
SURE_SCORE = 0.5
TILE_FRACTIONS = (1.0, 0.5, 0.25, 0.125)  # tile sides as fractions of the photo's long side
# The detector sees people by their faces: one ~1/8 of a 1024-px photo tall (a face of 12 px,
# 10 px of its 224-px input in a quarter tile) scores 0.1-0.3 in the quarter tiles and 0.6-0.9
# in a tile of 1/8 centred on them. The finest tiles run only where a coarser tile hinted at
# someone (a detection from HINT_SCORE up, not sure): a blanket of them would double the search.
HINTED_FRACTIONS = (0.125,)
HINT_SCORE = 0.1
MIN_TILE_SIDE = 96  # px; smaller tiles hold nothing the detector can see
SAME_PERSON = 0.5  # hips and shoulders this close (x the body radius): one person seen twice
BOX_SCALE = 1.25  # the landmark model's crop: the body circle's diameter x 1.25 (BlazePose)

_GRAPH = r"""
input_stream: "image"
output_stream: "detections"
output_stream: "unsure_detections"
node {
  calculator: "ImageToTensorCalculator"
  input_stream: "IMAGE:image"
  output_stream: "TENSORS:input_tensors"
  output_stream: "LETTERBOX_PADDING:letterbox_padding"
  options: { [mediapipe.ImageToTensorCalculatorOptions.ext] {
    output_tensor_width: 224 output_tensor_height: 224 keep_aspect_ratio: true
    output_tensor_float_range { min: -1.0 max: 1.0 } border_mode: BORDER_ZERO } }
}
node {
  calculator: "InferenceCalculator"
  input_stream: "TENSORS:input_tensors"
  output_stream: "TENSORS:detection_tensors"
  options: { [mediapipe.InferenceCalculatorOptions.ext] {
    model_path: "mediapipe/modules/pose_detection/pose_detection.tflite" delegate { xnnpack {} } } }
}
node {
  calculator: "SsdAnchorsCalculator"
  output_side_packet: "anchors"
  options: { [mediapipe.SsdAnchorsCalculatorOptions.ext] {
    num_layers: 5 min_scale: 0.1484375 max_scale: 0.75 input_size_height: 224
    input_size_width: 224 anchor_offset_x: 0.5 anchor_offset_y: 0.5 strides: 8 strides: 16
    strides: 32 strides: 32 strides: 32 aspect_ratios: 1.0 fixed_anchor_size: true } }
}
"""

# Decoding, NMS and letterbox removal of the one inference, once per score floor (the sure
# set and the unsure one), so the sure boxes are exactly what a lone detector would give.
_DECODE = r"""
node {
  calculator: "TensorsToDetectionsCalculator"
  input_stream: "TENSORS:detection_tensors"
  input_side_packet: "ANCHORS:anchors"
  output_stream: "DETECTIONS:unfiltered%(tag)s"
  options: { [mediapipe.TensorsToDetectionsCalculatorOptions.ext] {
    num_classes: 1 num_boxes: 2254 num_coords: 12 box_coord_offset: 0 keypoint_coord_offset: 4
    num_keypoints: 4 num_values_per_keypoint: 2 sigmoid_score: true score_clipping_thresh: 100.0
    reverse_output_order: true x_scale: 224.0 y_scale: 224.0 h_scale: 224.0 w_scale: 224.0
    min_score_thresh: %(floor)s } }
}
node {
  calculator: "NonMaxSuppressionCalculator"
  input_stream: "unfiltered%(tag)s"
  output_stream: "filtered%(tag)s"
  options: { [mediapipe.NonMaxSuppressionCalculatorOptions.ext] {
    min_suppression_threshold: 0.3 overlap_type: INTERSECTION_OVER_UNION algorithm: WEIGHTED } }
}
node {
  calculator: "DetectionLetterboxRemovalCalculator"
  input_stream: "DETECTIONS:filtered%(tag)s"
  input_stream: "LETTERBOX_PADDING:letterbox_padding"
  output_stream: "DETECTIONS:%(output)s"
}
"""


def _graph(threshold: float, low: float, hint: float) -> str:
    return (_GRAPH + _DECODE % {"tag": "", "floor": threshold, "output": "detections"}
            + _DECODE % {"tag": "_unsure", "floor": low, "output": "unsure_detections"}
            + _DECODE % {"tag": "_hint", "floor": hint, "output": "hint_detections"}
            + 'output_stream: "hint_detections"\n')


@dataclass
class Candidate:
    """One detected person, photo pixels."""

    score: float
    hips: np.ndarray  # [2] the hips' centre
    radius: float  # the circle around the hips that holds the whole body
    shoulders: np.ndarray  # [2] the shoulders' centre
    top: np.ndarray  # [2] the point of that circle the body points to (sets the crop's turn)


def person_box(c: Candidate, margin: float = 1.0) -> tuple[int, int, int]:
    """(x0, y0, side) of the square crop around ``c`` (may reach past the photo's edges)."""
    half = BOX_SCALE * c.radius * margin
    side = max(8, int(round(2 * half)))
    return int(round(c.hips[0] - side / 2)), int(round(c.hips[1] - side / 2)), side


def tiles(hw: tuple[int, int]) -> list[tuple[int, int, int]]:
    """(x0, y0, side) of the photo-wide pass and the overlapping square tiles (half a tile apart)."""
    h, w = hw
    out = []
    for frac in TILE_FRACTIONS:
        t = int(round(max(h, w) * frac))
        if frac < 1.0 and t < MIN_TILE_SIDE:
            continue
        step = max(1, t // 2)
        ys = [0] if t >= h else sorted(set(list(range(0, h - t, step)) + [h - t]))
        xs = [0] if t >= w else sorted(set(list(range(0, w - t, step)) + [w - t]))
        out += [(x, y, t) for y in ys for x in xs]
    return out


def _covers(c: Candidate, x: int, y: int, t: int) -> bool:
    """The tile lies inside ``c``'s crop, which is more than four times its side."""
    bx, by, side = person_box(c)
    return side > 4 * t and bx <= x and by <= y and x + t <= bx + side and y + t <= by + side


def merge(cands: list[Candidate]) -> list[Candidate]:
    """One candidate per person (best score first): a detection whose hips and shoulders both
    lie near a better one's is the same person seen in another tile."""
    kept: list[Candidate] = []
    for c in sorted(cands, key=lambda c: -c.score):
        if all(max(np.linalg.norm(c.hips - k.hips), np.linalg.norm(c.shoulders - k.shoulders))
               > SAME_PERSON * max(c.radius, k.radius) for k in kept):
            kept.append(c)
    return kept


class PoseDetector:
    """The wheel's BlazePose detector as a graph of our own (call it from one thread). One
    inference, decoded three times: from ``threshold`` (sure), from ``low``, and from ``hint``
    (only to say where a finer tile may find someone). Each set goes through its own weighted
    NMS, so the sure boxes are what a lone ``threshold`` gives (unsure boxes averaged in would
    move them); an unsure detection is one whose whole cluster is under it."""

    def __init__(self, threshold: float = SURE_SCORE, low: float = SCORE_THRESHOLD, hint: float = HINT_SCORE):
        from mediapipe.python.solution_base import SolutionBase

        self.threshold, self.low = float(threshold), float(low)
        self._graph = SolutionBase(graph_config=_graph(self.threshold, self.low, float(hint)))

    def close(self) -> None:
        self._graph.close()

    def detect(self, image: np.ndarray, hints: list | None = None) -> list[Candidate]:
        """Detections in one RGB uint8 image (its own pixels), sure ones first; ``hints`` gets
        the weaker ones (from ``hint``, under ``low``)."""
        h, w = image.shape[:2]
        res = self._graph.process({"image": np.ascontiguousarray(image)})
        out = [_candidate(d, w, h) for d in list(res.detections or []) + [
            d for d in res.unsure_detections or [] if d.score[0] < self.threshold]]
        if hints is not None:
            hints += [c for c in (_candidate(d, w, h) for d in res.hint_detections or [] if d.score[0] < self.low)
                      if c is not None]
        return [c for c in out if c is not None]

    def find_people(self, image: np.ndarray, cancel=None) -> list[Candidate]:
        """Every person in ``image``: detections on the photo and its tiles, merged."""
        found: list[Candidate] = []
        hints: list[Candidate] = []  # where someone may be: weak or unsure detections
        hinted = _hinted_sides(image.shape[:2])
        for x, y, t in tiles(image.shape[:2]):
            if cancel is not None:
                cancel.check()
            if any(c.score >= SURE_SCORE and _covers(c, x, y, t) for c in found):
                continue  # inside the crop of a person found at a coarser scale (an unsure one may be a ghost)
            if t in hinted and not any(_hints_at(c, x, y, t) for c in hints):
                continue  # the finest tiles only where a coarser one hinted at someone
            weak: list[Candidate] = []
            for c in self.detect(image[y:y + t, x:x + t], weak):
                if c.radius > 2:
                    found.append(_moved(c, x, y))
                    if c.score < SURE_SCORE:
                        hints.append(found[-1])
            hints += [_moved(c, x, y) for c in weak if c.radius > 2]
        return merge(found)


def _moved(c: Candidate, x: int, y: int) -> Candidate:
    """``c`` found in the tile at (x, y), in the photo's pixels."""
    return Candidate(c.score, c.hips + (x, y), c.radius, c.shoulders + (x, y), c.top + (x, y))


def _candidate(d, w: int, h: int) -> Candidate | None:
    k = np.array([(p.x * w, p.y * h) for p in d.location_data.relative_keypoints], np.float64)
    if len(k) < 3:
        return None
    return Candidate(float(d.score[0]), k[0], float(np.linalg.norm(k[1] - k[0])), k[2], k[1])


def _hinted_sides(hw: tuple[int, int]) -> set[int]:
    return {int(round(max(hw) * frac)) for frac in HINTED_FRACTIONS}


def _hints_at(c: Candidate, x: int, y: int, t: int) -> bool:
    """``c``'s shoulders lie in the middle half of the tile (the tiles overlap by half: every
    point is in the middle half of one), where the tile holds the head of a person that size."""
    q = t / 4
    return x + q <= c.shoulders[0] <= x + t - q and y + q <= c.shoulders[1] <= y + t - q
