# SPDX-License-Identifier: GPL-3.0-or-later
"""Where things are, for tests wherever they sit: the repository root and this support folder
(what a subprocess needs on its PYTHONPATH to import the test helpers, e.g. ``--backend-module``)."""

from pathlib import Path

SUPPORT = Path(__file__).resolve().parent
REPO = SUPPORT.parents[1]
