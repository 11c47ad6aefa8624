# SPDX-License-Identifier: GPL-3.0-or-later
"""A clip -> an animated, exported rig, end to end, frames per second.

Input: the bundled astronaut panned along a smooth path (tests/support/astronaut_clip.py), 512 px
frames, written as an MJPG .avi (decoded by OpenCV while streaming). Pipeline: decode, analysis
through a local inference server (`--model`, default the offline `mediapipe` backend), lifting,
tracking, smoothing, rig, Blender build and bake, .glb export (what ``api.animate`` runs), per
stage, for the relief armature and for the fitted body (fitted once, posed per frame by the
server: ``core/motion/body_drive.py``). The server is started and both models loaded before
timing (start-up is reported apart). Baseline, timed in the same run: the relief armature with
one frame in flight (``parallel=1``); the ratio is what batching in flight buys.
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
sys.path.insert(0, str(REPO / "tests" / "support"))

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
    from sapiens_blender.blender.animation import build_animation
    from sapiens_blender.blender.export import export
    from sapiens_blender.core.motion.body_drive import drive_bodies, server_body_driver
    from sapiens_blender.core.motion.sources import open_source
    from sapiens_blender.core.motion.stream import run_clip, server_analyzer
    from sapiens_blender.core.local_server.process import ServerProcess

    rows = []
    with tempfile.TemporaryDirectory() as tmp, ServerProcess() as server:
        video = write_video(Path(tmp), args.frames)
        start = time.perf_counter()
        client = server.ensure_running()
        startup = time.perf_counter() - start
        analyze = server_analyzer(client, args.model)
        warm = run_clip(open_source(video, api_range(end=6)), analyze, parallel=1)  # model load, warm-up
        drive_bodies(warm, *server_body_driver(client))  # the body model's load, not timed below
        for rig, parallel in (("relief", 1), ("relief", args.parallel), ("body", args.parallel)):
            api.new_scene()
            t0 = time.perf_counter()
            animation = run_clip(open_source(video), analyze, parallel=parallel)
            t1 = time.perf_counter()
            if rig == "body":  # as api.animate: the poses are computed while Blender builds the body
                drive_bodies(animation, *server_body_driver(client), defer=True)
            tb = time.perf_counter()
            result = build_animation(animation, "bench", background=video)
            t2 = time.perf_counter()
            assert rig == "relief" or animation.source == "fitted body", animation.notes
            export(Path(tmp) / f"{rig}{parallel}.glb", result.objects, animation=True)
            t3 = time.perf_counter()
            frames = len(animation.frames)
            rows.append((rig, parallel, frames, t1 - t0, tb - t1, t2 - tb, t3 - t2, frames / (t3 - t0)))
    print(f"server start-up {startup:.1f} s (not timed below); model {args.model}; 512x512 frames")
    print("| rig | frames in flight | frames | decode+analysis+tracking+smoothing | body fit "
          "| Blender build (rig, mesh, bake; body: while the server poses it) | .glb export "
          "| **frames/s end to end** | analysis frames/s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for rig, parallel, frames, analysis, body, build, exp, fps in rows:
        print(f"| {rig} | {parallel} | {frames} | {analysis:.2f} s | {body:.2f} s | {build:.2f} s | {exp:.2f} s "
              f"| **{fps:.2f}** | {frames / analysis:.2f} |")
    ratio = rows[1][-1] / rows[0][-1]
    print(f"in flight {args.parallel} vs 1: {ratio:.2f}x end to end; goal >= {GOAL_FPS} frames/s: "
          f"relief {'met' if rows[1][-1] >= GOAL_FPS else 'NOT met'}, "
          f"fitted body {'met' if rows[2][-1] >= GOAL_FPS else 'NOT met'}")
    return 0


def api_range(**kw):
    from sapiens_blender.core.motion.sources import FrameRange

    return FrameRange(**kw)


if __name__ == "__main__":
    sys.exit(main())
