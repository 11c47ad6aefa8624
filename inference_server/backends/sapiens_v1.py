# SPDX-License-Identifier: GPL-3.0-or-later
"""Sapiens v1 backends (``sapiens-0.3b`` ... ``sapiens-2b``) from the TorchScript checkpoints.

Weights: ``facebook/sapiens-{task}-{size}-torchscript`` holding ``<base>_torchscript.pt2`` with
the exact base names of sapiens.md 1.2. Not every size exists for every task: there is no 2B
body-part segmentation (withdrawn) and no 2B 308-keypoint pose; ``sapiens-2b`` therefore runs the
2B depth and normal models with the 1B segmentation and pose (said in ``source`` and the logs).

Processing as the published lite demos: plain resize to 1024x768 (no aspect kept) for the dense
tasks, mean/std (123.5, 116.5, 103.5)/(58.5, 57.0, 57.5) in RGB order, bilinear upsampling of the
outputs to the photo; pose is top-down on the person boxes at the model's 3:4 aspect. Depth is
relative (larger = farther): ``metric`` is false and Z is scaled as processing/depth_scale.py says.
The TorchScript files run in float32 (autocast to bf16/fp16 on CUDA).
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from ..processing.goliath import PART_NAMES_SAPIENS1
from ..processing.normals import SAPIENS_NORMAL_SIGNS
from ..processing.resize_pad import SAPIENS1_MEAN, SAPIENS1_STD
from . import devices, weights
from ..dataplane.base import BackendError, register
from .sapiens_common import SapiensTaskBackend
from .settings import SapiensSettings

log = logging.getLogger(__name__)

SIZES = ("0.3b", "0.6b", "1b", "2b")
INPUT_HW = (1024, 768)  # the TorchScript files are traced at this size
TASKS = ("seg", "depth", "normal", "pose")
BASE_NAMES = {
    "depth": {"0.3b": "sapiens_0.3b_render_people_epoch_100", "0.6b": "sapiens_0.6b_render_people_epoch_70",
              "1b": "sapiens_1b_render_people_epoch_88", "2b": "sapiens_2b_render_people_epoch_25"},
    "normal": {"0.3b": "sapiens_0.3b_normal_render_people_epoch_66",
               "0.6b": "sapiens_0.6b_normal_render_people_epoch_200",
               "1b": "sapiens_1b_normal_render_people_epoch_115",
               "2b": "sapiens_2b_normal_render_people_epoch_70"},
    "seg": {"0.3b": "sapiens_0.3b_goliath_best_goliath_mIoU_7673_epoch_194",
            "0.6b": "sapiens_0.6b_goliath_best_goliath_mIoU_7777_epoch_178",
            "1b": "sapiens_1b_goliath_best_goliath_mIoU_7994_epoch_151"},
    "pose": {"0.3b": "sapiens_0.3b_goliath_best_goliath_AP_573",
             "0.6b": "sapiens_0.6b_goliath_best_goliath_AP_609",
             "1b": "sapiens_1b_goliath_best_goliath_AP_639"},
}
# Where a size has no checkpoint for a task, the size used instead.
FALLBACK_SIZE = {("seg", "2b"): "1b", ("pose", "2b"): "1b"}


def checkpoint(task: str, size: str) -> tuple[str, str]:
    """(hub repo id, file name) of the TorchScript checkpoint; KeyError if it was never released."""
    base = BASE_NAMES[task].get(size)
    if base is None:
        raise KeyError(f"Sapiens v1 has no {size} {task} checkpoint (released sizes: "
                       f"{', '.join(BASE_NAMES[task])})")
    return f"facebook/sapiens-{task}-{size}-torchscript", f"{base}_torchscript.pt2"


def size_for(task: str, size: str) -> str:
    return FALLBACK_SIZE.get((task, size), size)


def weights_available(size: str, task: str | None = None, weights_dir=None) -> bool:
    if size not in SIZES:
        return False
    try:
        return all(weights.cached_or_downloadable(*_repo_and_files(t, size), weights_dir=weights_dir) for t in ([task] if task else TASKS))
    except Exception:
        return False


def _repo_and_files(task, size):
    repo, filename = checkpoint(task, size_for(task, size))
    return repo, [filename]


class Sapiens1Runner:
    metric = False
    part_names = PART_NAMES_SAPIENS1
    normal_signs = SAPIENS_NORMAL_SIGNS  # model normal axes -> canonical frame (see normals.py)
    mean, std = SAPIENS1_MEAN, SAPIENS1_STD
    pose_input_hw = INPUT_HW

    def __init__(self, backend: "Sapiens1Backend"):
        self.b = backend

    @property
    def source(self):
        return self.b.source

    def _forward(self, task, x):
        import torch

        p = self.b.placement
        x = x.to(p.device, torch.float32)
        try:
            with torch.inference_mode():
                if p.device.startswith("cuda") and p.precision in ("bf16", "fp16"):
                    with torch.autocast("cuda", dtype=p.dtype):
                        return self.b.models[task](x).float()
                return self.b.models[task](x).float()
        except RuntimeError as exc:
            if devices.is_out_of_memory(exc):
                devices.free_memory()
                raise BackendError(f"out of memory running {self.b.name} {task} on {p.device}: try a smaller "
                                   "size (sapiens-0.3b) or the CPU (SAPIENS_DEVICE=cpu)", status=503) from exc
            raise

    def _dense_batch(self, task, photos, hws) -> list:
        """One forward for several photos (plain resize to the model input), each back to its grid."""
        import torch

        from ..processing.resize_pad import plan_input, to_model_input, to_photo_grid

        plans = [plan_input(p.shape[-2:], INPUT_HW, keep_aspect=False) for p in photos]
        out = self._forward(task, torch.cat([to_model_input(p, plan, self.mean, self.std)
                                             for p, plan in zip(photos, plans)]))
        return [to_photo_grid(out[i:i + 1], plan, hw) for i, (plan, hw) in enumerate(zip(plans, hws))]

    def segment_batch(self, photos, hws):
        from ..processing.resize_pad import class_labels

        out = []
        for logits in self._dense_batch("seg", photos, hws):
            if logits.shape[1] == 1:  # single-channel foreground model: sigmoid > 0.3 as the lite demo
                out.append((logits[0, 0].sigmoid() > 0.3).cpu().numpy().astype(np.uint8))
            else:
                out.append(class_labels(logits))
        return out

    # Depth and normals stay on the device (the pipeline post-processes them there).
    def depth_batch(self, photos, hws):
        return [d[0, 0] for d in self._dense_batch("depth", photos, hws)]

    def normals_batch(self, photos, hws):
        import torch.nn.functional as F

        return [F.normalize(n, dim=1, eps=1e-8)[0].permute(1, 2, 0) for n in self._dense_batch("normal", photos, hws)]

    def pose(self, crops):
        return self._forward("pose", crops)  # stays on the device (the pipeline decodes there)


class Sapiens1Backend(SapiensTaskBackend):
    platform = "pytorch_torchscript"

    def __init__(self, size: str, device: str | None = None, precision: str | None = None,
                 weights_dir: str | Path | None = None, tasks: tuple[str, ...] = TASKS,
                 settings: SapiensSettings | None = None):
        if size not in SIZES:
            raise ValueError(f"Sapiens v1 sizes are {', '.join(SIZES)}; got {size!r}")
        self.size = size
        self.name = f"sapiens-{size}"
        fallbacks = sorted({t for t in tasks if size_for(t, size) != size})
        self.source = self.name + (f" ({', '.join(fallbacks)}: {size_for(fallbacks[0], size)})" if fallbacks else "")
        self.tasks = tuple(tasks)
        self._init_state(Sapiens1Runner(self), settings, device=device, precision=precision,
                         weights_dir=weights_dir)

    def _placement(self) -> devices.Placement:
        placement = super()._placement()
        if placement.device == "cpu" and placement.precision != "fp32":
            # TorchScript graphs are traced in fp32; bf16/int8 rewrites do not apply to them.
            log.info("%s: TorchScript runs in fp32 on the CPU (asked %s)", self.name, placement.precision)
            placement = devices.Placement("cpu", "fp32")
        for fallback_task in (t for t in self.tasks if size_for(t, self.size) != self.size):
            log.warning("%s: no %s %s checkpoint was released; using the %s one", self.name,
                        self.size, fallback_task, size_for(fallback_task, self.size))
        return placement

    def _task_label(self, task: str) -> str:
        return "/".join(checkpoint(task, size_for(task, self.size)))

    def _load_task(self, task, progress, cancel):
        repo, filename = checkpoint(task, size_for(task, self.size))
        return self._load_file(weights.fetch_file(repo, filename, progress, cancel, self.weights_dir), task)

    def _load_file(self, path: Path, task: str):
        import torch

        import warnings

        try:
            with warnings.catch_warnings():  # TorchScript is deprecated upstream; these files need it
                warnings.simplefilter("ignore", DeprecationWarning)
                model = torch.jit.load(str(path), map_location=self.placement.device)
        except RuntimeError as exc:
            if devices.is_out_of_memory(exc):
                self.unload()
                raise BackendError(f"out of memory loading {self.name} {task}: use a smaller size or the CPU "
                                   "(SAPIENS_DEVICE=cpu)", status=503) from exc
            raise weights.corrupt_weights_error(path, exc) from exc
        except (OSError, ValueError) as exc:
            raise weights.corrupt_weights_error(path, exc) from exc
        return model.eval()

    def describe(self) -> dict:
        return {
            "family": "sapiens",
            "size": self.size,
            "files": ["/".join(checkpoint(t, size_for(t, self.size))) for t in self.tasks],
            "device": self.placement.describe() if self.placement else "not loaded",
            **self._people_facts(),
            "metric": False,
            "depth_scaling": "relative depth placed at a nominal distance (1.7 m tall person), 0.5 m relief",
        }


def register_all(settings: SapiensSettings | None = None) -> None:
    """Register ``sapiens-{size}`` for every size (nothing is loaded or downloaded here)."""
    for size in SIZES:
        register(f"sapiens-{size}", lambda size=size: Sapiens1Backend(size, settings=settings))
