# SPDX-License-Identifier: GPL-3.0-or-later
"""A clip through Sapiens2 and the per-frame motion, in process: frames/s per stage and end to end.

Issue #36 item 3 ("a clip on the GPU"). The clip: the bundled photo (sapiens_blender/data)
scaled to ``--side`` px (long side, default 1024) and panned a few pixels per frame (the path of
tests/server/astronaut_clip.py), brightness flicker, saved as JPEG frames in a temporary folder
and read back by the ``animate`` command's own frame source (core/motion/sources.ImageFolder).

Stages, each the real code the ``animate`` command runs, minus HTTP:
- **analysis**: random-weight full-size Sapiens2 (``--size``, four tasks, 1024x768 model input,
  built as benchmarks/bench_sapiens.py does: no download) with the server's placement (bf16 on a
  GPU, float32 regression heads, SDPA), ``--batch`` frames per forward, ``--in-flight`` batches
  in flight (each in its own thread and CUDA stream: host post-processing of one batch beside the
  device forward of the next), through ``sapiens_pipeline.run_pipeline``; the maps go through
  ``core.analysis.maps_from_outputs`` as the client's would;
- **motion**: ``core.motion.stream.run_clip`` on those maps (lifting of every frame's people in
  ``--parallel`` threads, tracking, smoothing with the look-ahead of ``animate``, the rig);
- **body motion** (``--body``): ``core.motion.body_drive.drive_bodies`` with the server's own
  ``body_fit`` / ``body_motion`` / ``body_template`` backends called in process (the fit once
  per track, then the body posed on every frame). Needs anny and its cache; ``auto`` runs it
  only when both are there (a note says why not). Random-weight keypoints make a random pose:
  its fit may fail (a note says so); its time is that of the real code on such input.

Then **end to end**: analysis streaming into the motion stage (each frame's lifting starts as
soon as its batch is done), then the body motion; frames/s over the whole clip. Model build,
warm-up (and compile) are reported apart.

    python benchmarks/bench_clip_gpu.py --size 0.4b --frames 48 --batch 16 --in-flight 2 \\
        --json-out $OUT/clip.json

``--tiny``: tiny models, 96 px frames, the whole run in seconds on the CPU
(tests/server/test_bench_clip_gpu.py). Prints a Markdown table and one ``RESULT {json}`` line
per stage; ``--json-out`` writes them all.
"""

from __future__ import annotations

import argparse
import io
import json
import platform
import sys
import tempfile
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))


def pan_path(frames: int, side: int) -> np.ndarray:
    """[T,2] shift (dx, dy) px per frame: tests/server/astronaut_clip.py's path, scaled to the side."""
    t = np.arange(frames) / max(frames, 1)
    k = side / 512.0
    return np.stack([30.0 * k * np.sin(2 * np.pi * t), 10.0 * k * (1 - np.cos(2 * np.pi * t))], axis=1)


def write_frames(folder: Path, frames: int, side: int, seed: int = 0) -> Path:
    """The panned sample photo as JPEG frames frame000.jpg... (PIL only: no OpenCV needed)."""
    from PIL import Image

    from sapiens_blender.data import sample_photo_path

    folder.mkdir(parents=True, exist_ok=True)
    photo = Image.open(sample_photo_path()).convert("RGB")
    scale = side / max(photo.size)
    photo = photo.resize((max(1, round(photo.width * scale)), max(1, round(photo.height * scale))),
                         Image.BILINEAR if scale > 1 else Image.BOX)
    rng = np.random.default_rng(seed)
    for i, (dx, dy) in enumerate(pan_path(frames, side)):
        # output (x, y) <- input (x - dx, y - dy); edges replicate as the clip of the tests does
        moved = photo.transform(photo.size, Image.AFFINE, (1, 0, -dx, 0, 1, -dy), Image.BILINEAR,
                                fillcolor=None)
        arr = np.asarray(moved, np.float32)
        if dx > 0 or dy > 0:
            x0, y0 = int(np.ceil(max(dx, 0))), int(np.ceil(max(dy, 0)))
            if x0:
                arr[:, :x0] = arr[:, x0:x0 + 1]
            if y0:
                arr[:y0] = arr[y0:y0 + 1]
        arr = np.clip(arr * (1.0 + rng.uniform(-0.08, 0.08)), 0, 255).astype(np.uint8)
        Image.fromarray(arr).save(folder / f"frame{i:03d}.jpg", "JPEG", quality=85)
    return folder


