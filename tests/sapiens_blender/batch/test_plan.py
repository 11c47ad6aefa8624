# SPDX-License-Identifier: GPL-3.0-or-later
"""A batch's plan: entries named like photos or maps that are no file are said, not skipped silently."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from repo_paths import REPO
from synthetic_scene import ellipsoid_maps

from sapiens_blender.batch.plan import plan_batch

pytestmark = pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="needs FIFOs and symbolic links")


@pytest.fixture()
def odd_folder(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    ellipsoid_maps(96, 72).save(src / "good.npz")
    (src / "album.jpg").mkdir()  # a folder named like a photo
    os.mkfifo(src / "pipe.png")
    (src / "loop.npz").symlink_to(src / "loop.npz")
    (src / "gone.jpg").symlink_to(tmp_path / "deleted.jpg")
    (src / "linked.npz").symlink_to(src / "good.npz")  # a link to a file: an input like any other
    (src / "notes.txt").write_text("not named like an input: not mentioned")
    return src


def test_entries_that_are_no_file_are_listed_with_why(odd_folder, tmp_path):
    plan = plan_batch(odd_folder, tmp_path / "out", ["glb"], False, lambda outputs: {})
    assert [j["name"] for j in plan.jobs] == ["good", "linked"]
    assert plan.ignored == {
        "album.jpg": "a folder, not a file",
        "pipe.png": "a named pipe (FIFO), not a file",
        "loop.npz": "a symbolic link loop",
        "gone.jpg": f"a dangling symbolic link (to {tmp_path / 'deleted.jpg'}, which does not exist)",
    }


def test_the_batch_report_names_them(odd_folder, tmp_path):
    for name in ("good.npz", "linked.npz"):
        (odd_folder / name).unlink()  # nothing to build: the report alone, in a second
    entry = "import sys; from sapiens_blender.cli import main; sys.exit(main())"
    proc = subprocess.run([sys.executable, "-c", entry, "batch", str(odd_folder), "--out", str(tmp_path / "out")],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("ignored: ")]
    assert lines == ["ignored: album.jpg: a folder, not a file",
                     f"ignored: gone.jpg: a dangling symbolic link (to {tmp_path / 'deleted.jpg'}, which does not exist)",
                     "ignored: loop.npz: a symbolic link loop",
                     "ignored: pipe.png: a named pipe (FIFO), not a file"]
    assert "0 built, 0 already done, 0 failed, 4 ignored (not files)" in proc.stdout
