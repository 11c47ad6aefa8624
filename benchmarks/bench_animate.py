# SPDX-License-Identifier: GPL-3.0-or-later
"""A clip -> an animated, exported rig, end to end, frames per second.

Input: the bundled astronaut panned along a smooth path (tests/server/astronaut_clip.py), 512 px
frames, written as an MJPG .avi (decoded by OpenCV while streaming). Pipeline: decode, analysis
through a local inference server (`--model`, default the offline `mediapipe` backend), lifting,
tracking, smoothing, rig, Blender bake and .glb export: ``api.animate``. The server is started
once before timing (its start-up is reported apart). Baseline, timed in the same run: the same
call with one frame in flight (``parallel=1``); the ratio is what batching in flight buys.
Goal: >= 4 frames/s with the offline backend on this CPU.

    .venv/bin/python benchmarks/bench_animate.py [--frames 40] [--parallel 4] [--model mediapipe]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "server"))

GOAL_FPS = 4.0


def write_video(folder: Path, frames: int) -> Path:
    import cv2
    from astronaut_clip import write_clip

    stills = folder / "frames"
    write_clip(stills, frames)
    path = folder / "astronaut_pan.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (512, 512))
    for f in sorted(stills.iterdir()):
        writer.write(cv2.imread(str(f)))
    writer.release()
    return path


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--frames", type=int, default=40)
    ap.add_argument("--parallel", type=int, default=4)
    ap.add_argument("--model", default="mediapipe")
    args = ap.parse_args(argv)

    from sapiens_blender import api
    from sapiens_blender.core.server_process import ServerProcess

    with tempfile.TemporaryDirectory() as tmp, ServerProcess() as server:
        video = write_video(Path(tmp), args.frames)
        start = time.perf_counter()
        client = server.ensure_running()
        startup = time.perf_counter() - start
        client.infer  # noqa: B018 - the server is up; warm the backend with one short call
        api.new_scene()
        api.animate(video, [Path(tmp) / "warm.glb"], model=args.model, end=2, server=server.url,
                    token=server.token, parallel=1)
        rows = []
        for parallel in (1, args.parallel):
            api.new_scene()
            t0 = time.perf_counter()
            result = api.animate(video, [Path(tmp) / f"p{parallel}.glb"], model=args.model,
                                 server=server.url, token=server.token, parallel=parallel)
            seconds = time.perf_counter() - t0
            frames = len(result.animation.frames)
            rows.append((parallel, frames, seconds, frames / seconds, len(result.animation.tracks)))
    print(f"server start-up {startup:.1f} s (not timed below); model {args.model}; 512x512 frames")
    print("| frames in flight | frames | seconds | frames/s | tracks |")
    print("|---|---|---|---|---|")
    for parallel, frames, seconds, fps, tracks in rows:
        print(f"| {parallel} | {frames} | {seconds:.2f} | {fps:.2f} | {tracks} |")
    ratio = rows[1][3] / rows[0][3]
    print(f"in flight {args.parallel} vs 1: {ratio:.2f}x; goal >= {GOAL_FPS} frames/s: "
          f"{'met' if rows[1][3] >= GOAL_FPS else 'NOT met'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