class InProcessClient:
    """The client calls body_drive.server_body_driver makes, answered by the server's own tensor
    backends (inference_server/fit/serving.py) in this process: no HTTP, the same code."""

    def __init__(self, backends: dict):
        self.backends = backends

    def infer(self, model, inputs, parameters=None, request_id=None, timeout=None):
        return self.backends[model].infer_tensors(dict(inputs), dict(parameters or {}))

    def progress(self, request_id):
        return None

    def cancel(self, request_id):
        return None

    def interrupt(self, caller):
        pass

    def release_connection(self):
        pass


def body_backends(mode: str) -> tuple[dict | None, str]:
    """(name -> loaded backend, note) for the body stage; (None, why) when it does not run."""
    if mode == "off":
        return None, "body motion off (--body off)"
    try:
        import anny  # noqa: F401

        from inference_server.fit import body_model
        from inference_server.fit.serving import BodyFitBackend, BodyMotionBackend, BodyTemplateBackend
    except ImportError as exc:
        if mode == "on":
            raise
        return None, f"body motion skipped: {exc}"
    if mode == "auto" and not body_model.cache_ready():
        return None, f"body motion skipped: anny's cache is not built ({body_model.cache_dir()}; ~80 s to build)"
    out = {}
    try:
        for cls in (BodyFitBackend, BodyMotionBackend, BodyTemplateBackend):
            b = cls()
            b.load()
            out[cls.name] = b
    except Exception as exc:  # noqa: BLE001 - the other stages' figures stand
        if mode == "on":
            raise
        return None, f"body motion skipped: the body model did not load ({type(exc).__name__}: {exc})"
    return out, "body motion: fit + per-frame pose in process (the server's body_fit / body_motion)"


# A person standing facing the camera in the pose crop, as (u, v) fractions of the crop (u from
# the crop's left, v from its top); the person's left is the image's right. Mirror-symmetric, so
# the flip test's mirrored pass plants the same keypoints.
STANDING = {
    "nose": (0.0, 0.13), "neck": (0.0, 0.21), "eye": (0.025, 0.11), "ear": (0.055, 0.12),
    "shoulder": (0.12, 0.25), "acromion": (0.115, 0.24), "elbow": (0.16, 0.40), "wrist": (0.18, 0.53),
    "hip": (0.075, 0.55), "knee": (0.075, 0.72), "ankle": (0.075, 0.90), "heel": (0.075, 0.92),
    "big_toe": (0.085, 0.94), "small_toe": (0.105, 0.935),
}


def plant_person(models: dict) -> None:
    """Random weights give random keypoints (high scores anywhere) and a pointmap around z = 0,
    which the motion stage rightly rejects: no track, nothing to time. So, on top of the real
    random-weight forwards: the pose predictor's own output is scaled to ~0 (every keypoint
    unseen) and a Gaussian peak (sigma 2 heatmap px) is added at the joints of STANDING (a
    forward hook on the model); the pointmap predictor outputs z ~ 3 m. The forwards' cost is
    unchanged; the post-processing and the motion stage then see a person."""
    import torch

    from inference_server.processing.goliath import KEYPOINT_NAMES

    with torch.no_grad():
        pose = models["pose"].decode_head.predictor
        pose.weight.mul_(1e-4)
        pose.bias.zero_()
        depth = models["depth"].decode_head.predictor
        depth.weight.mul_(0.01)
        depth.bias.copy_(torch.tensor([0.0, 0.0, 3.0]))
    planted = {}
    for k, name in enumerate(KEYPOINT_NAMES):
        side, base = (1, name[5:]) if name.startswith("left_") else (-1, name[6:]) if name.startswith("right_") \
            else (0, name)
        if base in STANDING:
            planted[k] = (side, *STANDING[base])
    cache = {}

    def bumps(shape, device, dtype):
        key = (tuple(shape), str(device), dtype)
        if key not in cache:
            h, w = shape
            ys = torch.arange(h, dtype=torch.float32)[:, None]
            xs = torch.arange(w, dtype=torch.float32)[None, :]
            out = torch.zeros((len(KEYPOINT_NAMES), h, w))
            for k, (side, du, v) in planted.items():
                x = (w - 1) * 0.5 + side * du * (w - 1)  # exact mirror pairs: x <-> w-1-x
                y = v * (h - 1)
                out[k] = torch.exp(-((xs - x) ** 2 + (ys - y) ** 2) / (2 * 2.0**2))
            out = out.to(device, dtype)
            if out.is_cuda:  # used from every batch thread's own CUDA stream: ready before any uses it
                torch.cuda.current_stream(out.device).synchronize()
            cache[key] = out
        return cache[key]

    def hook(module, args, output):
        hm = output.heatmaps
        output.heatmaps = hm + bumps(hm.shape[-2:], hm.device, hm.dtype)
        return output

    models["pose"].register_forward_hook(hook)


