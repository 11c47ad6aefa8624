# SPDX-License-Identifier: GPL-3.0-or-later
"""Names of the temporary files that atomic writes use, and their clean-up (stdlib only).

An output is written as ``.<stem>.sapiens-tmp-<pid><suffix>`` in the target folder, then moved
into place with ``os.replace``; the mark lets an interrupted batch find and remove leftovers.
"""

from __future__ import annotations

import os
from pathlib import Path

TEMP_MARK = ".sapiens-tmp"


def temp_path_for(path: str | os.PathLike) -> Path:
    """Temporary sibling of ``path``; the real suffix stays last (exporters append theirs otherwise)."""
    path = Path(path)
    return path.with_name(f".{path.stem}{TEMP_MARK}-{os.getpid()}{path.suffix}")


def remove_stale_temp_files(folder: str | os.PathLike) -> list[Path]:
    """Delete temporary files an interrupted write left in ``folder``; returns them."""
    removed = []
    for p in Path(folder).glob(f".*{TEMP_MARK}*"):
        if p.is_file():
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed
