# SPDX-License-Identifier: GPL-3.0-or-later
"""Device and precision choice for the torch backends, overridable, and memory hygiene.

Auto choice: CUDA (bf16 where supported, else fp16; SDPA attention; the backbone compiled when
triton is there; mixed-precision regression heads with bf16) >
Apple MPS (fp32: half precision attention on MPS is not reliable across macOS versions) > CPU.
On the CPU, bf16 only pays with native bf16 units (AMX / AVX512-BF16); without them fp32 is
several times faster, and dynamic int8 quantisation of the Linear layers is the fast option.

The caller passes the wishes (settings.py: device auto|cpu|cuda|cuda:N|mps, precision
auto|fp32|bf16|fp16|int8, compile auto|on|off, heads auto|fp32|mixed). torch is imported lazily.
"""

from __future__ import annotations

import gc
import logging
from dataclasses import dataclass
from functools import lru_cache

log = logging.getLogger(__name__)

PRECISIONS = ("auto", "fp32", "bf16", "fp16", "int8")


@dataclass(frozen=True)
class Placement:
    device: str  # torch device string
    precision: str  # fp32 | bf16 | fp16 | int8 (int8 = dynamic int8 Linear layers, fp32 elsewhere)
    compile: bool = False
    heads: str = "fp32"  # regression heads under a half-precision backbone: fp32 | mixed

    @property
    def dtype(self):
        import torch

        return {"bf16": torch.bfloat16, "fp16": torch.float16}.get(self.precision, torch.float32)

    def describe(self) -> str:
        text = f"{self.device} {self.precision}" + (" compiled" if self.compile else "")
        return text + (", mixed heads" if self.heads == "mixed" and self.precision in ("bf16", "fp16") else "")


def torch_available() -> bool:
    try:
        import torch  # noqa: F401
    except Exception:
        return False
    return True


def accelerator_available() -> str | None:
    """'cuda' or 'mps' when torch can use one here, else None (also when torch is missing)."""
    if not torch_available():
        return None
    import torch

    if torch.cuda.is_available():
        return "cuda"
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available():
        return "mps"
    return None


@lru_cache(maxsize=1)
def cpu_has_native_bf16() -> bool:
    """True on CPUs with AMX-BF16 or AVX512-BF16 (Linux /proc/cpuinfo; False elsewhere)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                if line.startswith("flags"):
                    flags = set(line.split(":", 1)[1].split())
                    return bool({"amx_bf16", "avx512_bf16"} & flags)
    except OSError:
        pass
    return False


def triton_available() -> bool:
    """torch.compile's GPU code generator; without it compiling on CUDA fails on first call."""
    import importlib.util

    return importlib.util.find_spec("triton") is not None


def resolve_compile(kind: str, compile) -> bool:
    """auto: compile on CUDA when triton is installed (measured on an H200: the 0.4B backbone
    72.4 -> 39.4 ms per image at batch 16; docs/performance.md); never on the CPU by default (the
    first call compiles for minutes on 2 cores for no measured gain)."""
    if compile in (True, "on"):
        return True
    if compile in (False, "off", None):
        return False
    return kind == "cuda" and triton_available()


def resolve_heads(kind: str, precision: str, heads: str = "auto") -> str:
    """auto: mixed on CUDA under bf16 (the heads' upsampling at bf16 rate, the last layer in
    float32: 28.0 -> 18.6 ms per image on an H200, depth steps 0.030 mm as fp32's); fp32 elsewhere
    (fp16's range is too small for the heads' activations to trust without a measurement)."""
    if heads in ("fp32", "mixed"):
        return heads
    return "mixed" if kind == "cuda" and precision == "bf16" else "fp32"


def choose_placement(device: str | None = None, precision: str | None = None,
                     compile="auto", heads: str = "auto") -> Placement:
    device = (device or "auto").strip().lower()
    precision = (precision or "auto").strip().lower()
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    import torch

    if device == "auto":
        device = accelerator_available() or "cpu"
    if device.startswith("cuda") and not torch.cuda.is_available():
        raise ValueError("device 'cuda' was asked for but torch sees no CUDA GPU (is the CUDA build of torch installed?)")
    if device == "mps" and accelerator_available() != "mps":
        raise ValueError("device 'mps' was asked for but Apple MPS is not available")
    kind = device.split(":")[0]
    if kind not in ("cpu", "cuda", "mps"):
        raise ValueError(f"device must be auto, cpu, cuda, cuda:N or mps, got {device!r}")
    if precision == "auto":
        if kind == "cuda":
            precision = "bf16" if torch.cuda.is_bf16_supported() else "fp16"
        elif kind == "cpu" and cpu_has_native_bf16():
            precision = "bf16"
        else:
            precision = "fp32"
    if precision == "int8" and kind != "cpu":
        raise ValueError("int8 (dynamic quantisation) runs on the CPU only; use bf16/fp16 on a GPU")
    return Placement(device, precision, resolve_compile(kind, compile), resolve_heads(kind, precision, heads))


