# SPDX-License-Identifier: GPL-3.0-or-later
"""Fitted-body fixtures: bodies made directly by the fit's body model (anny), placed in a camera,
ray-cast into exact maps (tests/groundtruth/scenes.py). The body model loads once per session."""

import os
import sys
from pathlib import Path

import pytest

if os.environ.get("CI"):  # a missing install step must fail under CI, not skip
    import anny  # noqa: F401
else:
    pytest.importorskip("anny", reason="anny is needed to make fitted bodies")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "groundtruth"))

import body_scenes  # noqa: E402


@pytest.fixture(scope="session")
def body_scene():
    """Factory: body_scene(name) -> body_scenes.BodyScene (cached per name)."""
    cache = {}

    def get(name: str = "standing"):
        if name not in cache:
            cache[name] = body_scenes.make(name)
        return cache[name]

    return get
