# SPDX-License-Identifier: GPL-3.0-or-later
"""Sapiens2 analysis speed: our pipeline vs the published-demo way, in the same run.

Random-weight models with the FULL-SIZE architecture of the chosen size (backbone dims/layers/
heads/GQA as released; heads as in the Sapiens2 configs), so no download is needed. The four task
models share one backbone instance (same compute as four, a quarter of the memory).

Modes, each timed on the same decoded photo through the real pipeline (sapiens_pipeline.py):
- baseline: fp32, eager attention, batch 1, tasks one after another (how the demos run);
- ours: automatic placement (bf16 on CUDA or on CPUs with AMX/AVX512-BF16, else fp32, regression
  heads in float32) + SDPA, on the CPU channels-last convolutions (devices.prepare_model);
- noflip: ours without the pose flip test (on by default: its cost is ours - noflip);
- optional: int8 (dynamic int8 Linear layers, CPU), preview (input_scale 0.5);
- stream: what a GPU needs to be fed: ``--stream`` photos analysed ``--stream-batch`` at a time
  (one forward per task for the batch), the next batch's JPEGs decoded on a worker thread while
  the current one runs, host-to-device copies from pinned memory, the backbone optionally
  ``torch.compile``d (``--compile reduce-overhead`` = CUDA graphs; a failing compile falls back to
  eager and says so); images/s over the stream. ``--stream-overlap 1,2,3`` times it with 1, 2, 3
  batches in flight (each in its own thread and CUDA stream: the host post-processing of one
  batch beside the device forward of the next; on a GPU the pose flip test shares the crops'
  forward, so batch 16 = 8 people x 2 keeps one backbone shape). Whole batches only.
Per-stage seconds (decode, preprocess, forward per task, postprocess; means), images/s and the
ratio (medians of wall and CPU time per image; modes interleaved image by image so that other
load on the machine hits them alike). On CUDA it also prints the backbone TFLOP/s end to end and
its fraction of the GPU's bf16 dense peak.

GPU run (issue #36 item 1: benchmarks/gpu_sapiens_issue36.sh runs this and the clip benchmark):

    python benchmarks/bench_sapiens.py --size 0.4b --modes baseline,ours,stream --images 3 \\
        --stream 64 --stream-batch 16 --stream-overlap 1,2,3 --json-out OUT/sapiens_0.4b.json

Earlier GPU run (issue #11 item 8; 0.4B, then 1B, then one 1B task):

    .venv/bin/python benchmarks/bench_sapiens.py --size 0.4b --modes baseline,ours,stream \\
        --stream 64 --stream-batch 16 --compile reduce-overhead --images 3
    .venv/bin/python benchmarks/bench_sapiens.py --size 1b --modes baseline,ours,stream \\
        --stream 64 --stream-batch 16 --compile reduce-overhead --images 3
    .venv/bin/python benchmarks/bench_sapiens.py --size 1b --tasks seg --modes baseline,stream \\
        --stream 128 --stream-batch 32 --compile reduce-overhead

CPU: ``--input 512x384`` (4x fewer tokens) keeps a run short; say so when quoting the numbers.
``--tiny`` runs every mode in seconds (tests/server/test_bench_sapiens.py); ``--tiny --input
1024x768 --photo 1024x768`` keeps the forwards cheap while pre- and post-processing run at full
size. The per-image modes wait for the device at each stage boundary (exact per-stage seconds);
the stream mode does not (host and device work overlap; its stage split is indicative).
The post-processing alone, old code path against the current one: bench_sapiens_post.py.

``--batch N`` instead compares, with the "ours" placement, N photos analysed one at a time with
N photos in ONE ``analyze_batch`` call (one forward per task with batch N, as the server's
dynamic batching runs queued requests), interleaved ``--images`` times; prints images/s of both.
"""

from __future__ import annotations

import argparse
import copy
import io
import json
import platform
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ARCH = {  # hidden, layers, heads (sapiens.md 4.3); MLP 4x hidden (SwiGLU), GQA kv = heads/2 mid-layers
    "0.4b": (1024, 24, 16), "0.8b": (1280, 32, 16), "1b": (1536, 40, 24), "5b": (2432, 56, 32),
    "tiny": (32, 2, 2),  # --tiny: the same code paths in seconds (a smoke test, not a measurement)
}
BF16_PEAK_TFLOPS = {"H100": 989.0, "H200": 989.0, "A100": 312.0, "L40S": 362.0, "RTX 4090": 165.0}


