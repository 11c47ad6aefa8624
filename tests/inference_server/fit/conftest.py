# SPDX-License-Identifier: GPL-3.0-or-later
"""The fit's tests need anny and torch: without them this folder is skipped (under CI it fails,
tests/conftest.py). The body model itself is the session fixture ``body`` (tests/support)."""

import os

import pytest

if os.environ.get("CI"):  # a missing install step must fail under CI, not skip
    import anny  # noqa: F401
    import torch  # noqa: F401
else:
    pytest.importorskip("anny", reason="anny is needed for the body fit")
