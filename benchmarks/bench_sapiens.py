# SPDX-License-Identifier: GPL-3.0-or-later
"""Sapiens2 analysis speed: our pipeline vs the published-demo way, in the same run.

Random-weight models with the FULL-SIZE architecture of the chosen size (backbone dims/layers/
heads/GQA as released; heads as in the Sapiens2 configs), so no download is needed. The four task
models share one backbone instance (same compute as four, a quarter of the memory).

Modes, each timed on the same decoded photo through the real pipeline (sapiens_pipeline.py):
- baseline: fp32, eager attention, batch 1, tasks one after another (how the demos run);
- ours: automatic placement (bf16 on CUDA or on CPUs with AMX/AVX512-BF16, else fp32) + SDPA,
  and on the CPU channels-last convolutions (devices.prepare_model);
- optional: int8 (dynamic int8 Linear layers, CPU), preview (input_scale 0.5).
Per-stage seconds (decode, preprocess, forward per task, postprocess; means), images/s and the
ratio (medians of wall and CPU time per image; modes interleaved image by image so that other
load on the machine hits them alike).
On CUDA it also prints the fraction of the bf16 dense peak achieved by the backbone forwards.

    .venv/bin/python benchmarks/bench_sapiens.py --size 0.4b --input 512x384 --images 1

``--input`` sets the model input (default 1024x768, the released size); on a small CPU use
512x384 (4x fewer tokens) to keep the run short, and say so when quoting the numbers.

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
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ARCH = {  # hidden, layers, heads (sapiens.md 4.3); MLP 4x hidden (SwiGLU), GQA kv = heads/2 mid-layers
    "0.4b": (1024, 24, 16), "0.8b": (1280, 32, 16), "1b": (1536, 40, 24), "5b": (2432, 56, 32),
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
    heads_cfg = {
        "seg": ("Sapiens2ForSemanticSegmentation", 29,
                dict(upsample_out_channels=[512, 256, 128, 64], conv_out_channels=[64, 64])),
        "depth": ("Sapiens2ForPointmapEstimation", 3,
                  dict(shuffle, scale_conv_out_channels=[256, 128], scale_conv_kernel_sizes=[3, 3],
                       scale_final_hidden_sizes=[256, 128])),
        "normal": ("Sapiens2ForNormalEstimation", 3, shuffle),
        "pose": ("Sapiens2ForPoseEstimation", 308,
                 dict(upsample_out_channels=[1536, 1024] if big else [1024, 768],
                      conv_out_channels=[768, 512, 256] if big else [512, 512, 256])),
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


def main(argv=None) -> int:
    import torch
    from PIL import Image

    from inference_server.backends import devices
    from inference_server.backends.base import AnalyzeOptions
    from inference_server.backends.sapiens2 import Sapiens2Backend

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="0.4b", choices=sorted(ARCH))
    ap.add_argument("--input", default="1024x768", help="model input HxW (default 1024x768)")
    ap.add_argument("--images", type=int, default=1, help="timed images per mode (after one warm-up)")
    ap.add_argument("--modes", default="baseline,ours,preview", help="comma list of baseline,ours,int8,preview")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    ap.add_argument("--batch", type=int, default=1, help="N > 1: batched vs one-at-a-time throughput")
    args = ap.parse_args(argv)
    if args.batch > 1:
        args.modes = "ours"
    input_hw = tuple(int(v) for v in args.input.lower().split("x"))
    modes = args.modes.split(",")

    rng = np.random.default_rng(0)
    photo = Image.fromarray((rng.random((1024, 768, 3)) * 255).astype(np.uint8))
    buf = io.BytesIO()
    photo.save(buf, "JPEG", quality=90)
    photo_bytes = buf.getvalue()
    image = np.asarray(photo)
    options = AnalyzeOptions(max_side=1024)

    t0 = time.perf_counter()
    models, backbone = build_models(args.size, input_hw)
    print(f"built random-weight {args.size} models at {input_hw[0]}x{input_hw[1]} in "
          f"{time.perf_counter() - t0:.1f} s", file=sys.stderr)


    def backend_with(source, placement, attn, input_scale=1.0):
        b = Sapiens2Backend(args.size, input_scale=input_scale)
        for m in source.values():
            m.set_attn_implementation(attn)
        b.models, b.placement = source, placement
        return b

    auto = devices.choose_placement()
    backends = {}
    if "int8" in modes:
        from torch.ao.quantization import quantize_dynamic

        q = {k: devices.use_fast_conv_layout(m) for k, m in _shared_copy(models, backbone).items()}
        # one backbone copy, quantised once, in place
        quantize_dynamic(next(iter(q.values())).model, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
        for m in q.values():
            quantize_dynamic(m, {torch.nn.Linear}, dtype=torch.qint8, inplace=True)
        backends["int8"] = backend_with(q, devices.Placement("cpu", "int8"), "sdpa")
    if {"ours", "preview"} & set(modes):
        fast = {k: devices.prepare_model(m, auto) for k, m in _shared_copy(models, backbone).items()}
        if "ours" in modes:
            backends["ours"] = backend_with(fast, auto, "sdpa")
        if "preview" in modes:
            backends["preview"] = backend_with(fast, auto, "sdpa", input_scale=0.5)
    if "baseline" in modes:
        base_models = {k: m.eval().to(auto.device) for k, m in models.items()}  # as published: no tuning
        backends = {"baseline": backend_with(base_models, devices.Placement(auto.device, "fp32"), "eager"),
                    **backends}
    if args.batch > 1:
        return batch_compare(backends["ours"], image, options, args, input_hw)
    for name, b in backends.items():  # warm-up: allocations, first-call costs
        print(f"warming up {name} ...", file=sys.stderr)
        b.analyze(image, options)
    totals = {name: {} for name in backends}
    clock = {name: ([], []) for name in backends}
    for i in range(args.images):  # interleaved: machine load affects every mode alike
        for name, b in backends.items():
            print(f"image {i + 1}: {name} ...", file=sys.stderr)
            wall, cpu = time_one(b, photo_bytes, options, totals[name])
            clock[name][0].append(wall)
            clock[name][1].append(cpu)
    # medians: robust to other processes on a shared machine
    results = [{"mode": n, "seconds_per_image": float(np.median(clock[n][0])), "cpu_seconds_per_image":
                float(np.median(clock[n][1])), "images_per_s": 1.0 / float(np.median(clock[n][0])),
                "stages": {k: v / args.images for k, v in totals[n].items()},
                "placement": backends[n].placement.describe() + (" preview 0.5" if n == "preview" else "")}
               for n in backends]

    base = next((r for r in results if r["mode"] == "baseline"), None)
    device = torch.cuda.get_device_name(0) if torch.cuda.is_available() else platform.processor() or "cpu"
    print(f"\nSapiens2 {args.size}, model input {input_hw[0]}x{input_hw[1]}, photo 1024x768, {args.images} "
          f"image(s)/mode, device: {device}, torch {torch.__version__}, threads {torch.get_num_threads()}")
    stages = ["decode", "preprocess", "forward_seg", "forward_depth", "forward_normal", "forward_pose", "postprocess"]
    print("| mode | placement | " + " | ".join(stages) + " | s/image | CPU s/image | images/s | vs baseline (wall / CPU) |")
    print("|---" * (len(stages) + 6) + "|")
    for r in results:
        ratio = (f"{base['seconds_per_image'] / r['seconds_per_image']:.2f}x / "
                 f"{base['cpu_seconds_per_image'] / r['cpu_seconds_per_image']:.2f}x") if base else "-"
        cells = " | ".join(f"{r['stages'].get(s, 0.0):.2f}" for s in stages)
        print(f"| {r['mode']} | {r['placement']} | {cells} | {r['seconds_per_image']:.2f} | "
              f"{r['cpu_seconds_per_image']:.2f} | {r['images_per_s']:.3f} | {ratio} |")
    if torch.cuda.is_available():
        flops = backbone_flops(args.size, input_hw) * 4
        peak = next((v for k, v in BF16_PEAK_TFLOPS.items() if k in device), None)
        for r in results:
            fwd = sum(v for k, v in r["stages"].items() if k.startswith("forward"))
            achieved = flops / fwd / 1e12
            frac = f"{achieved / peak * 100:.0f}% of {peak:.0f}" if peak else "peak unknown"
            print(f"{r['mode']}: backbone {achieved:.0f} TFLOP/s ({frac} bf16 TFLOP/s)")
    else:
        print("No CUDA GPU here: GPU numbers were not measured.")
    if args.json:
        Path(args.json).write_text(json.dumps({"size": args.size, "input": input_hw, "device": device,
                                               "results": results}, indent=2))
    return 0


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
