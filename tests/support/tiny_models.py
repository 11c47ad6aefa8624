# SPDX-License-Identifier: GPL-3.0-or-later
"""Tiny random-weight Sapiens models laid out exactly like the real hub repos (nothing downloaded).

- Sapiens2: one ``transformers`` model per task (hidden 32, 2 layers, 64x48 input) saved with
  ``save_pretrained`` into a Hugging Face cache for the real repo ids
  (``models--facebook--sapiens2-seg-0.4b/{blobs,snapshots/<commit>,refs/main}``), so the backends
  load them through their real path with ``HF_HUB_OFFLINE=1`` and ``HF_HUB_CACHE`` pointed here.
- Sapiens v1: one TorchScript module per task, fully convolutional (any input size; output at the
  real models' resolution ratios), saved under the exact v1 file name in the repo
  ``facebook/sapiens-{task}-{size}-torchscript``.

Deterministic knobs (the random weights give meaningless maps): ``person`` makes the segmentation
call every pixel person (True) or background (False); the pointmap is a constant plane at
``PLANE_Z`` metres with scale 1.

Use: ``build_tiny_hub(cache_dir)`` once per session (helpers below are pytest-free), then set
``HF_HUB_CACHE=cache_dir`` and ``HF_HUB_OFFLINE=1`` in the process that loads them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
from pathlib import Path

PLANE_Z = 2.0
SAPIENS2_SIZE = "0.4b"
SAPIENS1_SIZE = "0.3b"
TINY_INPUT_HW = (64, 48)

_BASE = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
             num_key_value_attention_heads=1, num_first_full_attention_layers=1,
             num_last_full_attention_layers=1, image_size=list(TINY_INPUT_HW), patch_size=16)
_PIXEL_SHUFFLE_HEAD = dict(use_pixel_shuffle=True, upsample_out_channels=[16, 8, 8, 8],
                           upsample_kernel_sizes=[3, 3, 3, 3], conv_out_channels=[8, 8],
                           conv_kernel_sizes=[3, 3])
SAPIENS2_TASKS = {
    "seg": ("Sapiens2ForSemanticSegmentation",
            dict(num_labels=29, head_config=dict(upsample_out_channels=[16, 16, 8, 8], conv_out_channels=[8]))),
    "normal": ("Sapiens2ForNormalEstimation", dict(num_labels=3, head_config=_PIXEL_SHUFFLE_HEAD)),
    "pointmap": ("Sapiens2ForPointmapEstimation",
                 dict(num_labels=3, head_config=dict(_PIXEL_SHUFFLE_HEAD, scale_conv_out_channels=[8],
                                                     scale_conv_kernel_sizes=[3],
                                                     scale_final_hidden_sizes=[16, 8]))),
    "pose": ("Sapiens2ForPoseEstimation",
             dict(num_labels=308, head_config=dict(upsample_out_channels=[16, 16], conv_out_channels=[16, 8]))),
}


def _commit_for(folder: Path) -> str:
    digest = hashlib.sha1()
    for f in sorted(folder.iterdir()):
        digest.update(f.name.encode())
        digest.update(f.read_bytes())
    return digest.hexdigest()


def install_in_hub_cache(cache_dir: Path, repo_id: str, files_dir: Path) -> Path:
    """Lay ``files_dir``'s files out as huggingface_hub does for ``repo_id``; returns the snapshot."""
    repo_dir = Path(cache_dir) / ("models--" + repo_id.replace("/", "--"))
    commit = _commit_for(files_dir)
    snapshot = repo_dir / "snapshots" / commit
    (repo_dir / "blobs").mkdir(parents=True, exist_ok=True)
    snapshot.mkdir(parents=True, exist_ok=True)
    (repo_dir / "refs").mkdir(exist_ok=True)
    for f in sorted(files_dir.iterdir()):
        blob_name = hashlib.sha256(f.read_bytes()).hexdigest()
        blob = repo_dir / "blobs" / blob_name
        if not blob.exists():
            shutil.copyfile(f, blob)
        link = snapshot / f.name
        if link.is_symlink() or link.exists():
            link.unlink()
        os.symlink(os.path.join("..", "..", "blobs", blob_name), link)
    (repo_dir / "refs" / "main").write_text(commit)
    return snapshot


