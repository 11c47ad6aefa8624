# SPDX-License-Identifier: GPL-3.0-or-later
"""The body fit's serving settings of one server run, read once and passed to the fit models
(apart from the Sapiens backends' settings: the fit runs whatever made the maps).

``python -m inference_server`` builds them from ``--fit-device`` / ``--fit-compile`` over the
environment:

===========  ===================  ============================================================
field        variable             meaning
===========  ===================  ============================================================
device       SAPIENS_FIT_DEVICE   auto (GPU if any) | cpu | cuda[:N]: where the body fit runs
compile      SAPIENS_FIT_COMPILE  1: torch.compile the body fit's evaluation
===========  ===================  ============================================================

The solver's own knobs (weights, steps, groups) are ``solver.FitSettings`` (solver_settings.py).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass


@dataclass(frozen=True)
class FitServerSettings:
    # auto = the GPU when there is one: its steps replay as CUDA graphs (0.50 s per person on an
    # H200 against 1.2 s on a 2-core CPU; docs/performance.md)
    device: str = "auto"
    # compiled evaluations: 0.56 instead of 0.63 s per person in groups of two on a 2-core CPU,
    # no faster for one, after compiling (about 2 min the first time, then about 1 min per server
    # start): for batches of groups (docs/body_fit.md)
    compile: bool = False

    @classmethod
    def from_env(cls, environ=None, **overrides) -> "FitServerSettings":
        """Settings from the variables above; keyword ``overrides`` that are not None win."""
        env = os.environ if environ is None else environ
        settings = cls(device=(env.get("SAPIENS_FIT_DEVICE") or "").strip().lower() or "auto",
                       compile=(env.get("SAPIENS_FIT_COMPILE") or "").strip() == "1")
        changes = {k: v for k, v in overrides.items() if v is not None}
        return dataclasses.replace(settings, **changes) if changes else settings