def _channel_norm_class():
    import torch

    class ChannelNorm(torch.nn.Module):
        """InstanceNorm2d without affine/running stats, as group_norm with one group per channel:
        the same arithmetic, but fast for channels-last tensors on the CPU (InstanceNorm2d is
        ~10x slower there)."""

        def __init__(self, eps: float):
            super().__init__()
            self.eps = eps

        def forward(self, x):
            return torch.nn.functional.group_norm(x, x.shape[1], eps=self.eps)

    return ChannelNorm


def use_fast_conv_layout(model):
    """CPU: channels-last convolutions (oneDNN's fast layout; measured 2.4x on the Sapiens2 normal
    head in bf16) with the plain InstanceNorms swapped for the equivalent ChannelNorm."""
    import torch

    channel_norm = _channel_norm_class()
    for parent in model.modules():
        for name, child in list(parent.named_children()):
            if (isinstance(child, torch.nn.InstanceNorm2d) and not child.affine
                    and not child.track_running_stats):
                setattr(parent, name, channel_norm(child.eps))
    return model.to(memory_format=torch.channels_last)


def prepare_model(model, placement: Placement):
    """Move/cast a model for ``placement``; int8 quantises its Linear layers (CPU)."""
    import torch

    model = model.eval()
    if placement.device == "cpu":
        model = use_fast_conv_layout(model)
    if placement.precision == "int8":
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from torch.ao.quantization import quantize_dynamic

            model = quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
        return model
    model = model.to(placement.device)
    if placement.precision in ("bf16", "fp16"):
        model = model.to(placement.dtype)
    return model


def _to_float32(module, args, kwargs):
    import torch

    cast = lambda v: v.float() if isinstance(v, torch.Tensor) and v.is_floating_point() else v  # noqa: E731
    return tuple(cast(a) for a in args), {k: cast(v) for k, v in kwargs.items()}


def keep_heads_fp32(model, backbone: str = "model"):
    """Every child of ``model`` except its ``backbone`` back to float32, fed float32 features.

    Regression heads must not run in bf16: its 8-bit mantissa makes a metric pointmap move in
    steps of 2^-8 of its value (0.8-1.6 cm at 1.5-4 m: visible terraces) and quantises normals.
    The backbone (nearly all the compute) stays in half precision."""
    for name, child in model.named_children():
        if name == backbone:
            continue
        child.float()
        child.register_forward_pre_hook(_to_float32, with_kwargs=True)
    return model


def _float32_input(module, args):
    import torch

    return tuple(a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args)


def mixed_heads(model, backbone: str = "model"):
    """The heads at the backbone's half precision but their last layers in float32, fed float32:
    the heavy upsampling convolutions at bf16 rate, the outputs not quantised to bf16's 8-bit
    mantissa (the dense predictor has few output channels at full resolution, so float32 costs
    little there; the pointmap's scale branch is small). benchmarks/bench_bf16_heads.py measures
    the depth steps of each variant."""
    for name, child in model.named_children():
        if name == backbone:
            continue
        for part in (getattr(child, "predictor", None),) if name != "scale_head" else (child,):
            if part is not None:
                part.float()
                part.register_forward_pre_hook(_float32_input)
    return model


def regression_heads(model, placement: Placement):
    """A regression task's heads as ``placement`` runs them under a half-precision backbone
    (mixed_heads or keep_heads_fp32); under float32, as they are."""
    if placement.precision not in ("bf16", "fp16"):
        return model
    return mixed_heads(model) if placement.heads == "mixed" else keep_heads_fp32(model)


def free_memory(device: str | None = None) -> None:
    """Give cached accelerator memory back after an unload."""
    gc.collect()
    if not torch_available():
        return
    import torch

    if torch.cuda.is_available():
        torch.cuda.empty_cache()
    mps = getattr(torch, "mps", None)
    if mps is not None and accelerator_available() == "mps":
        mps.empty_cache()


def is_out_of_memory(exc: BaseException) -> bool:
    name = type(exc).__name__
    text = str(exc).lower()
    return name == "OutOfMemoryError" or "out of memory" in text or "mps backend out of memory" in text