def build_sapiens2_task(task: str, out_dir: Path, person: bool = True, seed: int = 0):
    import torch
    import transformers

    cls_name, extra = SAPIENS2_TASKS[task]
    torch.manual_seed(seed)
    config = transformers.Sapiens2Config(**_BASE, **extra)
    model = getattr(transformers, cls_name)(config).eval()
    with torch.no_grad():
        if task == "seg":
            pred = model.decode_head.predictor
            pred.weight.mul_(0.01)
            pred.bias.zero_()
            pred.bias[0] = -8.0 if person else 8.0  # background logit
            pred.bias[22] = 4.0  # Torso wins on "person"
        if task == "pointmap":
            pred = model.decode_head.predictor
            pred.weight.zero_()
            pred.bias.copy_(torch.tensor([0.0, 0.0, PLANE_Z]))
            proj = model.scale_head.predictor.proj
            proj.weight.zero_()
            proj.bias.fill_(1.0)
    model.save_pretrained(str(out_dir))
    (Path(out_dir) / "preprocessor_config.json").write_text(
        '{"image_processor_type": "Sapiens2ImageProcessor", "size": {"height": %d, "width": %d}}'
        % TINY_INPUT_HW)
    return model


def build_tiny_hub(cache_dir: str | os.PathLike, person: bool = True, sapiens2: bool = True,
                   sapiens1: bool = True) -> Path:
    """Build (once; reused when present) a hub cache with every tiny Sapiens2 and v1 repo."""
    cache_dir = Path(cache_dir)
    marker = cache_dir / f".tiny-built-{int(person)}{int(sapiens2)}{int(sapiens1)}"
    if marker.exists():
        return cache_dir
    work = cache_dir.parent / (cache_dir.name + "-build")
    if sapiens2:
        for task in SAPIENS2_TASKS:
            folder = work / f"sapiens2-{task}"
            build_sapiens2_task(task, folder, person=person)
            install_in_hub_cache(cache_dir, f"facebook/sapiens2-{task}-{SAPIENS2_SIZE}", folder)
    if sapiens1:
        from inference_server.backends.sapiens_v1 import checkpoint

        for task in ("seg", "depth", "normal", "pose"):
            repo, filename = checkpoint(task, SAPIENS1_SIZE)
            folder = work / f"sapiens1-{task}"
            folder.mkdir(parents=True, exist_ok=True)
            build_sapiens1_task(task, folder / filename, person=person)
            install_in_hub_cache(cache_dir, repo, folder)
    shutil.rmtree(work, ignore_errors=True)
    marker.write_text("ok")
    return cache_dir


# --- Sapiens v1 ------------------------------------------------------------------------------------
# (output channels, number of x2 upsamplings after the /16 patch grid): seg and normal come out at
# half the input resolution, depth at full, pose heatmaps at a quarter -- as the released models.
SAPIENS1_HEADS = {"seg": (28, 3), "normal": (3, 3), "depth": (1, 4), "pose": (308, 2)}


def build_sapiens1_task(task: str, path: Path, person: bool = True, seed: int = 0):
    import torch
    from torch import nn

    channels, ups = SAPIENS1_HEADS[task]
    torch.manual_seed(seed)

    class TinySapiens1(nn.Module):
        def __init__(self):
            super().__init__()
            self.patch = nn.Conv2d(3, 8, kernel_size=16, stride=16)
            self.up = nn.Sequential(*[nn.Sequential(nn.ConvTranspose2d(8, 8, 4, 2, 1), nn.SiLU())
                                      for _ in range(ups)])
            self.head = nn.Conv2d(8, channels, 1)

        def forward(self, x):
            return self.head(self.up(self.patch(x)))

    model = TinySapiens1().eval()
    with torch.no_grad():
        if task == "seg":
            model.head.weight.mul_(0.01)
            model.head.bias.zero_()
            model.head.bias[0] = -8.0 if person else 8.0
            model.head.bias[21] = 4.0  # v1 Torso
    import warnings

    with warnings.catch_warnings():  # the released v1 files are TorchScript, so ours must be too
        warnings.simplefilter("ignore", DeprecationWarning)
        scripted = torch.jit.script(model)
        scripted.save(str(path))
    return scripted