def build_models(size: str, input_hw):
    import torch
    import transformers

    hidden, layers, heads = ARCH[size]
    big = size in ("1b",)
    base = dict(hidden_size=hidden, intermediate_size=4 * hidden, num_hidden_layers=layers,
                num_attention_heads=heads, num_key_value_attention_heads=heads // 2,
                image_size=list(input_hw), patch_size=16)
    shuffle = dict(use_pixel_shuffle=True, upsample_out_channels=[768, 512, 256, 128],
                   upsample_kernel_sizes=[3, 3, 3, 3], conv_out_channels=[64, 32, 16], conv_kernel_sizes=[3, 3, 3])
    if size == "tiny":
        shuffle.update(upsample_out_channels=[16, 8, 8, 8], conv_out_channels=[8, 8, 8])
    small = size == "tiny"
    heads_cfg = {
        "seg": ("Sapiens2ForSemanticSegmentation", 29,
                dict(upsample_out_channels=[16, 16, 8, 8] if small else [512, 256, 128, 64],
                     conv_out_channels=[8, 8] if small else [64, 64])),
        "depth": ("Sapiens2ForPointmapEstimation", 3,
                  dict(shuffle, scale_conv_out_channels=[8] if small else [256, 128],
                       scale_conv_kernel_sizes=[3] if small else [3, 3],
                       scale_final_hidden_sizes=[16, 8] if small else [256, 128])),
        "normal": ("Sapiens2ForNormalEstimation", 3, shuffle),
        "pose": ("Sapiens2ForPoseEstimation", 308,
                 dict(upsample_out_channels=[16, 16] if small else [1536, 1024] if big else [1024, 768],
                      conv_out_channels=[16, 8, 8] if small else [768, 512, 256] if big else [512, 512, 256])),
    }
    torch.manual_seed(0)
    models, backbone = {}, None
    for task, (cls_name, labels, head) in heads_cfg.items():
        config = transformers.Sapiens2Config(**base, num_labels=labels, head_config=head)
        config._attn_implementation = "sdpa"
        cls = getattr(transformers, cls_name)
        if backbone is None:
            model = cls(config)
            backbone = model.model
        else:
            # build on the meta device, materialise only the head, then plug in the shared backbone
            with torch.device("meta"):
                model = cls(config)
            for name, child in model.named_children():
                if name == "model":
                    continue
                child.to_empty(device="cpu")
                for module in child.modules():
                    if hasattr(module, "reset_parameters"):
                        module.reset_parameters()
            model.model = backbone
        models[task] = model.eval()
    with torch.no_grad():
        pred = models["seg"].decode_head.predictor
        pred.weight.mul_(0.01)
        pred.bias.zero_()
        pred.bias[0], pred.bias[22] = -8.0, 4.0  # exactly one person: the whole photo
        if hasattr(models["depth"], "scale_head"):
            models["depth"].scale_head.predictor.proj.bias.fill_(1.0)
    return models, backbone


def _shared_copy(models, backbone):
    """A deep copy of the task models that still share one (copied) backbone."""

    new_backbone = copy.deepcopy(backbone)
    out = {}
    for task, model in models.items():
        model.model = None
        clone = copy.deepcopy(model)
        model.model = backbone
        clone.model = new_backbone
        out[task] = clone
    return out