def build_backend(args, input_hw):
    """Random-weight full-size Sapiens2 with the server's placement (bench_sapiens.py's models)."""
    import torch

    import bench_sapiens
    from inference_server.backends import devices
    from inference_server.backends.sapiens2 import FLOAT32_HEADS, Sapiens2Backend, _compiled
    from inference_server.backends.settings import SapiensSettings

    models, _backbone = bench_sapiens.build_models(args.size, input_hw)
    plant_person(models)
    wanted = SapiensSettings.from_env()
    placement = devices.choose_placement(wanted.device, wanted.precision)
    fast = {k: devices.prepare_model(m, placement) for k, m in models.items()}
    # the heads as the backend prepares them
    fast = {k: devices.regression_heads(m, placement) if k in FLOAT32_HEADS else m for k, m in fast.items()}
    if args.compile == "auto":  # as the server would: the placement's choice (SAPIENS_COMPILE)
        args.compile = "default" if placement.compile else "none"
    if args.compile != "none":
        shared = _compiled(next(iter(fast.values())).model, args.compile)  # eager if compiling fails
        for m in fast.values():
            m.model = shared
    backend = Sapiens2Backend("0.4b" if args.size == "tiny" else args.size, settings=SapiensSettings(detector=None))
    for m in fast.values():
        m.set_attn_implementation("sdpa")
    backend.models, backend.placement = fast, placement
    del torch
    return backend


def analyse_frames(run, frames: list, batch: int, in_flight: int, on_batch=None) -> dict:
    """index -> Maps for ``frames`` (core.motion.sources.Frame), ``batch`` per forward, ``in_flight``
    batches at once; ``on_batch(frames, maps)`` as each batch completes (in its thread)."""
    from inference_server.processing.image_io import decode_image
    from sapiens_blender.core.remote.analysis import maps_from_outputs

    def one(chunk):
        outputs = run([decode_image(f.data) for f in chunk])
        for f, out in zip(chunk, outputs):
            if not isinstance(out, dict):
                raise out
        maps = [maps_from_outputs(out) for out in outputs]
        if on_batch is not None:
            on_batch(chunk, maps)
        return chunk, maps

    chunks = [frames[k:k + batch] for k in range(0, len(frames), batch)]
    result = {}
    with ThreadPoolExecutor(max(1, in_flight), thread_name_prefix="clip-batch") as pool:
        for chunk, maps in pool.map(one, chunks):
            result.update({f.index: m for f, m in zip(chunk, maps)})
    return result


def motion(source, maps_of, parallel: int):
    """core.motion.stream.run_clip (as api.animate: causal smoothing, 2 frames of look-ahead)."""
    from sapiens_blender.core.motion.clip import AnimateOptions
    from sapiens_blender.core.motion.smoothing import SmoothingOptions
    from sapiens_blender.core.motion.stream import run_clip

    return run_clip(source, lambda frame: maps_of(frame.index), parallel=parallel,
                    options=AnimateOptions(smoothing=SmoothingOptions(lag=2)))


def drive(animation, client, clock: dict | None = None) -> list[str]:
    """drive_bodies with the server's driver (not deferred: the timing includes every pose);
    ``clock`` gets the seconds of the fits ("fit_s") and of the per-frame posing ("pose_s")."""
    from sapiens_blender.core.motion.body_drive import drive_bodies, server_body_driver

    fit_reference, pose_track = server_body_driver(client)
    clock = clock if clock is not None else {}

    def timed(key, fn):
        def call(*a, **kw):
            t0 = time.perf_counter()
            try:
                return fn(*a, **kw)
            finally:
                clock[key] = clock.get(key, 0.0) + time.perf_counter() - t0
        return call

    return drive_bodies(animation, timed("fit_s", fit_reference), timed("pose_s", pose_track), defer=False)


