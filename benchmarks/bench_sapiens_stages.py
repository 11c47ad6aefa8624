# SPDX-License-Identifier: GPL-3.0-or-later
"""Sapiens2 device time per stage of one batch: backbone, head, post-processing, per task.

Why (issue 36): the stream mode was device-bound at ~120 ms per photo on an H100 while the four
backbones need ~14 ms at the bf16 rate; its stage split cannot say where the rest goes (it does
not wait for the device between stages). Here each stage of each task is bracketed by CUDA
events on one stream (on the CPU: wall time), so the split is the device's own.

The full-size random-weight models of bench_sapiens.build_models; per task: the backbone in bf16
(optionally ``torch.compile``d), the head in float32 (production: devices.keep_heads_fp32 or devices.mixed_heads for
depth/normal) or bf16, then the on-device post-processing the pipeline does (logits/maps
upsampled to a 1024x768 photo grid, argmax / scale division / normalisation / heatmap argmax).
Pose runs its batch twice (the flip test: a second forward). Each configuration is a JSON line:
ms per image per stage and task, device images/s, peak memory. ``--profile`` adds the top CUDA
kernels of one batch (attention vs GEMMs vs convolutions).

    python3 benchmarks/bench_sapiens_stages.py --size 0.4b --batch 8,16 --heads fp32,bf16 \\
        --compile none,default --json-out stages.jsonl
    .venv/bin/python benchmarks/bench_sapiens_stages.py --size tiny --input 64x48 --device cpu  # dry run
"""

from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parents[1]), str(Path(__file__).resolve().parent)]

TASKS = ("seg", "depth", "normal", "pose")
PHOTO_HW = (1024, 768)  # the grid the pipeline upsamples dense outputs to


class Clock:
    """Stage marks on the device's stream (CUDA events) or the host clock (CPU)."""

    def __init__(self, device):
        import torch

        self.cuda = device.type == "cuda"
        self.torch = torch
        self.marks = []

    def mark(self, label: str | None) -> None:
        if self.cuda:
            e = self.torch.cuda.Event(enable_timing=True)
            e.record()
            self.marks.append((label, e))
        else:
            self.marks.append((label, time.perf_counter()))

    def split(self) -> dict:
        """ms per labelled interval (a label names the interval that ends at its mark)."""
        if self.cuda:
            self.torch.cuda.synchronize()
        out = {}
        for (_, a), (label, b) in zip(self.marks, self.marks[1:]):
            ms = a.elapsed_time(b) if self.cuda else 1000 * (b - a)
            out[label] = out.get(label, 0.0) + ms
        self.marks = []
        return out


def features(model, tokens, hw):
    ph, pw = hw[0] // 16, hw[1] // 16
    patch = tokens[:, 1 + model.config.num_register_tokens:]
    return patch.transpose(1, 2).reshape(len(tokens), -1, ph, pw)


def post(task: str, out, scale):
    """The pipeline's device-side post-processing, in float32 at the photo grid."""
    import torch.nn.functional as F

    out = out.float()
    if task == "pose":  # heatmap peaks (the pipeline decodes on the device)
        return out.flatten(2).argmax(-1)
    if task == "depth" and scale is not None:
        out = out / scale.float()[:, :, None, None]
    up = F.interpolate(out, size=PHOTO_HW, mode="bilinear", align_corners=False)
    if task == "seg":
        return up.argmax(1)
    if task == "normal":
        return F.normalize(up, dim=1, eps=1e-8)
    return up


def mixed_heads(model):
    """The production mixed heads (devices.mixed_heads, the CUDA default): bf16 but the last
    layers in float32, fed float32."""
    import torch

    from inference_server.backends import devices

    return devices.mixed_heads(model.to(torch.bfloat16))


def run_batch(models, backbone, x, heads_dtype, clock) -> dict:
    """One batch through the four tasks; returns ms per 'task/stage'."""
    import torch

    hw = x.shape[-2:]
    with torch.inference_mode():
        clock.mark(None)
        for task in TASKS:
            m = models[task]
            # The flip test as a second forward of the same batch size: one backbone shape (a
            # compiled backbone compiles once; the FLOPs are those of one double batch).
            views = (x, x.flip(-1)) if task == "pose" else (x,)
            tokens = torch.cat([backbone(pixel_values=v).last_hidden_state for v in views])
            clock.mark(f"{task}/backbone")
            feats = features(m, tokens, hw).to(heads_dtype)
            out = m.decode_head(feats)
            scale = m.scale_head(feats) if task == "depth" and getattr(m, "scale_head", None) is not None else None
            clock.mark(f"{task}/head")
            post(task, out, scale)
            clock.mark(f"{task}/post")
    return clock.split()


