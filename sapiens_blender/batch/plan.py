# SPDX-License-Identifier: GPL-3.0-or-later
"""What a batch has to do, whichever engine runs it (stdlib only).

A job is a plain dict (it travels as JSON to local builder processes and pickled to Ray tasks):
``input`` (path), ``name`` (the stem every output and object is named after), ``outputs`` (one
path per format) and ``options`` (BuildOptions fields). Inputs whose outputs all exist are
skipped: outputs are written atomically, so an output that exists is complete.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

PHOTO_SUFFIXES = (".jpg", ".jpeg", ".png", ".webp", ".bmp", ".tif", ".tiff")
FORMATS = ("glb", "blend", "fbx", "gltf")


def find_inputs(folder: Path) -> list[Path]:
    return sorted(p for p in Path(folder).iterdir()
                  if p.is_file() and not p.name.startswith(".") and p.suffix.lower() in PHOTO_SUFFIXES + (".npz",))


def is_photo(job: dict) -> bool:
    """Maps .npz inputs skip the analysis; everything else is a photo."""
    return Path(job["input"]).suffix.lower() != ".npz"


@dataclass
class BatchPlan:
    jobs: list[dict] = field(default_factory=list)  # to build, in input order
    skipped: int = 0  # already done
    failures: dict[str, str] = field(default_factory=dict)  # input file name -> why it cannot be built

    @property
    def total(self) -> int:
        return len(self.jobs) + self.skipped + len(self.failures)


def plan_batch(src: Path, out: Path, formats: list[str], force: bool, options_for) -> BatchPlan:
    """Jobs for every input of ``src``; ``options_for(outputs)`` gives a job's BuildOptions fields."""
    plan, seen = BatchPlan(), {}
    for path in find_inputs(src):
        if path.stem in seen:
            plan.failures[path.name] = f"same name as {seen[path.stem].name}: outputs would collide"
            continue
        seen[path.stem] = path
        outputs = [str(Path(out) / f"{path.stem}.{f}") for f in formats]
        if not force and all(Path(o).exists() for o in outputs):
            plan.skipped += 1
            continue
        plan.jobs.append({"input": str(path), "outputs": outputs, "name": path.stem,
                          "options": options_for(outputs)})
    return plan
