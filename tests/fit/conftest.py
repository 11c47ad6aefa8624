# SPDX-License-Identifier: GPL-3.0-or-later
"""Fit fixtures: the body model is loaded once per test session (its first load on a machine
builds anny's ~0.8 GB cache, ~80 s)."""

import os
import sys
from pathlib import Path

import pytest

if os.environ.get("CI"):  # a missing install step must fail under CI, not skip
    import anny  # noqa: F401
    import torch  # noqa: F401
else:
    pytest.importorskip("anny", reason="anny is needed for the body fit")

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "groundtruth"))


@pytest.fixture(scope="session")
def body():
    from inference_server.fit.body_model import BodyModel

    return BodyModel.load()


@pytest.fixture(scope="session")
def body_model_scene(body):
    """A small ground-truth scene: one person, arms bent, 160x120 pixels."""
    import scenes

    return scenes.make_scene("arms_bent", "average", 0.0, size=(160, 120))