def backbone_flops(size: str, input_hw) -> float:
    """2 x MACs of one backbone forward: projections + SwiGLU MLP + attention matmuls."""
    hidden, layers, heads = ARCH[size]
    tokens = input_hw[0] * input_hw[1] // 256 + 9
    kv = [heads if (i < 8 or i >= layers - 8) else heads // 2 for i in range(layers)]
    macs = 0.0
    for kvh in kv:
        macs += tokens * hidden * hidden * (2 + 2 * kvh / heads)  # q, o + k, v
        macs += tokens * hidden * 4 * hidden * 3  # SwiGLU: gate, up, down
        macs += 2 * tokens * tokens * hidden  # scores + weighted values
    return 2 * macs


def time_one(backend, photo_bytes, options, totals):
    """Decode + analyse one photo; adds per-stage wall seconds; returns (wall, cpu) seconds."""
    from inference_server.processing.image_io import decode_image

    w0, c0 = time.perf_counter(), time.process_time()
    decoded = decode_image(photo_bytes)
    totals["decode"] = totals.get("decode", 0.0) + time.perf_counter() - w0
    backend.analyze(decoded, options)
    for stage, sec in backend.last_times.seconds.items():
        totals[stage] = totals.get(stage, 0.0) + sec
    return time.perf_counter() - w0, time.process_time() - c0


def _args(argv):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="0.4b", choices=sorted(ARCH))
    ap.add_argument("--tiny", action="store_true",
                    help="tiny architecture, 64x48 input, small photos: the whole benchmark in seconds (smoke test)")
    ap.add_argument("--input", default=None, help="model input HxW (default 1024x768)")
    ap.add_argument("--photo", default=None,
                    help="photo HxW (default 1024x768; 96x72 with --tiny). --tiny --photo 1024x768 times the "
                         "full-resolution post-processing around a tiny model")
    ap.add_argument("--images", type=int, default=1, help="timed images per mode (after one warm-up)")
    ap.add_argument("--modes", default="baseline,ours,preview",
                    help="comma list of baseline, ours, noflip, int8, preview, stream")
    ap.add_argument("--tasks", default="seg,depth,normal,pose", help="tasks analysed (default all four)")
    ap.add_argument("--stream", type=int, default=32,
                    help="stream mode: photos decoded on a worker thread while the previous batch runs")
    ap.add_argument("--stream-batch", type=int, default=8, help="stream mode: photos per forward batch")
    ap.add_argument("--compile", default="none",
                    help="stream mode: torch.compile mode for the backbones (none, auto = the server's choice, "
                         "default, reduce-overhead = "
                         "CUDA graphs, max-autotune-no-cudagraphs, max-autotune); a compile that fails falls "
                         "back to eager (the result's 'compile' says so)")
    ap.add_argument("--stream-overlap", default="1",
                    help="stream mode: comma list of batches in flight (1 = one after another; 2 = the host "
                         "post-processing of batch N beside the device forward of batch N+1, each batch in "
                         "its own thread and CUDA stream); every value is timed in the same run")
    ap.add_argument("--json", "--json-out", dest="json", metavar="FILE",
                    help="also write the results as JSON (and a JSON line per result on stdout, 'RESULT {...}')")
    ap.add_argument("--batch", type=int, default=1, help="N > 1: batched vs one-at-a-time throughput")
    args = ap.parse_args(argv)
    if args.tiny:
        args.size = "tiny"
    args.input = args.input or ("64x48" if args.size == "tiny" else "1024x768")
    args.photo = args.photo or ("96x72" if args.size == "tiny" else "1024x768")
    return args


def _jpeg(image) -> bytes:
    from PIL import Image

    buf = io.BytesIO()
    Image.fromarray(image).save(buf, "JPEG", quality=90)
    return buf.getvalue()


def stream(backend, photos: list[bytes], options, batch: int, overlap: int = 1) -> tuple[float, int]:
    """Analyse ``photos`` (JPEG bytes) in batches, the next batch decoded on a worker thread while
    the current one runs (host-to-device copies from pinned memory overlap too, resize_pad.py).

    ``overlap`` > 1: that many batches in flight, each in its own thread and (on CUDA) its own
    CUDA stream, through the real pipeline (``run_pipeline``, as analyze_batch runs it, without
    the backend's one-batch-at-a-time lock): the host post-processing of batch N (people, the
    keypoints' last step, the copies back) runs while the device computes batch N+1, and a
    device wait in one thread does not wait for the other's work. Returns (seconds, photos done)."""
    from concurrent.futures import ThreadPoolExecutor

    from inference_server.processing.image_io import decode_image

    chunks = [photos[k:k + batch] for k in range(0, len(photos), batch)]
    decode = lambda chunk: [decode_image(b) for b in chunk]  # noqa: E731
    done = 0
    t0 = time.perf_counter()
    if overlap <= 1:
        with ThreadPoolExecutor(1) as pool:
            ahead = pool.submit(decode, chunks[0])
            for k in range(len(chunks)):
                images = ahead.result()
                if k + 1 < len(chunks):
                    ahead = pool.submit(decode, chunks[k + 1])
                out = backend.analyze_batch(images, [options] * len(images))
                done += sum(isinstance(o, dict) for o in out)
    else:
        run = _overlapped_runner(backend, options)
        with ThreadPoolExecutor(overlap, thread_name_prefix="bench-batch") as pool:
            for out in pool.map(lambda chunk: run(decode(chunk)), chunks):
                done += sum(isinstance(o, dict) for o in out)
    _synchronize()
    return time.perf_counter() - t0, done


