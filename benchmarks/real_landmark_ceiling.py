# SPDX-License-Identifier: GPL-3.0-or-later
"""How many real people the offline backend's landmark model can place when it is told where
they are: each labelled person's own box, taken from the label, instead of the detector's.

bench_real.py measures the offline backend's recall (people built within 10 % of a labelled
person). Two parts can miss someone: the detector (nobody looked there) and the landmark model
(looked there, reported nobody or a wrong pose). This script removes the detector: it gives
MediaPipe's pose landmark model (the wheel's ``pose_landmark_full.tflite``, the backend's own
model) each labelled person's box, as the detector would (the hips' centre and a point on the
body circle, turned as the torso points), on the backend's 1024-px grid, and scores the answer
with bench_real's own functions. Per person it prints:

- ``presence``: the model's own score that a person is there (the wheel's graph reports nobody
  under 0.5), read from a graph of the raw model (one look);
- ``raw``: that one look's 2D error (% of the person's size), whatever its presence;
- ``backend``: the backend's look at that box (``mediapipe_people._person_at``: the look, then
  the model's own box looked at again, as the backend does for a detection), or ``nobody``.

    PYTHONPATH=. .venv/bin/python benchmarks/real_landmark_ceiling.py --data /work/realdata \
        [--sets coco,crowdpose,mhp,humanart,posetrack18] [--bench-json bench_real.json] [--json-out F]

``--bench-json`` (bench_real.py's ``--json-out`` of a run on the same data) adds the people the
backend recalled there with its own detector, and the union of the two: the backend's recall
had its detector also found every person at their label's box.

The recall it prints is the most the offline backend could reach on these people with a perfect
detector. It reads only what bench_real.py reads (the reserved sets never).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cv2
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from inference_server.backends import mediapipe_people as people  # noqa: E402
from inference_server.backends.mediapipe_landmarker import (ROI_NODES, Looks, PersonLandmarker,  # noqa: E402
                                                            detection_at, shrunk)

from bench_real import (MATCH_FRACTION, MEDIAPIPE_INDEX, data_root, load_2d_sets,  # noqa: E402
                        person_error)

GRID = 1024  # the offline backend's analysis size (the maps' long side)
CIRCLE_MARGIN = 1.05  # the body circle: the farthest labelled point from the hips, a little more
PRESENT = 0.5  # the wheel's graph: under this the landmark model reports nobody

# The landmark model alone, fed the detector's kind of box: its raw landmarks and presence score.
_RAW_GRAPH_STREAMS = r"""
input_stream: "image"
input_stream: "detection"
output_stream: "roi"
output_stream: "presence"
output_stream: "landmarks"
"""
_RAW_GRAPH_MODEL = r"""
node {
  calculator: "ImageToTensorCalculator"
  input_stream: "IMAGE:image" input_stream: "NORM_RECT:roi" output_stream: "TENSORS:input_tensors"
  options: { [mediapipe.ImageToTensorCalculatorOptions.ext] {
    output_tensor_width: 256 output_tensor_height: 256 keep_aspect_ratio: true
    output_tensor_float_range { min: 0.0 max: 1.0 } border_mode: BORDER_REPLICATE } }
}
node {
  calculator: "InferenceCalculator"
  input_stream: "TENSORS:input_tensors" output_stream: "TENSORS:outputs"
  options: { [mediapipe.InferenceCalculatorOptions.ext] {
    model_path: "mediapipe/modules/pose_landmark/pose_landmark_full.tflite" delegate { xnnpack {} } } }
}
node {
  calculator: "SplitTensorVectorCalculator"
  input_stream: "outputs" output_stream: "landmark_tensor" output_stream: "presence_tensor"
  output_stream: "heatmap_tensor"
  options { [mediapipe.SplitVectorCalculatorOptions.ext] {
    ranges { begin: 0 end: 1 } ranges { begin: 1 end: 2 } ranges { begin: 3 end: 4 } } }
}
node { calculator: "TensorsToFloatsCalculator" input_stream: "TENSORS:presence_tensor"
       output_stream: "FLOAT:presence" }
