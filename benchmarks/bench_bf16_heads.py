# SPDX-License-Identifier: GPL-3.0-or-later
"""Pointmap depth resolution under a bf16 backbone: heads in bf16 (before) vs float32 (now) vs
mixed (bf16 with the last layer and the scale branch in float32: bench_sapiens_stages.mixed_heads).

The full-size random-weight Sapiens2 pointmap model of ``--size`` (bench_sapiens.build_models,
1024x768 input by default) runs its backbone ONCE in bf16; the same features then go through the
pointmap head (with its scale branch) in bf16 and in float32 (devices.keep_heads_fp32). The head's
last layer is set so that Z spans about 1.5-4 m like people in photos (random weights give
arbitrary values), and the scale branch outputs 1. Printed: the Z quantisation step (median gap
between distinct neighbouring Z values) in 1.5-2 m and 2-4 m, in mm, for both.

    .venv/bin/python benchmarks/bench_bf16_heads.py --size 0.4b            # full size, ~1 min CPU
    .venv/bin/python benchmarks/bench_bf16_heads.py --input 256x192         # quicker

Measured here (0.4B, --input 512x384, 2 shared CPU cores, 2026-11-26): Z steps at 1.5-2 / 2-4 m
bf16 7.8 / 15.6 mm, float32 0.031 / 0.007 mm, mixed 0.030 / 0.007 mm (float32's resolution);
head forward 2.35 / 9.40 / 4.31 s.
"""

from __future__ import annotations

import argparse
import copy
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def z_step_mm(z: np.ndarray, low: float, high: float) -> float:
    """Median spacing of the distinct Z values within [low, high) metres, in millimetres."""
    values = np.unique(z[(z >= low) & (z < high)].astype(np.float64))
    return float(np.median(np.diff(values)) * 1000) if len(values) > 2 else float("nan")


def main(argv=None) -> int:
    import torch

    from bench_sapiens import build_models
    from bench_sapiens_stages import mixed_heads
    from inference_server.backends import devices

    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", default="0.4b")
    ap.add_argument("--input", default="1024x768", help="model input HxW (default 1024x768)")
    args = ap.parse_args(argv)
    hw = tuple(int(v) for v in args.input.lower().split("x"))

    t0 = time.perf_counter()
    models, _ = build_models(args.size, hw)
    model = models["depth"]
    torch.manual_seed(0)
    pixels = torch.randn(1, 3, *hw)
    backbone = model.model.to(torch.bfloat16)
    with torch.inference_mode():
        tokens = backbone(pixels.to(torch.bfloat16)).last_hidden_state
    ph, pw = hw[0] // 16, hw[1] // 16
    feats = tokens[:, 1 + model.config.num_register_tokens:].transpose(1, 2).reshape(1, -1, ph, pw)
    print(f"backbone ({args.size}, {hw[0]}x{hw[1]}, bf16): {time.perf_counter() - t0:.1f} s incl. build",
          file=sys.stderr)

    head, scale = model.decode_head.float(), model.scale_head.float()
    with torch.inference_mode():  # aim Z at 1.5-4 m: mean 2.75 m, spread ~0.6 m
        z = head(feats.float())[:, 2]
        gain = 0.6 / float(z.std())
        head.predictor.weight[2] *= gain
        head.predictor.bias[2] = 2.75 - float(z.mean()) * gain
        scale.predictor.proj.weight.zero_()
        scale.predictor.proj.bias.fill_(1.0)

    model.model = torch.nn.Identity()  # only the heads are copied below
    results, seconds = {}, {}
    for name in ("bf16 heads (before)", "float32 heads (now)", "mixed: bf16, last layer float32"):
        wrapped = copy.deepcopy(model)
        if name.startswith("bf16"):
            wrapped.decode_head.to(torch.bfloat16)
            wrapped.scale_head.to(torch.bfloat16)
        elif name.startswith("mixed"):  # the GPU candidate (bench_sapiens_stages --heads mixed)
            mixed_heads(wrapped)
        else:
            devices.keep_heads_fp32(wrapped)
        wrapped = devices.use_fast_conv_layout(wrapped)  # the CPU layout the server uses
        with torch.inference_mode():
            # bf16 features in both cases; keep_heads_fp32's hooks cast them for the float32 heads
            wrapped.decode_head(feats)  # warm-up
            t = time.perf_counter()
            points = wrapped.decode_head(feats)
            s = wrapped.scale_head(feats)
            seconds[name] = time.perf_counter() - t
            z = (points.float() / s.float()[:, :, None, None])[:, 2].numpy()
        results[name] = z
    print(f"\nSapiens2 {args.size} pointmap, input {hw[0]}x{hw[1]}, bf16 backbone, random weights; "
          f"Z {float(np.percentile(results['float32 heads (now)'], 5)):.2f}-"
          f"{float(np.percentile(results['float32 heads (now)'], 95)):.2f} m (5-95 %)")
    print("| heads | Z step 1.5-2 m | Z step 2-4 m | distinct Z values | head forward s |")
    print("|---|---|---|---|---|")
    for name, z in results.items():
        print(f"| {name} | {z_step_mm(z, 1.5, 2.0):.3f} mm | {z_step_mm(z, 2.0, 4.0):.3f} mm | "
              f"{len(np.unique(z))} | {seconds[name]:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
