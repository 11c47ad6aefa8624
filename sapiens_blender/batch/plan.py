# SPDX-License-Identifier: GPL-3.0-or-later
"""What a batch has to do, whichever engine runs it (stdlib only).

A job is a plain dict (it travels as JSON to local builder processes and pickled to Ray tasks):
``input`` (path), ``name`` (the stem every output and object is named after), ``outputs`` (one
path per format) and ``options`` (BuildOptions fields). Inputs whose outputs all exist are
skipped: outputs are written atomically, so an output that exists is complete.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path

PHOTO_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff")
FORMATS = ("glb", "blend", "fbx", "gltf")


def find_inputs(folder: Path, ignored: dict[str, str] | None = None) -> list[Path]:
    """The photos and maps files of ``folder``, by name. Entries named like one that are not a
    readable regular file (a folder, a FIFO, a link loop or a dangling link) are left out, and
    ``ignored`` gets why, by name: a batch says so instead of skipping them silently."""
    found = []
    for p in Path(folder).iterdir():
        if p.name.startswith(".") or p.suffix.lower() not in PHOTO_SUFFIXES + (".npz",):
            continue
        why = not_a_file(p)
        if why is None:
            found.append(p)
        elif ignored is not None:
            ignored[p.name] = why
    return sorted(found)


def not_a_file(path: Path) -> str | None:
    """Why ``path`` cannot be an input (it is not a regular file, or a link to one), or None."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            return "a symbolic link loop"
        if os.path.islink(path):
            return f"a dangling symbolic link (to {os.readlink(path)}, which does not exist)"
        return f"cannot be read ({exc.strerror or exc})"
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a folder, not a file"
    if stat.S_ISFIFO(mode):
        return "a named pipe (FIFO), not a file"
    return "not a regular file (a socket or a device)"


def find_scans(folder: Path) -> list[Path]:
    """``batch --scan``: every (non-hidden) sub-folder is one person's views (photos, frames or maps)."""
    return sorted(p for p in Path(folder).iterdir() if p.is_dir() and not p.name.startswith("."))


def is_photo(job: dict) -> bool:
    """Maps .npz inputs skip the analysis; everything else is a photo."""
    return Path(job["input"]).suffix.lower() != ".npz"


@dataclass
class BatchPlan:
    jobs: list[dict] = field(default_factory=list)  # to build, in input order
    skipped: int = 0  # already done
    failures: dict[str, str] = field(default_factory=dict)  # input file name -> why it cannot be built
    ignored: dict[str, str] = field(default_factory=dict)  # names like inputs that are no file -> why

    @property
    def total(self) -> int:
        return len(self.jobs) + self.skipped + len(self.failures)


def plan_batch(src: Path, out: Path, formats: list[str], force: bool, options_for, scan: bool = False) -> BatchPlan:
    """Jobs for every input of ``src`` (``scan``: every sub-folder, one scanned person each);
    ``options_for(outputs)`` gives a job's BuildOptions fields."""
    plan, seen = BatchPlan(), {}
    for path in find_scans(src) if scan else find_inputs(src, plan.ignored):
        if path.stem in seen:
            plan.failures[path.name] = f"same name as {seen[path.stem].name}: outputs would collide"
            continue
        seen[path.stem] = path
        outputs = [str(Path(out) / f"{path.stem}.{f}") for f in formats]
        if not force and all(Path(o).exists() for o in outputs):
            plan.skipped += 1
            continue
        plan.jobs.append({"input": str(path), "outputs": outputs, "name": path.stem,
                          "options": options_for(outputs), **({"scan": True} if scan else {})})
    return plan