def main(argv=None) -> int:
    import torch

    from bench_sapiens import backbone_flops, build_models
    from inference_server.backends.sapiens2 import _compiled

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", default="0.4b")
    ap.add_argument("--input", default="1024x768")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--batch", default="16", help="comma-separated batch sizes")
    ap.add_argument("--heads", default="fp32,bf16,mixed", help="head precisions: fp32, bf16, mixed (bf16 but "
                    "the last layer and the pointmap's scale branch in float32), mixed_compiled (mixed, each "
                    "head through torch.compile)")
    ap.add_argument("--compile", default="none", help="backbone modes: none, default, "
                    "max-autotune-no-cudagraphs, reduce-overhead (a failing one is reported and skipped)")
    ap.add_argument("--compiled-heads", default=None, help="head precisions timed with a compiled backbone "
                    "(default: those of --heads; the backbone's time does not depend on them)")
    ap.add_argument("--repeats", type=int, default=3, help="timed batches per configuration (after a warm-up)")
    ap.add_argument("--profile", action="store_true", help="top CUDA kernels of one batch (first configuration)")
    ap.add_argument("--json-out", type=Path, default=None)
    args = ap.parse_args(argv)
    hw = tuple(int(v) for v in args.input.lower().split("x"))
    # the features' dtype fed to each kind of head
    DTYPES = {"fp32": torch.float32, "bf16": torch.bfloat16, "mixed": torch.bfloat16, "mixed_compiled": torch.bfloat16}
    device = torch.device(args.device)
    sink = open(args.json_out, "a") if args.json_out else None

    def emit(row):
        print(json.dumps(row), flush=True)
        if sink:
            sink.write(json.dumps(row) + "\n")
            sink.flush()

    t = time.perf_counter()
    models, backbone = build_models(args.size, hw)
    backbone = backbone.to(device, torch.bfloat16)
    for m in models.values():
        m.model = None  # heads only below; the backbone runs separately (shared weights)
    heads = {}
    for dt_name in args.heads.split(","):
        dt = DTYPES[dt_name]
        heads[dt_name] = {k: copy.deepcopy(m).to(device, dt) for k, m in models.items()}
        if dt_name.startswith("mixed"):
            heads[dt_name] = {k: mixed_heads(m) for k, m in heads[dt_name].items()}
        if dt_name == "mixed_compiled":  # the heads fused too (their upsampling convolutions)
            for m in heads[dt_name].values():
                m.decode_head = torch.compile(m.decode_head)
                if getattr(m, "scale_head", None) is not None:
                    m.scale_head = torch.compile(m.scale_head)
    emit({"kind": "stages_setup", "size": args.size, "input": list(hw), "device": str(device),
          "card": torch.cuda.get_device_name(device) if device.type == "cuda" else "cpu",
          "build_s": round(time.perf_counter() - t, 1)})
    flops = backbone_flops(args.size, hw) if args.size in ("0.4b", "0.8b", "1b", "5b") else 0.0
    profiled = not args.profile
    for mode in args.compile.split(","):
        net = backbone if mode == "none" else _compiled(backbone, mode)
        for b in (int(v) for v in args.batch.split(",")):
            x = torch.randn(b, 3, *hw, device=device, dtype=torch.bfloat16)
            for dt_name, hm in heads.items():
                if mode != "none" and args.compiled_heads and dt_name not in args.compiled_heads.split(","):
                    continue
                dt = DTYPES[dt_name]
                clock = Clock(device)
                row = {"kind": "stages", "compile": mode, "batch": b, "heads": dt_name}
                try:
                    t = time.perf_counter()
                    run_batch(hm, net, x, dt, clock)  # warm-up (compiles)
                    row["first_s"] = round(time.perf_counter() - t, 1)
                    if device.type == "cuda":
                        torch.cuda.reset_peak_memory_stats(device)
                    splits = [run_batch(hm, net, x, dt, clock) for _ in range(args.repeats)]
                except Exception as exc:  # noqa: BLE001 - one failing configuration must not end the run
                    row["error"] = f"{type(exc).__name__}: {exc}"[:400]
                    emit(row)
                    if device.type == "cuda":
                        torch.cuda.empty_cache()
                    continue
                med = {k: statistics.median(s[k] for s in splits) / b for k in splits[0]}
                row["ms_per_image"] = {k: round(v, 2) for k, v in med.items()}
                for stage in ("backbone", "head", "post"):
                    row[f"{stage}_ms"] = round(sum(v for k, v in med.items() if k.endswith("/" + stage)), 2)
                total = sum(med.values())
                row["total_ms"] = round(total, 2)
                row["images_per_s"] = round(1000 / total, 2)
                if flops and device.type == "cuda":  # five backbone forwards per photo (pose flipped)
                    row["backbone_tflops"] = round(5 * flops / (row["backbone_ms"] / 1000) / 1e12, 1)
                    row["peak_gib"] = round(torch.cuda.max_memory_allocated(device) / 2 ** 30, 1)
                if getattr(net, "failed", None):
                    row["compile_failed"] = net.failed
                emit(row)
                if not profiled:
                    profiled = True
                    _profile(hm, net, x, dt, device, emit)
    if sink:
        sink.close()
    return 0


def _profile(models, net, x, dt, device, emit) -> None:
    """The kernels taking the most device time in one batch (names cut short)."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        run_batch(models, net, x, dt, Clock(device))
    attr = "device_time_total" if device.type == "cuda" else "cpu_time_total"
    rows = sorted(prof.key_averages(), key=lambda e: getattr(e, attr, 0) or 0, reverse=True)[:15]
    emit({"kind": "stages_profile", "batch": len(x), "top": [
        [e.key[:60], round((getattr(e, attr, 0) or 0) / 1000 / len(x), 2), e.count] for e in rows]})


if __name__ == "__main__":
    sys.exit(main())