def _overlapped_runner(backend, options):
    """run(images) -> maps dicts: one batch through the backend's pipeline in the calling thread,
    on that thread's own CUDA stream (on CUDA), waiting for its own work only at the end."""
    import threading

    import torch

    from inference_server.backends.sapiens_pipeline import StageTimes, run_pipeline

    device = backend.placement.device
    cuda = str(device).startswith("cuda")
    local = threading.local()
    backend.load()

    def run(images):
        times = StageTimes()
        if not cuda:
            out = run_pipeline(backend._runner, images, [options] * len(images), device=device, times=times,
                               detector=backend.detector, no_detector_reason=backend.no_detector_reason,
                               depth_available="depth" in backend.models)
        else:
            if getattr(local, "stream", None) is None:
                local.stream = torch.cuda.Stream(device=torch.device(device))
            local.stream.wait_stream(torch.cuda.current_stream(torch.device(device)))
            with torch.cuda.stream(local.stream):
                out = run_pipeline(backend._runner, images, [options] * len(images), device=device, times=times,
                                   detector=backend.detector, no_detector_reason=backend.no_detector_reason,
                                   depth_available="depth" in backend.models)
            local.stream.synchronize()
        backend.last_times = times
        return out

    return run


def _synchronize():
    import torch

    if torch.cuda.is_available():
        torch.cuda.synchronize()


