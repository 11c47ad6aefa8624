# SPDX-License-Identifier: GPL-3.0-or-later
"""`build PHOTO` and `batch` on photos through a real inference server (a numpy test backend)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("bpy")
Image = pytest.importorskip("PIL.Image")

from sapiens_blender.core.local_server.process import ServerProcess  # noqa: E402
from repo_paths import REPO, SUPPORT

pytestmark = [pytest.mark.bpy]

ENTRY = "import sys; from sapiens_blender.cli import main; sys.exit(main())"


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    manager = ServerProcess(sys.executable, ["--backend-module", "ellipsoid_backend",
                                                "--backend-module", "faulty_backend"],
                            log_dir=tmp_path_factory.mktemp("server-log"),
                            env={"PYTHONPATH": os.pathsep.join([str(REPO), str(SUPPORT)])})
    client = manager.ensure_running()
    yield manager.url, client.token
    manager.stop()


def cli(*args):
    return subprocess.run([sys.executable, "-c", ENTRY, *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


def write_photo(path: Path, w=128, h=96, seed=0):
    rng = np.random.default_rng(seed)
    Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path)


def test_build_photo_through_the_server(server, tmp_path):
    url, token = server
    write_photo(tmp_path / "me.png")
    proc = cli("build", tmp_path / "me.png", "--server", url, "--token", token, "--model", "ellipsoid",
               "-o", tmp_path / "me.glb", "--save-maps", tmp_path / "me.npz")
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert "people: 1" in proc.stdout and "analysis " in proc.stdout
    assert (tmp_path / "me.glb").stat().st_size > 0 and (tmp_path / "me.npz").is_file()
    wrong = cli("build", tmp_path / "me.png", "--server", url, "--token", "wrong", "--model", "ellipsoid",
                "-o", tmp_path / "no.glb")
    assert wrong.returncode == 1 and "error:" in wrong.stderr and not (tmp_path / "no.glb").exists()


def test_a_photo_with_nobody_says_so(server, tmp_path):
    """A photo where the model finds nobody: one clear error naming the backend, nothing
    written, and no second request asking the server to fit an empty mask."""
    url, token = server
    # a first pixel whose red is 0: the faulty backend's "valid maps" mode, an empty mask
    Image.fromarray(np.zeros((96, 128, 3), np.uint8)).save(tmp_path / "empty.png")
    proc = cli("build", tmp_path / "empty.png", "--body", "--server", url, "--token", token, "--model", "faulty",
               "-o", tmp_path / "empty.glb")
    assert proc.returncode == 1, proc.stdout
    assert "no person found by faulty: nothing to build" in proc.stderr, proc.stderr
    assert "refused" not in proc.stderr and not (tmp_path / "empty.glb").exists()


@pytest.mark.slow
def test_batch_photos_share_one_server(server, tmp_path):
    url, token = server
    src = tmp_path / "photos"
    src.mkdir()
    for i in range(3):
        write_photo(src / f"p{i}.jpg", seed=i)
    proc = cli("batch", src, "--out", tmp_path / "out", "--server", url, "--token", token,
               "--model", "ellipsoid", "--jobs", "2", "--format", "glb")
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["p0.glb", "p1.glb", "p2.glb"]
