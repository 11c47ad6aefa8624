# SPDX-License-Identifier: GPL-3.0-or-later
"""How long the panel's Build holds Blender's UI: the longest single step, per step.

The panel runs a build in steps (pipeline.iter_build_products, one step per timer tick), so the
UI freezes for at most one step at a time. Baseline in the same run: the whole build as one
call (what the panel did before: the UI froze for all of it).

    .venv/bin/python benchmarks/bench_build_steps.py --maps photo.npz --stride 1 --stride 2
    (default: the bundled photo analysed with the offline model, which starts a local server)
"""

from __future__ import annotations

import argparse
import time

import bpy  # noqa: F401 - the bpy module must be importable

from sapiens_blender import api
from sapiens_blender.blender import pipeline
from sapiens_blender.core.maps.canonical import Maps
from sapiens_blender.core.build.options import PRODUCTS, BuildOptions
from sapiens_blender.core.jobs.stepped import StepJob


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--maps", help="a maps .npz (default: analyse the bundled photo with mediapipe)")
    parser.add_argument("--stride", type=int, action="append", help="repeatable; default 1 and 2")
    args = parser.parse_args()
    if args.maps:
        maps = Maps.load(args.maps)
    else:
        from sapiens_blender.data import sample_photo_path

        maps = api.analyze(sample_photo_path(), model="mediapipe")
    for stride in args.stride or [1, 2]:
        options = BuildOptions(name="bench", stride=stride)
        api.new_scene()
        started = time.perf_counter()
        whole = api.build_from_maps(maps, options)
        one_call = time.perf_counter() - started
        api.new_scene()
        job = StepJob("build", lambda: pipeline.iter_build_products(maps, PRODUCTS, options))
        job.run_blocking()
        stage, longest = job.longest_step()
        over = [f"{s} {t:.2f}" for s, t in job.step_seconds if t > 0.2]
        print(f"stride {stride}: {whole.people[0].report.vertices} vertices; one call {one_call:.2f} s; "
              f"in {len(job.step_seconds)} steps, longest {longest:.2f} s ({stage}); "
              f"steps over 0.2 s: {', '.join(over) or 'none'}")


if __name__ == "__main__":
    main()