def _partial(rows) -> None:
    """The last stage's figure at once (kept if the run is cut short by a timeout)."""
    stage, n, sec = rows[-1]
    print("PARTIAL " + json.dumps({"stage": stage, "frames": n, "seconds": sec, "frames_per_s": n / sec}), flush=True)


def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="0.4b", choices=("0.4b", "0.8b", "1b", "5b", "tiny"))
    ap.add_argument("--tiny", action="store_true", help="tiny models, small frames: a CPU smoke run in seconds")
    ap.add_argument("--frames", type=int, default=48, help="frames in the clip (a multiple of --batch keeps "
                                                           "a compiled backbone at one shape)")
    ap.add_argument("--side", type=int, default=None, help="frame long side in px (default 1024; 96 with --tiny)")
    ap.add_argument("--input", default=None, help="model input HxW (default 1024x768; 64x48 with --tiny)")
    ap.add_argument("--batch", type=int, default=16, help="frames per forward")
    ap.add_argument("--in-flight", type=int, default=2, help="batches in flight (threads, CUDA streams)")
    ap.add_argument("--parallel", type=int, default=4, help="lifting threads of the motion stage (run_clip)")
    ap.add_argument("--compile", default="none", help="torch.compile mode of the backbone (none, auto = the server's choice, default, "
                                                      "reduce-overhead, max-autotune-no-cudagraphs)")
    ap.add_argument("--body", default="auto", choices=("auto", "on", "off"),
                    help="the body motion stage: auto = when anny and its cache are there")
    ap.add_argument("--json", "--json-out", dest="json", metavar="FILE", help="write the results as JSON")
    args = ap.parse_args(argv)
    if args.tiny:
        args.size = "tiny"
    args.side = args.side or (96 if args.size == "tiny" else 1024)
    args.input = args.input or ("64x48" if args.size == "tiny" else "1024x768")
    return args