node {
  calculator: "TensorsToLandmarksCalculator"
  input_stream: "TENSORS:landmark_tensor" output_stream: "NORM_LANDMARKS:raw_landmarks"
  options: { [mediapipe.TensorsToLandmarksCalculatorOptions.ext] {
    num_landmarks: 39 input_image_width: 256 input_image_height: 256
    visibility_activation: SIGMOID presence_activation: SIGMOID } }
}
node {
  calculator: "RefineLandmarksFromHeatmapCalculator"
  input_stream: "NORM_LANDMARKS:raw_landmarks" input_stream: "TENSORS:heatmap_tensor"
  output_stream: "NORM_LANDMARKS:refined_landmarks"
  options: { [mediapipe.RefineLandmarksFromHeatmapCalculatorOptions.ext] { kernel_size: 7 } }
}
node {
  calculator: "LandmarkProjectionCalculator"
  input_stream: "NORM_LANDMARKS:refined_landmarks" input_stream: "NORM_RECT:roi"
  output_stream: "NORM_LANDMARKS:landmarks"
}
"""


class RawLook:
    """One look of the landmark model at a box: (presence, [33,2] pixels), whatever the presence.
    The wheel's own decoding (landmarks refined from the model's heatmap, projected from the
    crop), without its gate on the presence score."""

    def __init__(self):
        from mediapipe.python.solution_base import SolutionBase

        graph = _RAW_GRAPH_STREAMS + ROI_NODES + _RAW_GRAPH_MODEL
        self._graph = SolutionBase(graph_config=graph, outputs=["roi", "presence", "landmarks"])

    def __call__(self, image: np.ndarray, hips, top) -> tuple[float, np.ndarray]:
        h, w = image.shape[:2]
        res = self._graph.process({"image": np.ascontiguousarray(image), "detection": detection_at(hips, top, (h, w))})
        xy = np.array([(p.x * w, p.y * h) for p in res.landmarks.landmark[:33]], np.float64)
        return float(res.presence), xy

    def close(self):
        self._graph.close()


def label_box(points: dict, box, scale: float) -> tuple[np.ndarray, np.ndarray]:
    """(hips, top) of a labelled person as the detector gives a box: the hips' centre (the box's
    centre where no hip is labelled) and the point one body-circle radius towards the shoulders."""
    p = {k: np.asarray(v, np.float64) * scale for k, v in points.items()}
    x, y, bw, bh = np.asarray(box, np.float64) * scale
    hips = [p[k] for k in ("left_hip", "right_hip") if k in p]
    shoulders = [p[k] for k in ("left_shoulder", "right_shoulder") if k in p]
    centre = np.mean(hips, 0) if hips else np.array([x + bw / 2, y + bh / 2])
    up = np.mean(shoulders, 0) - centre if shoulders else np.array([0.0, -1.0])
    up = up / (np.linalg.norm(up) + 1e-9)
    reach = np.linalg.norm(np.array(list(p.values())) - centre, axis=1).max()
    radius = CIRCLE_MARGIN * max(reach, 0.5 * max(bw, bh))
    return centre, centre + radius * up


def _scored(pose_xy: np.ndarray, label, scale: float) -> float:
    pts = {n: (pose_xy[i, 0] / scale, pose_xy[i, 1] / scale) for n, i in MEDIAPIPE_INDEX.items()}
    return person_error(pts, label.points, label.size)[0]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", type=Path, required=True)
    ap.add_argument("--sets", default="coco,crowdpose,mhp,humanart,posetrack18",
                    help="2D sets (bench_real's names; the artworks are never scored here)")
    ap.add_argument("--bench-json", type=Path, help="bench_real.py's --json-out, for the union")
    ap.add_argument("--json-out", type=Path)
    args = ap.parse_args(argv)
    wanted = set(args.sets.split(","))
    photos = [p for p in load_2d_sets(data_root(args.data)) if p.dataset in wanted]
    raw, landmarker = RawLook(), PersonLandmarker(hands_and_face=False)
    process = lambda image, hips, top, full=False: landmarker.process(image, hips, top)  # noqa: E731
    rows = []
    print("| set | photo | label | presence | raw look 2D err % | backend's look 2D err % |")
    print("|---|---|---|---|---|---|")
    for photo in photos:
        rgb = cv2.cvtColor(cv2.imread(str(photo.path)), cv2.COLOR_BGR2RGB)
        grid = shrunk(rgb, GRID)
        scale = grid.shape[1] / rgb.shape[1]
        look = Looks(process, grid)
        for label in photo.labels:
            hips, top = label_box(label.points, label.box, scale)
            presence, xy = raw(grid, hips, top)
            got = people._person_at(look, hips, top, people.REFINE_PASSES)
            row = {"set": photo.dataset, "photo": photo.key, "label": label.ident, "presence": round(presence, 3),
                   "raw_pct": round(100 * _scored(xy, label, scale), 1),
                   "backend_pct": None if got is None else round(100 * _scored(got[0].pose[:, :2], label, scale), 1)}
            rows.append(row)
            print(f"| {row['set']} | {photo.key.split('__', 1)[-1]} | {row['label']} | {presence:.3f} | {row['raw_pct']} | "
                  f"{'nobody' if row['backend_pct'] is None else row['backend_pct']} |")
    raw.close()
    landmarker.close()
    line = 100 * MATCH_FRACTION
    n = len(rows)
    summary = {
        "labelled": n,
        "raw_within": sum(r["raw_pct"] <= line for r in rows),
        "backend_within": sum(r["backend_pct"] is not None and r["backend_pct"] <= line for r in rows),
        "not_present": sum(r["presence"] < PRESENT for r in rows),
        "not_present_within": sum(r["presence"] < PRESENT and r["raw_pct"] <= line for r in rows),
    }
    print(f"\n{n} labelled people, each given their own box: the backend's look places "
          f"{summary['backend_within']} within {line:.0f} % (one raw look {summary['raw_within']}); the model "
          f"scores {summary['not_present']} under {PRESENT} (nobody there), of whom its raw answer places "
          f"{summary['not_present_within']} within {line:.0f} %")
    if args.bench_json:
        found = {(p["key"], m["label"]) for p in json.loads(args.bench_json.read_text())["photos"]
                 for m in p.get("score", {}).get("backend_matches", [])}
        at_box = {(r["photo"], r["label"]) for r in rows if r["backend_pct"] is not None and r["backend_pct"] <= line}
        mine = {(r["photo"], r["label"]) for r in rows}
        summary.update(detector_recalled=len(found & mine), union=len((found | at_box) & mine))
        print(f"bench_real's backend (its own detector) recalled {summary['detector_recalled']}; "
              f"with each person's own box as well, {summary['union']} of {n}")
    if args.json_out:
        args.json_out.write_text(json.dumps({"rows": rows, "summary": summary}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
