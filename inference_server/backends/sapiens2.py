# SPDX-License-Identifier: GPL-3.0-or-later
"""Sapiens2 backends (``sapiens2-0.4b`` ... ``sapiens2-5b``) on the native transformers classes.

Weights: the hub repos ``facebook/sapiens2-{seg,pointmap,normal,pose}-{size}`` (config.json plus
the safetensors the config names; a repo with only the original ``sapiens2_{size}_{task}.safetensors``
gets its config rebuilt from that file, sapiens2_original.py), or a local folder (weights.py). Preprocessing is ours
(resize_pad.py) because transformers' Sapiens2ImageProcessor needs torchvision:
seg = plain resize; normal and pointmap = aspect-preserving resize + centred padding; pose =
top-down crops at the model's 3:4 aspect. Everything is then converted by sapiens_pipeline.py.

torch/transformers are imported lazily: importing this module (the server catalog does) is cheap.
"""

from __future__ import annotations

import logging
from pathlib import Path
from types import SimpleNamespace

from ..processing.goliath import PART_NAMES_SAPIENS2
from ..processing.normals import SAPIENS_NORMAL_SIGNS
from ..processing.resize_pad import SAPIENS2_MEAN, SAPIENS2_STD
from . import devices, sapiens2_original, weights
from ..dataplane.base import BackendError, register
from .sapiens_common import SapiensTaskBackend
from .settings import SapiensSettings

log = logging.getLogger(__name__)

SIZES = ("0.4b", "0.8b", "1b", "5b")
DEFAULT_INPUT_HW = (1024, 768)  # the released models' training size (H, W)
# Our task name -> (hub task name, transformers class name)
TASKS = {
    "seg": ("seg", "Sapiens2ForSemanticSegmentation"),
    "depth": ("pointmap", "Sapiens2ForPointmapEstimation"),
    "normal": ("normal", "Sapiens2ForNormalEstimation"),
    "pose": ("pose", "Sapiens2ForPoseEstimation"),
}

# Regression heads (and the pointmap's scale branch) run in float32 under a bf16/fp16 backbone:
# half-precision outputs terrace (devices.keep_heads_fp32), or only their last layers (mixed_heads,
# the CUDA default: most of the heads' compute at bf16 rate, outputs as fine as float32's).
FLOAT32_HEADS = ("depth", "normal")


def repo_id(task: str, size: str) -> str:
    return f"facebook/sapiens2-{TASKS[task][0]}-{size}"


def accelerator_available() -> str | None:
    """'cuda' / 'mps' when torch can use one, else None."""
    return devices.accelerator_available()


def weights_available(size: str, task: str | None = None, weights_dir=None) -> bool:
    """True when the weights of ``task`` (all four when None) are local or may be downloaded."""
    if size not in SIZES:
        return False
    tasks = [task] if task else list(TASKS)
    try:
        return all(weights.cached_or_downloadable(repo_id(t, size), weights_dir=weights_dir) for t in tasks)
    except Exception:  # unreadable cache entries mean "not available", never a crash of the caller
        return False


