# SPDX-License-Identifier: GPL-3.0-or-later
"""Photo -> canonical maps with the offline `mediapipe` backend on this CPU, per stage.

Input: the bundled astronaut photo (512 px) enlarged to 1024x1024 and JPEG-encoded, i.e. a
1024-px photo as the server receives it. Stages: decode (JPEG bytes -> RGB, EXIF applied),
detect (the pose detector on the photo and its tiles, then Holistic's landmark models at each
person, three looks each), geometry (keypoint slots, parts, pseudo-depth, normals). Baseline,
timed in the same run: one landmark pass over the photo, the floor any MediaPipe backend pays;
the ratio says what our multi-person search and geometry add on top. Also timed in the same
run, alternated: the analysis with one look for each person's 3D pose instead of six (a clip's
frame, ``clip_frame``), what those looks cost. Goal: total <= 0.5 s.

    .venv/bin/python benchmarks/bench_mediapipe.py [--repeats 15] [--side 1024] [--photo JPG]
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from PIL import Image  # noqa: E402

from inference_server.dataplane.base import AnalyzeOptions  # noqa: E402
from inference_server.backends.mediapipe_cpu import MediaPipeBackend  # noqa: E402
from inference_server.backends.mediapipe_people import WORLD_LOOKS  # noqa: E402
from inference_server.processing.image_io import decode_image  # noqa: E402
from sapiens_blender.data import sample_photo_path  # noqa: E402

GOAL_S = 0.5


def photo_bytes(side: int) -> bytes:
    img = Image.open(sample_photo_path()).convert("RGB").resize((side, side), Image.Resampling.BICUBIC)
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=92)
    return buf.getvalue()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--side", type=int, default=1024)
    ap.add_argument("--photo", type=Path, help="another photo (analysed at --side at most)")
    args = ap.parse_args(argv)

    data = args.photo.read_bytes() if args.photo else photo_bytes(args.side)
    backend = MediaPipeBackend()
    t = time.perf_counter()
    backend.load()
    load_s = time.perf_counter() - t
    options = AnalyzeOptions(max_side=args.side)
    one_look_options = AnalyzeOptions(max_side=args.side, clip_frame=True)
    image = decode_image(data)
    backend.analyze(image, options)  # warm-up: first inference initialises XNNPACK

    stages: dict[str, list[float]] = {"decode": [], "detect": [], "geometry": [], "total": []}
    baseline: list[float] = []
    one_look: list[float] = []
    people = 0
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        image = decode_image(data)
        t1 = time.perf_counter()
        maps = backend.analyze(image, options)
        t2 = time.perf_counter()
        stages["decode"].append(t1 - t0)
        stages["detect"].append(backend.timings["detect"])
        stages["geometry"].append(backend.timings["geometry"])
        stages["total"].append(t2 - t0)
        people = int(maps["keypoints"].shape[0])
        t3 = time.perf_counter()
        h, w = image.shape[:2]
        backend._process(image, (w / 2, h * 0.55), (w / 2, h * 0.1))  # baseline: one landmark pass
        baseline.append(time.perf_counter() - t3)
        t4 = time.perf_counter()
        backend.analyze(decode_image(data), one_look_options)
        one_look.append(time.perf_counter() - t4)

    h, w = image.shape[:2]
    print(f"offline backend (mediapipe {backend.version}), {args.photo or 'sample'} {w}x{h} photo, {people} person(s), "
          f"{args.repeats} runs; load {load_s:.3f} s")
    print(f"{'stage':<10} {'median s':>9} {'min s':>7}")
    for name, values in stages.items():
        print(f"{name:<10} {statistics.median(values):>9.3f} {min(values):>7.3f}")
    base = statistics.median(baseline)
    total = statistics.median(stages["total"])
    print(f"{'baseline':<10} {base:>9.3f} {min(baseline):>7.3f}   (one landmark pass over the photo)")
    print(f"{'one look':<10} {statistics.median(one_look):>9.3f} {min(one_look):>7.3f}   (total with one look "
          f"for each person's 3D pose, not {1 + len(WORLD_LOOKS)}: x{total / statistics.median(one_look):.2f})")
    print(f"total / baseline = {total / base:.2f}x; goal total <= {GOAL_S} s: "
          f"{'met' if total <= GOAL_S else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
