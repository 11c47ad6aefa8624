# SPDX-License-Identifier: GPL-3.0-or-later
"""The model settings of one server run, read once and passed down (backends never read the
environment themselves).

``python -m inference_server`` builds one from its flags over the environment; the environment
variables stay the interface for a server started by someone else (the add-on, a service file):

=====================  ==========================  ===========================================
field                  variable                    meaning
=====================  ==========================  ===========================================
device                 SAPIENS_DEVICE              auto | cpu | cuda | cuda:N | mps
precision              SAPIENS_PRECISION           auto | fp32 | bf16 | fp16 | int8
compile                SAPIENS_COMPILE             auto | 1 | 0: torch.compile the backbones
                                                   (auto: on CUDA when triton is installed)
heads                  SAPIENS_HEADS               auto | fp32 | mixed: the depth and normal
                                                   heads under a bf16/fp16 backbone (auto:
                                                   mixed on CUDA with bf16, else fp32)
weights_dir            SAPIENS_WEIGHTS_DIR         local weights folder (<dir>/<repo name>/...)
input_scale            SAPIENS_INPUT_SCALE         Sapiens2 preview input scale in [0.1, 1]
detector               SAPIENS_DETECTOR            person detector repo id, or ``none``
auto_model             SAPIENS_AUTO_MODEL          force what ``auto`` serves
auto_size              SAPIENS_AUTO_SIZE           Sapiens2 size ``auto`` picks (0.4b)
=====================  ==========================  ===========================================

The body fit has its own settings (SAPIENS_FIT_DEVICE, SAPIENS_FIT_COMPILE): fit/settings.py.
Hugging Face's own variables (HF_HOME, HF_HUB_CACHE, HF_HUB_OFFLINE, HF_TOKEN) keep their
meaning: they belong to huggingface_hub and are read where the hub is used (weights.py).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path

DEFAULT_DETECTOR = "PekingU/rtdetr_r18vd"
COMPILE_CHOICES = ("auto", "on", "off")
HEADS_CHOICES = ("auto", "fp32", "mixed")
_SWITCH = {"1": "on", "true": "on", "yes": "on", "on": "on", "0": "off", "false": "off", "no": "off",
           "off": "off", "auto": "auto", "": "auto"}
NO_DETECTOR = ("", "none", "off", "0")


@dataclass(frozen=True)
class SapiensSettings:
    device: str = "auto"
    precision: str = "auto"
    compile: str = "auto"  # auto | on | off (bools and 1/0 are read as on/off)
    heads: str = "auto"  # auto | fp32 | mixed
    weights_dir: Path | None = None
    input_scale: float = 1.0
    detector: str | None = DEFAULT_DETECTOR  # None: people from the mask's connected components
    auto_model: str = ""
    auto_size: str = "0.4b"

    def __post_init__(self):
        # "none"/"off" mean no detector, however the settings were made; folders are Paths
        if isinstance(self.detector, str) and self.detector.strip().lower() in NO_DETECTOR:
            object.__setattr__(self, "detector", None)
        switch = {True: "on", False: "off"}.get(self.compile) if isinstance(self.compile, bool) \
            else _SWITCH.get(str(self.compile).strip().lower())
        if switch is None:
            raise ValueError(f"SAPIENS_COMPILE must be auto, 1 or 0, got {self.compile!r}")
        object.__setattr__(self, "compile", switch)
        heads = str(self.heads).strip().lower()
        if heads not in HEADS_CHOICES:
            raise ValueError(f"SAPIENS_HEADS must be one of {', '.join(HEADS_CHOICES)}, got {self.heads!r}")
        object.__setattr__(self, "heads", heads)
        if self.weights_dir is not None and not isinstance(self.weights_dir, Path):
            object.__setattr__(self, "weights_dir", Path(self.weights_dir).expanduser())

    @classmethod
    def from_env(cls, environ=None, **overrides) -> "SapiensSettings":
        """Settings from the variables above; keyword ``overrides`` that are not None win."""
        env = os.environ if environ is None else environ

        def text(name: str, default: str) -> str:
            return (env.get(name) or "").strip() or default

        try:
            scale = float(text("SAPIENS_INPUT_SCALE", "1"))
        except ValueError:
            raise ValueError(f"SAPIENS_INPUT_SCALE must be a number, got {env.get('SAPIENS_INPUT_SCALE')!r}") from None
        detector = text("SAPIENS_DETECTOR", DEFAULT_DETECTOR)
        folder = text("SAPIENS_WEIGHTS_DIR", "")
        settings = cls(
            device=text("SAPIENS_DEVICE", "auto").lower(),
            precision=text("SAPIENS_PRECISION", "auto").lower(),
            compile=text("SAPIENS_COMPILE", "auto"),
            heads=text("SAPIENS_HEADS", "auto"),
            weights_dir=Path(folder).expanduser() if folder else None,
            input_scale=scale,
            detector=detector,
            auto_model=text("SAPIENS_AUTO_MODEL", ""),
            auto_size=text("SAPIENS_AUTO_SIZE", "0.4b"),
        )
        return settings.replace(**overrides)

    def replace(self, **overrides) -> "SapiensSettings":
        """A copy with the given fields changed (None values are ignored)."""
        changes = {k: v for k, v in overrides.items() if v is not None}
        return dataclasses.replace(self, **changes) if changes else self