class Sapiens2Runner:
    """Calls the four task models with the reference pre/post-processing (see sapiens_pipeline)."""

    metric = True
    part_names = PART_NAMES_SAPIENS2
    normal_signs = SAPIENS_NORMAL_SIGNS  # model normal axes -> canonical frame (see normals.py)
    mean, std = SAPIENS2_MEAN, SAPIENS2_STD

    def __init__(self, backend: "Sapiens2Backend"):
        self.b = backend
        self.source = backend.name

    @property
    def pose_input_hw(self):
        return self.b.input_hw("pose")

    def _forward(self, task, x):
        import torch

        model = self.b.models[task]
        x = x.to(self.b.placement.device, self.b.placement.dtype if self.b.placement.precision in ("bf16", "fp16")
                 else torch.float32)
        try:
            with torch.inference_mode():
                return model(pixel_values=x)
        except RuntimeError as exc:
            if devices.is_out_of_memory(exc):
                devices.free_memory()
                raise BackendError(
                    f"out of memory running {self.b.name} {task} on {self.b.placement.device}: try a smaller "
                    "size (e.g. sapiens2-0.4b), a smaller max_side, or the CPU (SAPIENS_DEVICE=cpu)",
                    status=503) from exc
            raise

    def _dense_batch(self, task, photos, hws, keep_aspect: bool, field: str) -> list:
        """One forward for several photos (each laid out on the model's input as its own plan),
        then each output back onto its own photo grid."""
        import torch

        from ..processing.resize_pad import plan_input, to_model_input, to_photo_grid

        plans = [plan_input(p.shape[-2:], self.b.input_hw(task), keep_aspect) for p in photos]
        x = torch.cat([to_model_input(p, plan, self.mean, self.std) for p, plan in zip(photos, plans)])
        out = self._forward(task, x)
        maps = getattr(out, field).float()
        if field == "pointmaps" and out.scales is not None:
            # Metric points = prediction / predicted scale (canonical-focal ratio), sapiens.md 2.8.
            maps = maps / out.scales.float()[:, :, None, None]
        return [to_photo_grid(maps[i:i + 1], plan, hw) for i, (plan, hw) in enumerate(zip(plans, hws))]

    def segment_batch(self, photos, hws):
        from ..processing.resize_pad import class_labels

        # Argmax after upsampling the logits to the photo grid (not before): smooth part borders.
        return [class_labels(lg) for lg in self._dense_batch("seg", photos, hws, keep_aspect=False, field="logits")]

    # Points and normals stay on the device as [H,W,3] tensors: the pipeline post-processes them
    # there (processing/dense_torch.py) and copies back only the final maps.
    def depth_batch(self, photos, hws):
        return [p[0].permute(1, 2, 0) for p in self._dense_batch("depth", photos, hws, keep_aspect=True,
                                                                 field="pointmaps")]

    def normals_batch(self, photos, hws):
        import torch.nn.functional as F

        return [F.normalize(n, dim=1, eps=1e-8)[0].permute(1, 2, 0)
                for n in self._dense_batch("normal", photos, hws, keep_aspect=True, field="normals")]

    def pose(self, crops):
        return self._forward("pose", crops).heatmaps.float()  # stays on the device (pipeline decodes there)


class Sapiens2Backend(SapiensTaskBackend):
    platform = "pytorch_transformers"

    def __init__(self, size: str, device: str | None = None, precision: str | None = None,
                 weights_dir: str | Path | None = None, tasks: tuple[str, ...] = tuple(TASKS),
                 input_scale: float | None = None, settings: SapiensSettings | None = None):
        if size not in SIZES:
            raise ValueError(f"Sapiens2 sizes are {', '.join(SIZES)}; got {size!r}")
        self.size = size
        self.name = self.source = f"sapiens2-{size}"
        self.tasks = tuple(tasks)
        self._init_state(Sapiens2Runner(self), settings, device=device, precision=precision,
                         weights_dir=weights_dir, input_scale=input_scale)
        # < 1 runs the models on a smaller input (a fast preview, e.g. 0.5 -> 512x384: ~4x fewer
        # tokens) for seg, normal and pose; Sapiens2's RoPE positions accept any multiple of the
        # patch size. The pointmap keeps its native size (see input_hw).
        scale = self.settings.input_scale
        if not 0.1 <= scale <= 1.0:
            raise ValueError(f"input_scale must lie in [0.1, 1], got {scale}")
        self.input_scale = scale
        self._native_hw: dict = {}

    # --- loading (the rest of the lifecycle is SapiensTaskBackend's) ---------------------------
    def _task_label(self, task: str) -> str:
        return repo_id(task, self.size)

    def _load_task(self, task, progress, cancel):
        import transformers

        repo = repo_id(task, self.size)
        folder, config = self._fetch(task, progress, cancel)
        cls = getattr(transformers, TASKS[task][1])
        try:
            model = cls.from_pretrained(str(folder), config=config, attn_implementation="sdpa")
        except RuntimeError as exc:
            if devices.is_out_of_memory(exc):
                raise self._oom(task, exc) from exc
            raise weights.corrupt_weights_error(folder, exc) from exc
        except (OSError, ValueError) as exc:
            if getattr(exc, "errno", None) == 28:
                raise BackendError(f"disk full while loading {repo}", status=507) from exc
            raise weights.corrupt_weights_error(folder, exc) from exc
        except Exception as exc:  # safetensors raises its own error type for truncated files
            if type(exc).__name__ == "SafetensorError":
                raise weights.corrupt_weights_error(folder, exc) from exc
            raise
        try:
            model = devices.prepare_model(model, self.placement)
        except RuntimeError as exc:
            if devices.is_out_of_memory(exc):
                raise self._oom(task, exc) from exc
            raise
        if task in FLOAT32_HEADS:
            model = devices.regression_heads(model, self.placement)
        if self.placement.compile:
            # The backbone only: compiling the heads too saved 6 ms per photo on an H200 for ~24 s
            # of compiling per batch shape (docs/performance.md, third lease): a loss below
            # thousands of photos.
            model.model = _compiled(model.model)
        self._native_hw[task] = native_input_hw(folder, model.config)
        return model

    def _fetch(self, task, progress, cancel):
        """(folder, None) for a transformers-format repo; (folder of the file, config rebuilt from
        it) for a repo holding only the original ``sapiens2_*`` file (sapiens2_original.py)."""
        repo = repo_id(task, self.size)
        try:
            return weights.fetch_transformers_repo(repo, progress, cancel, self.weights_dir), None
        except BackendError as no_config:
            if no_config.status not in (404, 503):  # 404: no config.json; 503: none cached offline
                raise
            name = sapiens2_original.original_filename(TASKS[task][0], self.size)
            try:
                path = weights.fetch_file(repo, name, progress, cancel, self.weights_dir)
            except BackendError:
                raise no_config from None
        log.info("%s: no config.json; building the config from the original file %s", repo, name)
        try:  # the input size, where the repo has a preprocessor config; else the released 1024x768
            pre = weights.fetch_file(repo, "preprocessor_config.json", progress, cancel, self.weights_dir)
            hw = native_input_hw(pre.parent, SimpleNamespace(image_size=list(DEFAULT_INPUT_HW)))
        except BackendError:
            hw = DEFAULT_INPUT_HW
        return path.parent, sapiens2_original.config_for(path, TASKS[task][1], self.size, hw)

    def _oom(self, task, exc):
        self.unload()
        return BackendError(
            f"out of memory loading {self.name} ({task}) on {self.placement.device}: use a smaller size "
            "(sapiens2-0.4b / 0.8b) or the CPU (SAPIENS_DEVICE=cpu)", status=503)

    def input_hw(self, task) -> tuple[int, int]:
        config = self.models[task].config
        hw = self._native_hw.get(task) or native_input_hw(None, config)
        if self.input_scale == 1.0 or task == "depth":
            # The pointmap's scale branch flattens a fixed-size feature grid: native size only.
            return hw
        patch = config.patch_size if isinstance(config.patch_size, int) else config.patch_size[0]
        # keep at least 2 patches per side so the heads' strided layers still have a grid
        return tuple(max(2 * patch, int(round(v * self.input_scale / patch)) * patch) for v in hw)

    def describe(self) -> dict:
        return {
            "family": "sapiens2",
            "size": self.size,
            "repos": [repo_id(t, self.size) for t in self.tasks],
            "device": self.placement.describe() if self.placement else "not loaded",
            **self._people_facts(),
            "metric": True,
            "input_scale": self.input_scale,
        }