def main(argv=None) -> int:
    import torch

    from bench_sapiens import _overlapped_runner, _peak_memory, _synchronize
    from inference_server.dataplane.base import AnalyzeOptions
    from sapiens_blender.core.motion.sources import FrameRange, open_source

    args = _args(argv)
    input_hw = tuple(int(v) for v in args.input.lower().split("x"))
    setup = {}
    t0 = time.perf_counter()
    backend = build_backend(args, input_hw)
    setup["build_s"] = time.perf_counter() - t0
    print(f"built random-weight {args.size} models ({backend.placement.describe()}) in {setup['build_s']:.1f} s",
          file=sys.stderr)
    bodies, body_note = body_backends(args.body)
    client = InProcessClient(bodies) if bodies else None
    print(body_note, file=sys.stderr)
    options = AnalyzeOptions(max_side=args.side)  # four tasks, flip test on: what animate asks for
    run = _overlapped_runner(backend, options)
    memory: dict = {}
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = write_frames(Path(tmp) / "frames", args.frames, args.side)
        source = open_source(folder)
        frames = list(source)
        frame_hw = np.asarray(__import__("PIL.Image", fromlist=["Image"]).open(folder / "frame000.jpg")).shape[:2]

        # warm-up (allocations, cuDNN/SDPA choices, compile), every thread once; the body model too
        t0 = time.perf_counter()
        warm = frames[:min(len(frames), args.batch * max(1, args.in_flight))]
        with _peak_memory(memory, "warm-up"):
            analyse_frames(run, warm[:args.batch], args.batch, 1)  # one thread first: a compile happens once
            warm_maps = analyse_frames(run, warm, args.batch, args.in_flight)
        body_failed = []

        def body(anim, clock=None):
            """The body stage; an error in it (the fit code is changing under other hands) is noted
            and ends the body stage, the other stages' figures stand."""
            if client is None or body_failed:
                return []
            try:
                return drive(anim, client, clock)
            except Exception as exc:  # noqa: BLE001
                body_failed.append(f"body stage failed: {type(exc).__name__}: {str(exc).strip()[:300]}")
                print(body_failed[-1], file=sys.stderr)
                return []

        if client is not None:
            warm_anim = motion(open_source(folder, FrameRange(0, len(warm))), warm_maps.__getitem__, args.parallel)
            body(warm_anim)
        _synchronize()
        setup["warm_up_s"] = time.perf_counter() - t0
        guard = next(iter(backend.models.values())).model
        compiled = args.compile if args.compile == "none" or not getattr(guard, "failed", None) else \
            f"{args.compile} FAILED, eager ({guard.failed})"

        # 1. each stage alone
        t0 = time.perf_counter()
        with _peak_memory(memory, "analysis"):
            maps = analyse_frames(run, frames, args.batch, args.in_flight)
        _synchronize()
        t_analysis = time.perf_counter() - t0
        rows.append(("analysis", len(frames), t_analysis))
        _partial(rows)
        t0 = time.perf_counter()
        animation = motion(open_source(folder), maps.__getitem__, args.parallel)
        rows.append(("motion (lifting, tracking, smoothing, rig)", len(frames), time.perf_counter() - t0))
        _partial(rows)
        tracks = len(animation.tracks)
        motion_notes = list(animation.notes)
        notes, body_clock = [], {}
        if client is not None and not body_failed:
            t0 = time.perf_counter()
            notes = body(animation, body_clock)
            if not body_failed:
                rows.append(("body motion (fit once per track + pose per frame)", len(frames),
                             time.perf_counter() - t0))
        bodies_driven = sum(1 for t in animation.tracks if getattr(t, "body", None) is not None)

        # 2. end to end: the analysis streams into the motion stage, then the body motion
        futures = {f.index: Future() for f in frames}

        def done(chunk, batch_maps):
            for f, m in zip(chunk, batch_maps):
                futures[f.index].set_result(m)

        def produce():
            try:
                analyse_frames(run, frames, args.batch, args.in_flight, on_batch=done)
            except BaseException as exc:  # noqa: BLE001 - handed to the consumer
                for fut in futures.values():
                    if not fut.done():
                        fut.set_exception(exc)

        t0 = time.perf_counter()
        producer = threading.Thread(target=produce, name="clip-analysis")
        producer.start()
        end_anim = motion(open_source(folder), lambda i: futures[i].result(), args.parallel)
        producer.join()
        with_body = client is not None and not body_failed
        if with_body:
            body(end_anim)
        _synchronize()
        rows.append(("end to end" + (" (analysis -> motion -> body)" if with_body and not body_failed
                                     else " (analysis -> motion)"),
                     len(frames), time.perf_counter() - t0))

    cuda = torch.cuda.is_available() and str(backend.placement.device).startswith("cuda")
    device = torch.cuda.get_device_name(0) if cuda else platform.processor() or "cpu"
    meta = {"bench": "clip", "size": args.size, "frames": len(frames), "frame_hw": [int(v) for v in frame_hw],
            "input": list(input_hw), "batch": args.batch, "in_flight": args.in_flight, "parallel": args.parallel,
            "device": device, "torch": torch.__version__, "placement": backend.placement.describe(),
            "compile": compiled, "tracks": tracks, "bodies": bodies_driven,
            "body_note": "; ".join([body_note, *body_failed]),
            "notes": notes, "motion_notes": motion_notes[:5], **{f"body_{k}": v for k, v in body_clock.items()}, **setup, **{f"{k}_peak_gpu_gib": v["peak_gpu_gib"] for k, v in memory.items()}}
    print(f"\nClip: {len(frames)} frames {frame_hw[0]}x{frame_hw[1]}, Sapiens2 {args.size} random weights "
          f"(four tasks, flip test, input {input_hw[0]}x{input_hw[1]}), {backend.placement.describe()}, batch "
          f"{args.batch}, {args.in_flight} in flight, compile {compiled}; device: {device}, torch {torch.__version__}")
    print(f"build {setup['build_s']:.1f} s, warm-up {setup['warm_up_s']:.1f} s (not timed below); {tracks} track(s), "
          f"{bodies_driven} body(ies) driven; {meta['body_note']}" + (f"; notes: {' | '.join(notes)}" if notes else "")
          + (f"; body fit {body_clock.get('fit_s', 0):.2f} s, posing {body_clock.get('pose_s', 0):.2f} s"
             if body_clock else ""))
    print("| stage | frames | seconds | frames/s | ms/frame |")
    print("|---|---|---|---|---|")
    results = []
    for stage, n, sec in rows:
        print(f"| {stage} | {n} | {sec:.2f} | {n / sec:.2f} | {1000 * sec / n:.1f} |")
        r = {"stage": stage, "seconds": sec, "frames_per_s": n / sec, "ms_per_frame": 1000 * sec / n}
        results.append(r)
        print("RESULT " + json.dumps({**meta, **r}, default=str))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({**meta, "results": results}, indent=2, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