# --- helpers for tests ----------------------------------------------------------------------------
def photo(h=120, w=90, seed=0):
    """A random RGB photo (the tiny models' maps do not depend on its content)."""
    import numpy as np

    return (np.random.default_rng(seed).random((h, w, 3)) * 255).astype(np.uint8)


def as_maps(out: dict):
    """A backend's output dict -> validated Maps (BYTES/BOOL as the server would send them)."""
    import numpy as np

    from sapiens_blender.core.maps.canonical import Maps

    arrays = dict(out)
    arrays["part_names"] = np.asarray([str(n) for n in out["part_names"]])
    arrays["source"] = str(out["source"][0])
    arrays["metric"] = bool(out["metric"][0])
    arrays["notes"] = str(out["notes"][0])
    return Maps.from_arrays(arrays)


# --- pytest fixtures (import them by name into a test module) ----------------------------------
try:
    import pytest
except ImportError:  # building caches from a plain script needs no pytest
    pytest = None

if pytest is not None:

    @pytest.fixture(scope="session")
    def tiny_hub(tmp_path_factory) -> Path:
        """A hub cache with every tiny Sapiens2 (0.4b) and Sapiens v1 (0.3b) repo; people everywhere."""
        return build_tiny_hub(tmp_path_factory.getbasetemp() / "tiny-hub")

    @pytest.fixture(scope="session")
    def tiny_hub_empty_photo(tmp_path_factory) -> Path:
        """The same repos whose segmentation never finds a person."""
        return build_tiny_hub(tmp_path_factory.getbasetemp() / "tiny-hub-no-person", person=False)

    @pytest.fixture
    def offline_hub(monkeypatch):
        """Point this test's process at a hub cache, offline: ``offline_hub(cache_dir)``."""

        def use(cache_dir):
            monkeypatch.setenv("HF_HUB_OFFLINE", "1")
            monkeypatch.setenv("HF_HUB_CACHE", str(cache_dir))
            monkeypatch.delenv("SAPIENS_WEIGHTS_DIR", raising=False)
            return Path(cache_dir)

        return use


# --- person detector --------------------------------------------------------------------------------
DETECTOR_REPO = "PekingU/rtdetr_r18vd"
DETECTOR_INPUT_HW = (64, 64)


def build_tiny_detector(out_dir: Path, person_score_logit: float = 8.0, labels: dict | None = None,
                        seed: int = 0):
    """A tiny random-weight RT-DETR (the default detector's real architecture and file layout:
    config.json + model.safetensors + preprocessor_config.json). ``person_score_logit`` biases
    every query's person score (high: people everywhere; low: nobody)."""
    import json

    import torch
    from transformers import RTDetrConfig, RTDetrForObjectDetection, RTDetrResNetConfig

    torch.manual_seed(seed)
    labels = labels or {i: ("person" if i == 0 else f"class{i}") for i in range(80)}
    backbone = RTDetrResNetConfig(embedding_size=8, hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1],
                                  layer_type="basic", out_indices=[2, 3, 4])
    config = RTDetrConfig(backbone_config=backbone, encoder_in_channels=[16, 32, 64], encoder_hidden_dim=16,
                          d_model=16, decoder_in_channels=[16, 16, 16], encoder_ffn_dim=32, decoder_ffn_dim=32,
                          num_queries=12, decoder_layers=1, encoder_attention_heads=2, decoder_attention_heads=2,
                          num_denoising=0, id2label=labels)
    model = RTDetrForObjectDetection(config).eval()
    person = [k for k, v in labels.items() if v == "person"]
    with torch.no_grad():
        for head in model.model.decoder.class_embed:
            head.weight.mul_(0.01)
            head.bias.fill_(-8.0)
            if person:
                head.bias[person[0]] = person_score_logit
    model.save_pretrained(str(out_dir))
    (Path(out_dir) / "preprocessor_config.json").write_text(json.dumps({
        "image_processor_type": "RTDetrImageProcessor", "do_resize": True, "do_rescale": True,
        "rescale_factor": 1 / 255, "do_normalize": False,
        "size": {"height": DETECTOR_INPUT_HW[0], "width": DETECTOR_INPUT_HW[1]}}))
    return model
