# SPDX-License-Identifier: GPL-3.0-or-later
"""A tiny random-weight Sapiens2 segmentation model served as a real backend, for server tests.

Loaded into the real server subprocess with ``--backend-module tiny_backend`` (tests/support on
PYTHONPATH). It runs the genuine ``transformers`` Sapiens2ForSemanticSegmentation code path
(a few thousand weights, 64x48 input) and returns valid canonical maps: parts and mask from the
segmentation, unknown (NaN) depth/normal, no people's keypoints.
"""

from __future__ import annotations

import numpy as np

from inference_server.dataplane import base
from inference_server.processing.goliath import PART_NAMES_SAPIENS2
from inference_server.processing.image_io import fit_max_side

NAME = "tiny-sapiens2-seg"
INPUT_HW = (64, 48)  # the real models take 1024x768; same aspect, 16x smaller


class TinySapiens2Seg(base.Backend):
    name = NAME
    platform = "transformers"

    def __init__(self) -> None:
        self._model = None

    @property
    def loaded(self) -> bool:
        return self._model is not None

    def load(self, progress=base.no_progress, cancel=None) -> None:
        if self._model is not None:
            return
        progress("load", 0.1, "importing torch and transformers")
        import torch
        from transformers import Sapiens2Config, Sapiens2ForSemanticSegmentation

        if cancel is not None:
            cancel.check()
        progress("load", 0.6, "building the tiny random-weight model")
        torch.manual_seed(0)
        config = Sapiens2Config(
            hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
            num_key_value_attention_heads=2, num_first_full_attention_layers=1,
            num_last_full_attention_layers=1, num_register_tokens=0, image_size=list(INPUT_HW),
            patch_size=16, num_labels=len(PART_NAMES_SAPIENS2),
            head_config=dict(upsample_out_channels=[16, 16], conv_out_channels=[16],
                             conv_kernel_sizes=[1]))
        self._model = Sapiens2ForSemanticSegmentation(config).eval()

    def unload(self) -> None:
        self._model = None

    def analyze(self, image, options, progress=base.no_progress, cancel=None):
        import torch
        import torch.nn.functional as F

        token = cancel or base.CancelToken()
        image = fit_max_side(image, options.max_side)
        h, w = image.shape[:2]
        progress("seg", 0.0, "segmenting body parts")
        x = torch.from_numpy(np.ascontiguousarray(image)).permute(2, 0, 1)[None].float()
        x = F.interpolate(x, size=INPUT_HW, mode="bilinear", align_corners=False)
        mean = torch.tensor([123.675, 116.28, 103.53]).view(1, 3, 1, 1)
        std = torch.tensor([58.395, 57.12, 57.375]).view(1, 3, 1, 1)
        x = (x - mean) / std
        with torch.no_grad():
            logits = self._model(pixel_values=x).logits
            if options.flip_test:
                token.check()
                logits = 0.5 * (logits + self._model(pixel_values=x.flip(-1)).logits.flip(-1))
        token.check()
        logits = F.interpolate(logits, size=(h, w), mode="bilinear", align_corners=False)
        parts = logits.argmax(1)[0].numpy().astype(np.uint8)
        progress("seg", 1.0, "segmented")
        f = float(max(h, w))  # a ~53 degree field of view when nothing better is known
        intrinsics = np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1]], np.float32)
        return {
            "image": image,
            "mask": (parts > 0).astype(np.uint8),
            "parts": parts,
            "part_names": list(PART_NAMES_SAPIENS2),
            "normal": np.full((h, w, 3), np.nan, np.float32),
            "depth": np.full((h, w), np.nan, np.float32),
            "metric": False,
            "intrinsics": intrinsics,
            "keypoints": np.zeros((0, 308, 3), np.float32),
            "source": NAME,
        }


def register_all() -> None:
    base.register(NAME, TinySapiens2Seg)
