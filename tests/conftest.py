# SPDX-License-Identifier: GPL-3.0-or-later
"""Shared test configuration. Tests never need ../shared and never download anything."""

import os

# Nothing in the test suite may reach a model hub.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
