# SPDX-License-Identifier: GPL-3.0-or-later
"""The batch on the local engine against the Ray engine, same photos, same machine, one run.

Input: N copies (default 20) of the bundled astronaut photo, resized (default 384 px long side,
each copy a few pixels smaller so that no two are identical), built at stride 2 into .glb
through the offline backend (``--model mediapipe``). Both engines run through their real code
paths, start-up included (the local engine starts its inference server and builder processes;
the Ray engine starts a local cluster, its analysis actor and worker processes, and shuts it all
down): the figure is wall time from call to return. Same builder concurrency on both: the
local engine with ``--jobs J``; Ray with J + 1 logical CPUs (one held by the analysis actor).

The two engines' .glb files are compared (node names; largest vertex difference printed).
Per-photo stage times come from the Ray run (analysis measured in the actor per batch and
divided by its photos; build and export measured in the builder task). From them, the scaling
estimate: with G analysis actors (one per GPU) taking ``a`` s per photo and C builder cores
taking ``b`` s per photo (build + export), the cluster builds ``min(G / a, C / b)`` photos per
second, and the builders become the bottleneck once ``C < G * b / a``.

    .venv/bin/python benchmarks/bench_engines.py [--photos 20] [--side 384] [--jobs 2]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))  # gltf_reader: an independent .glb reader

from sapiens_blender.cli import build_parser  # noqa: E402
from sapiens_blender.cli.batch import Progress  # noqa: E402
from sapiens_blender.batch.plan import plan_batch  # noqa: E402
from sapiens_blender.batch.ray_engine import RayOptions, run_on_ray  # noqa: E402


def make_photos(folder: Path, count: int, side: int) -> None:
    from PIL import Image

    photo = Image.open(REPO / "sapiens_blender" / "data" / "astronaut.jpg").convert("RGB")
    for i in range(count):
        long_side = side - 2 * i
        scale = long_side / max(photo.size)
        photo.resize((round(photo.width * scale), round(photo.height * scale)), Image.LANCZOS).save(
            folder / f"photo{i:02d}.jpg", quality=92)


def batch_args(src: Path, out: Path, jobs: int, engine: str):
    return build_parser().parse_args(["batch", str(src), "--out", str(out), "--model", "mediapipe",
                                      "--stride", "2", "--jobs", str(jobs), "--engine", engine])


def run_local(src: Path, out: Path, jobs: int) -> float:
    args = batch_args(src, out, jobs, "local")
    start = time.perf_counter()
    status = args.func(args)
    elapsed = time.perf_counter() - start
    assert status == 0, "the local engine failed"
    return elapsed


def run_ray(src: Path, out: Path, jobs: int) -> tuple[float, dict, dict]:
    """The Ray engine as the CLI runs it, keeping each build's reply (stage timings)."""
    from sapiens_blender.cli.build import option_values

    args = batch_args(src, out, jobs, "ray")
    start = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    plan = plan_batch(src, out, ["glb"], False, lambda outputs: option_values(args, outputs))
    progress, failures = Progress(plan.total, plan.skipped, 0), {}
    options = RayOptions(model="mediapipe", local_cpus=jobs + 1)
    run_on_ray(plan.jobs, progress, failures, options)
    progress.close()
    elapsed = time.perf_counter() - start
    assert not failures, failures
    return elapsed, options.replies, options.timings


def largest_difference(a: Path, b: Path) -> float:
    """Largest vertex difference between the two engines' .glb files (same node names asserted)."""
    from gltf_reader import Glb

    worst = 0.0
    names = sorted(p.name for p in a.glob("*.glb"))
    assert names == sorted(p.name for p in b.glob("*.glb")), "the engines wrote different files"
    for name in names:
        glb_a, glb_b = Glb(a / name), Glb(b / name)
        nodes_a, nodes_b = glb_a.json["nodes"], glb_b.json["nodes"]
        assert [n.get("name") for n in nodes_a] == [n.get("name") for n in nodes_b], name
        for i, node in enumerate(nodes_a):
            if "mesh" in node:
                for (pos_a, _), (pos_b, _) in zip(glb_a.skinned_primitives(i), glb_b.skinned_primitives(i)):
                    assert pos_a.shape == pos_b.shape, name
                    worst = max(worst, float(abs(pos_a - pos_b).max()))
    return worst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--photos", type=int, default=20)
    parser.add_argument("--side", type=int, default=384)
    parser.add_argument("--jobs", type=int, default=2, help="builder processes / Ray builder CPUs")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-engines-") as tmp:
        tmp = Path(tmp)
        (tmp / "photos").mkdir()
        make_photos(tmp / "photos", opts.photos, opts.side)
        local_s = run_local(tmp / "photos", tmp / "local", opts.jobs)
        ray_s, replies, overhead = run_ray(tmp / "photos", tmp / "ray", opts.jobs)
        worst = largest_difference(tmp / "local", tmp / "ray")
    n = opts.photos
    print(f"\n{n} photos, {opts.side} px long side, stride 2, .glb, {opts.jobs} builders")
    print(f"local engine: {local_s:.1f} s  ({n / local_s:.2f} photos/s)")
    print(f"ray engine:   {ray_s:.1f} s  ({n / ray_s:.2f} photos/s)")
    print(f"  of which starting the local cluster {overhead['connect']:.1f} s, "
          f"shutting it down {overhead['shutdown']:.1f} s")
    print(f"throughput ray / local: {local_s / ray_s:.2f}x")
    print(f"outputs: same node names in every .glb; largest vertex difference {worst:.1e} m")
    stages = {}
    for reply in replies.values():
        for stage, seconds in reply["timings"].items():
            stages.setdefault(stage, []).append(seconds)
    print("per-photo stage times on Ray (median, min, max):")
    for stage, values in stages.items():
        print(f"  {stage:9s} {statistics.median(values):.3f}  {min(values):.3f}  {max(values):.3f} s")
    a = statistics.median(stages["analysis"])
    b = statistics.median(stages["build"]) + statistics.median(stages["export"])
    print(f"scaling estimate: a = {a:.3f} s analysis/photo per actor, b = {b:.3f} s build+export/photo "
          f"per core; builder cores per analysis actor to keep it busy: b / a = {b / a:.1f}")
    for gpus in (1, 2, 4, 8, 16):
        cores = gpus * b / a
        print(f"  {gpus:2d} actors: analysis bound {gpus / a:6.1f} photos/s, needs {cores:6.0f} builder cores")


if __name__ == "__main__":
    main()
