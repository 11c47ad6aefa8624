# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared test configuration. Tests never need ../shared and never download anything.

The tests mirror the packages (``tests/sapiens_blender/core/maps/`` tests
``sapiens_blender/core/maps/``...); their helpers live in ``tests/support/`` (on the path through
pyproject's ``pythonpath``), and so do the session fixtures imported below: ONE real server
subprocess and ONE plain body-fit server (``server_fixtures``) and ONE body-model load (``anny_fixtures``). The markers ``bpy``,
``torch`` and ``anny`` say what a test module needs (``-m "not bpy"`` leaves those out).

Under CI (the environment variable ``CI`` set), the test install has every optional package,
so ``pytest.importorskip`` of one of them must not turn a whole suite green by skipping it: a
missing bpy, torch, anny... fails instead. Elsewhere (a developer's partial install) it skips.
"""

import importlib
import os

import pytest
from anny_fixtures import body, body_model, body_model_scene, body_scene, gt_scene, scan_case  # noqa: F401
from server_fixtures import alive_after, fit_server, server  # noqa: F401

# Nothing in the test suite may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

# What `scripts/install.sh test` installs: under CI each must import.
REQUIRED_UNDER_CI = frozenset({
    "bpy", "torch", "anny", "transformers", "mediapipe", "PIL", "scipy", "trimesh", "embreex",
    "tritonclient", "schemathesis", "psutil", "ml_dtypes",
})
_skipping_importorskip = pytest.importorskip


def importorskip(modname: str, *args, **kwargs):
    """``pytest.importorskip``, except that under CI a required package must import."""
    if os.environ.get("CI") and modname.split(".")[0] in REQUIRED_UNDER_CI:
        try:
            return importlib.import_module(modname)
        except ImportError as exc:
            pytest.fail(f"{modname} is required under CI (scripts/install.sh test installs it) "
                        f"but cannot be imported: {exc}", pytrace=False)
    return _skipping_importorskip(modname, *args, **kwargs)


# Tests call pytest.importorskip at module level; route every call through the rule above.
pytest.importorskip = importorskip