def main(argv=None) -> int:
    import torch

    from inference_server.backends import devices
    from inference_server.dataplane.base import AnalyzeOptions
    from inference_server.backends.sapiens2 import FLOAT32_HEADS, Sapiens2Backend
    from inference_server.backends.settings import SapiensSettings

    args = _args(argv)
    if args.batch > 1:
        args.modes = "ours"
    input_hw = tuple(int(v) for v in args.input.lower().split("x"))
    modes = args.modes.split(",")
    tasks = tuple(t for t in args.tasks.split(",") if t)

    rng = np.random.default_rng(0)
    photo_hw = tuple(int(v) for v in args.photo.lower().split("x"))
    image = (rng.random((*photo_hw, 3)) * 255).astype(np.uint8)
    photo_bytes = _jpeg(image)
    options = AnalyzeOptions(max_side=max(photo_hw), tasks=tasks)

    t0 = time.perf_counter()
    models, backbone = build_models(args.size, input_hw)
    print(f"built random-weight {args.size} models at {input_hw[0]}x{input_hw[1]} in "
          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)
    no_detector = SapiensSettings(detector=None)  # the benchmark times the Sapiens models

    def backend_with(source, placement, attn, input_scale=1.0):
        b = Sapiens2Backend(args.size if args.size != "tiny" else "0.4b", input_scale=input_scale,
                            settings=no_detector, tasks=tasks)
        for m in source.values():
            m.set_attn_implementation(attn)
        b.models, b.placement = {t: source[t] for t in tasks}, placement
        b.exact_stage_times = True  # per-stage seconds that mean what they say (the stream mode: off)
        return b

    wanted = SapiensSettings.from_env()  # SAPIENS_DEVICE / SAPIENS_PRECISION pick the placement
    auto = devices.choose_placement(wanted.device, wanted.precision)
    if args.compile == "auto":  # as the server would: the placement's choice (SAPIENS_COMPILE)
        args.compile = "default" if auto.compile else "none"
    eager = replace(auto, compile=False)  # the per-photo modes run uncompiled (their labels say so)

    def tuned_models(placement, compile_mode="none"):
        fast = {k: devices.prepare_model(m, placement) for k, m in _shared_copy(models, backbone).items()}
        # the heads as the backend prepares them
        fast = {k: devices.regression_heads(m, placement) if k in FLOAT32_HEADS else m for k, m in fast.items()}
        if compile_mode != "none":
            from inference_server.backends.sapiens2 import _compiled

            shared = _compiled(next(iter(fast.values())).model, compile_mode)  # eager if compiling fails
            for m in fast.values():
                m.model = shared
        return fast

    backends = {}
    if "int8" in modes:
        from torch.ao.quantization import quantize_dynamic

        q = {k: devices.use_fast_conv_layout(m) for k, m in _shared_copy(models, backbone).items()}
        # one backbone copy, quantised once, in place
        quantize_dynamic(next(iter(q.values())).model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
        for m in q.values():
            quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
        backends["int8"] = backend_with(q, devices.Placement("cpu", "int8"), "sdpa")
    if {"ours", "noflip", "preview"} & set(modes):
        fast = tuned_models(auto)
        for mode in ("ours", "noflip"):
            if mode in modes:
                backends[mode] = backend_with(fast, eager, "sdpa")
        if "preview" in modes:
            backends["preview"] = backend_with(fast, eager, "sdpa", input_scale=0.5)
    if "baseline" in modes:
        base_models = {k: m.eval().to(auto.device) for k, m in models.items()}  # as published: no tuning
        backends = {"baseline": backend_with(base_models, devices.Placement(auto.device, "fp32"), "eager"),
                    **backends}
    streaming = None
    if "stream" in modes:
        streaming = backend_with(tuned_models(auto, args.compile), replace(auto, compile=args.compile != "none"), "sdpa")
        streaming.exact_stage_times = False  # host and device work overlap: its stages are indicative
    if args.batch > 1:
        return batch_compare(backends["ours"], image, options, args, input_hw)
    mode_options = {n: (AnalyzeOptions(max_side=options.max_side, tasks=tasks, flip_test=False) if n == "noflip"
                        else options) for n in backends}
    cuda = torch.cuda.is_available() and str(auto.device).startswith("cuda")
    memory = {}
    for name, b in backends.items():  # warm-up: allocations, first-call costs
        print(f"warming up {name} ...", file=sys.stderr)
        with _peak_memory(memory, name):
            b.analyze(image, mode_options[name])
    totals = {name: {} for name in backends}
    clock = {name: ([], []) for name in backends}
    for i in range(args.images):  # interleaved: machine load affects every mode alike
        for name, b in backends.items():
            print(f"image {i + 1}: {name} ...", file=sys.stderr)
            wall, cpu = time_one(b, photo_bytes, mode_options[name], totals[name])
            clock[name][0].append(wall)
            clock[name][1].append(cpu)
    # medians: robust to other processes on a shared machine
    results = [{"mode": n, "seconds_per_image": float(np.median(clock[n][0])), "cpu_seconds_per_image":
                float(np.median(clock[n][1])), "images_per_s": 1.0 / float(np.median(clock[n][0])),
                "stages": {k: v / args.images for k, v in totals[n].items()},
                "placement": backends[n].placement.describe() + {"preview": " preview 0.5",
                                                                 "noflip": " no flip test"}.get(n, ""),
                "batch": 1, "images": args.images, **memory.get(n, {})}
               for n in backends]
    for r in results:
        print("PARTIAL " + json.dumps(r, default=float), flush=True)  # kept if the run is cut short
    failed = []
    if streaming is not None:
        # whole batches only (static shapes for a compiled backbone: no recompile for a short last one)
        n = -(-max(args.stream, args.stream_batch) // args.stream_batch) * args.stream_batch
        rng = np.random.default_rng(1)  # different photos: noise changes only the pixels
        photos = [_jpeg(np.clip(image.astype(np.int16) + rng.integers(-8, 9, image.shape), 0, 255).astype(np.uint8))
                  for _ in range(n)]
        print(f"warming up stream (batch {args.stream_batch}, compile {args.compile}) ...", file=sys.stderr)
        t0 = time.perf_counter()
        with _peak_memory(memory, "stream warm-up"):
            stream(streaming, photos[:args.stream_batch], options, args.stream_batch)
        compile_s = time.perf_counter() - t0
        guard = next(iter(streaming.models.values())).model
        compiled = args.compile if args.compile == "none" or not getattr(guard, "failed", None) else \
            f"{args.compile} FAILED, eager ({guard.failed})"
        for overlap in (int(v) for v in str(args.stream_overlap).split(",") if v.strip()):
            label = "stream" if overlap <= 1 else f"stream x{overlap}"
            try:
                if overlap > 1:  # the other threads' first calls (their CUDA streams; graphs per thread)
                    print(f"warming up {label} ...", file=sys.stderr)
                    stream(streaming, photos[:args.stream_batch * overlap], options, args.stream_batch, overlap)
                print(f"timing {label}: {n} photos ...", file=sys.stderr)
                with _peak_memory(memory, label):
                    seconds, done = stream(streaming, photos, options, args.stream_batch, overlap)
                assert done == n, f"only {done} of {n} photos analysed"
            except Exception as exc:  # noqa: BLE001 - e.g. out of memory with more in flight: the rest stands
                failed.append({"mode": label, "error": f"{type(exc).__name__}: {str(exc).strip()[:300]}"})
                print(f"{label} FAILED: {failed[-1]['error']}", file=sys.stderr)
                print("PARTIAL " + json.dumps(failed[-1]), flush=True)
                devices.free_memory()
                continue
            results.append({"mode": label, "seconds_per_image": seconds / n, "cpu_seconds_per_image": None,
                            "images_per_s": n / seconds, "stages": dict(streaming.last_times.seconds),
                            "placement": f"{streaming.placement.describe()} batch {args.stream_batch}, "
                                         f"decode overlapped, {overlap} batch(es) in flight, compile {compiled}",
                            "batch": args.stream_batch, "in_flight": overlap, "images": n, "compile": compiled,
                            "first_batch_s": compile_s, **memory.get(label, {})})
            print("PARTIAL " + json.dumps(results[-1], default=float), flush=True)  # kept if the run is cut short

    base = next((r for r in results if r["mode"] == "baseline"), None)
    device = torch.cuda.get_device_name(0) if cuda else platform.processor() or "cpu"
    print(f"\nSapiens2 {args.size}, model input {input_hw[0]}x{input_hw[1]}, photo {photo_hw[0]}x{photo_hw[1]}, "
          f"tasks {','.join(tasks)}, {args.images} image(s)/mode, device: {device}, torch {torch.__version__}, "
          f"threads {torch.get_num_threads()}")
    stages = ["decode", "preprocess", "forward_seg", "forward_depth", "forward_normal", "forward_pose", "postprocess"]
    print("| mode | placement | " + " | ".join(stages) + " | s/image | CPU s/image | images/s | vs baseline (wall / CPU) "
          "| peak GPU GiB |")
    print("|---" * (len(stages) + 7) + "|")
    flops = backbone_flops(args.size, input_hw) * len(tasks)  # the four tasks' backbones, no flip test
    peak = next((v for k, v in BF16_PEAK_TFLOPS.items() if k in device), None) if cuda else None
    for r in results:
        if base:
            r["vs_baseline"] = base["seconds_per_image"] / r["seconds_per_image"]
        cpu_s = r["cpu_seconds_per_image"]
        ratio = (f"{base['seconds_per_image'] / r['seconds_per_image']:.2f}x / "
                 + (f"{base['cpu_seconds_per_image'] / cpu_s:.2f}x" if cpu_s else "-")) if base else "-"
        cells = " | ".join(f"{r['stages'].get(s, 0.0):.2f}" for s in stages)
        gib = f"{r['peak_gpu_gib']:.1f}" if "peak_gpu_gib" in r else "-"
        print(f"| {r['mode']} | {r['placement']} | {cells} | {r['seconds_per_image']:.3f} | "
              + (f"{cpu_s:.2f}" if cpu_s else "-") + f" | {r['images_per_s']:.3f} | {ratio} | {gib} |")
        # backbone FLOPs per image over the whole time per image (the honest end-to-end figure)
        r["backbone_tflops"] = flops / r["seconds_per_image"] / 1e12
        if peak:
            r["fraction_of_bf16_peak"] = r["backbone_tflops"] / peak
            r["bound_images_per_s"] = peak * 1e12 / flops
    if cuda:
        for r in results:
            frac = f"{r['fraction_of_bf16_peak'] * 100:.0f}% of {peak:.0f}" if peak else "peak unknown"
            print(f"{r['mode']}: {r['backbone_tflops']:.0f} backbone TFLOP/s end to end ({frac} bf16 dense TFLOP/s"
                  + (f"; bound {r['bound_images_per_s']:.0f} images/s" if peak else "") + ")")
    else:
        print("No CUDA GPU here: GPU numbers were not measured.")
    meta = {"bench": "sapiens", "size": args.size, "input": list(input_hw), "photo": list(photo_hw),
            "device": device, "torch": torch.__version__, "tasks": list(tasks),
            "backbone_gflop_per_image": flops / 1e9, "failed": failed}
    for r in results:
        print("RESULT " + json.dumps({**meta, **r}, default=float))
    if args.json:
        Path(args.json).parent.mkdir(parents=True, exist_ok=True)
        Path(args.json).write_text(json.dumps({**meta, "results": results}, indent=2, default=float))
    return 0


class _peak_memory:
    """``with _peak_memory(into, name)``: the CUDA memory of a block (into[name]: peak allocated
    GiB, everything resident included, and the GiB allocated beyond what was before). Nothing
    without CUDA."""

    def __init__(self, into: dict, name: str):
        self.into, self.name = into, name

    def __enter__(self):
        import torch

        self.cuda = torch.cuda.is_available()
        if self.cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
            self.before = torch.cuda.memory_allocated()
        return self

    def __exit__(self, *exc):
        import torch

        if self.cuda and exc[0] is None:
            torch.cuda.synchronize()
            peak = torch.cuda.max_memory_allocated()
            self.into[self.name] = {"peak_gpu_gib": peak / 2**30, "peak_gpu_extra_gib": (peak - self.before) / 2**30}
        return False


def batch_compare(backend, image, options, args, input_hw) -> int:
    """Throughput of N photos one at a time vs as one batch (same backend, interleaved)."""
    import torch

    n = args.batch
    rng = np.random.default_rng(1)  # N different photos (noise changes only the pixels)
    images = [np.clip(image.astype(np.int16) + rng.integers(-8, 9, image.shape), 0, 255).astype(np.uint8)
              for _ in range(n)]
    print("warming up (single and batched) ...", file=sys.stderr)
    backend.analyze(images[0], options)
    backend.analyze_batch(images, [options] * n)
    seconds = {"one at a time": [], f"batch of {n}": []}
    for rep in range(max(1, args.images)):
        print(f"round {rep + 1}: {n} photos one at a time, then as one batch ...", file=sys.stderr)
        t0 = time.perf_counter()
        for img in images:
            backend.analyze(img, options)
        seconds["one at a time"].append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        out = backend.analyze_batch(images, [options] * n)
        seconds[f"batch of {n}"].append(time.perf_counter() - t0)
        assert all(isinstance(o, dict) for o in out), out
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or "cpu"
    print(f"\nSapiens2 {args.size}, model input {input_hw[0]}x{input_hw[1]}, 4 tasks, {n} photos 1024x768, "
          f"{max(1, args.images)} round(s), {backend.placement.describe()}, device: {device}, "
          f"threads {torch.get_num_threads()}")
    print("| mode | s for the photos (median) | images/s | vs one at a time |")
    print("|---|---|---|---|")
    single = float(np.median(seconds["one at a time"]))
    results = []
    for mode, runs in seconds.items():
        med = float(np.median(runs))
        results.append({"mode": mode, "seconds": med, "images_per_s": n / med, "speedup": single / med})
        print(f"| {mode} | {med:.2f} | {n / med:.3f} | {single / med:.2f}x |")
    if args.json:
        Path(args.json).write_text(json.dumps({"size": args.size, "input": input_hw, "device": device,
                                               "batch": n, "results": results}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
