# SPDX-License-Identifier: GPL-3.0-or-later
"""The user's cache of body templates: one ``.npz`` per body-model version, written atomically
(a template is constant per version, so it crosses the wire once)."""

from __future__ import annotations

import os
import re
import tempfile
from pathlib import Path

import numpy as np

from .records import BodyTemplate


def cache_folder() -> Path:
    """``$XDG_CACHE_HOME/sapiens_blender/body`` (default ``~/.cache/sapiens_blender/body``)."""
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "sapiens_blender" / "body"


def cache_path(version: str) -> Path:
    safe = re.sub(r"[^A-Za-z0-9._-]+", "_", version).strip("._") or "body"
    return cache_folder() / f"{safe}.npz"


def load_cached_template(version: str) -> BodyTemplate | None:
    """The cached template of ``version``, or None (absent, unreadable or of another version)."""
    path = cache_path(version)
    try:
        with np.load(path, allow_pickle=False) as npz:
            template = BodyTemplate.from_arrays({k: npz[k] for k in npz.files})
    except (OSError, ValueError, KeyError, EOFError):  # absent or damaged: fetch it again
        return None
    return template if template.body_version == version else None


def save_cached_template(template: BodyTemplate) -> Path:
    """Write the template to the cache atomically (temp file + rename)."""
    path = cache_path(template.body_version)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.stem}.", suffix=".npz.tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            np.savez_compressed(fh, **template.to_arrays())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
