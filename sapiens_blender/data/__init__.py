# SPDX-License-Identifier: GPL-3.0-or-later
"""Bundled sample data (see README.md here for sources and licenses)."""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent
SAMPLE_PHOTO = DATA_DIR / "astronaut.jpg"


def sample_photo_path() -> Path:
    """The bundled public-domain sample photo (NASA portrait of astronaut Eileen Collins)."""
    return SAMPLE_PHOTO