def native_input_hw(folder, config) -> tuple[int, int]:
    """The model's input (H, W): the repo's preprocessor size, else the config's image_size unless
    it is the library default (224, which the task repos may leave unset), else 1024x768."""
    import json

    if folder is not None:
        try:
            size = json.loads((Path(folder) / "preprocessor_config.json").read_text(encoding="utf-8"))["size"]
            return int(size["height"]), int(size["width"])
        except (OSError, ValueError, KeyError, TypeError):
            pass
    size = config.image_size
    hw = (int(size[0]), int(size[1])) if isinstance(size, (list, tuple)) else (int(size), int(size))
    return DEFAULT_INPUT_HW if hw == (224, 224) else hw


def _compiled(module, mode: str | None = None):
    """torch.compile (``mode`` as torch.compile's: None/"default", "reduce-overhead" = CUDA graphs,
    "max-autotune-no-cudagraphs"...), falling back to eager if a call fails (an unsupported
    platform: compile errors surface on the first call). ``.failed`` then says why."""
    import torch

    compiled = torch.compile(module, dynamic=False, mode=None if mode in (None, "default") else mode)
    state = {"fn": compiled}

    class Guard(torch.nn.Module):
        failed: str | None = None

        def __init__(self):
            super().__init__()
            self.inner = module

        def forward(self, *args, **kwargs):
            try:
                return state["fn"](*args, **kwargs)
            except Exception as exc:  # compile errors surface on first call
                if state["fn"] is module:
                    raise
                log.warning("torch.compile failed (%s); running eager", exc)
                Guard.failed = f"{type(exc).__name__}: {str(exc).strip().splitlines()[0] if str(exc).strip() else ''}"
                state["fn"] = module
                return module(*args, **kwargs)

    return Guard()


def register_all(settings: SapiensSettings | None = None) -> None:
    """Register ``sapiens2-{size}`` for every size (nothing is loaded or downloaded here)."""
    for size in SIZES:
        register(f"sapiens2-{size}", lambda size=size: Sapiens2Backend(size, settings=settings))
