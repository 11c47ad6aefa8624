# SPDX-License-Identifier: GPL-3.0-or-later
"""`sapiens-blender batch`: failures reported while the rest goes on, re-runs skip finished
inputs, and a run killed mid-way (SIGKILL to its whole process group) resumes to outputs equal
to a clean run's, with no partial or temporary files."""

from __future__ import annotations

import hashlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("bpy")

from synthetic_scene import ellipsoid_maps  # noqa: E402
from repo_paths import REPO

pytestmark = [pytest.mark.bpy]

ENTRY = "import sys; from sapiens_blender.cli import main; sys.exit(main())"


def batch_cmd(src, out, *extra):
    return [sys.executable, "-c", ENTRY, "batch", str(src), "--out", str(out), *map(str, extra)]


def run_batch(src, out, *extra) -> subprocess.CompletedProcess:
    return subprocess.run(batch_cmd(src, out, *extra), cwd=REPO, capture_output=True, text=True, timeout=300)


def outputs(folder: Path) -> set[str]:
    """Finished outputs (pathlib's glob also matches the hidden temporary files)."""
    return {p.name for p in folder.glob("*.glb") if not p.name.startswith(".")} if folder.is_dir() else set()


def digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir())}


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    src = tmp_path_factory.mktemp("inputs")
    for i in range(6):
        ellipsoid_maps(128, 96, people=1 + i % 2).save(src / f"shot{i}.npz")
    return src


def test_failures_are_reported_and_the_rest_is_built(tmp_path):
    src = tmp_path / "in"
    src.mkdir()
    ellipsoid_maps(96, 72).save(src / "good.npz")
    (src / "broken.npz").write_bytes(b"not a maps file")
    (src / "photo.jpg").write_bytes(b"\xff\xd8 not really a photo")
    proc = run_batch(src, tmp_path / "out", "--format", "glb,blend", "--jobs", "2",
                     "--server", "http://127.0.0.1:9")  # nothing listens there
    assert proc.returncode == 1
    assert "failed: broken.npz: MapsError" in proc.stderr and "failed: photo.jpg:" in proc.stderr
    assert "not running" in proc.stderr  # the server's reason, not a traceback
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["good.blend", "good.glb"]
    assert "1 built" in proc.stdout


@pytest.mark.slow
def test_rerun_skips_and_killed_run_resumes_to_identical_outputs(inputs, tmp_path):
    clean = tmp_path / "clean"
    proc = run_batch(inputs, clean, "--jobs", "2")
    assert proc.returncode == 0, proc.stderr
    assert sorted(digests(clean)) == [f"shot{i}.glb" for i in range(6)]
    again = run_batch(inputs, clean, "--jobs", "2")
    assert again.returncode == 0 and "0 built, 6 already done" in again.stdout

    # Kill a run (all its processes, no chance to clean up) once it has written something.
    killed = tmp_path / "killed"
    proc = subprocess.Popen(batch_cmd(inputs, killed, "--jobs", "2"), cwd=REPO, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not outputs(killed):
        time.sleep(0.05)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    finished = outputs(killed)
    assert 0 < len(finished) < 6, "the kill should land mid-run"
    # Whatever exists is complete: equal to the clean run's file.
    before, reference = digests(killed), digests(clean)
    assert all(before[n] == reference[n] for n in finished)

    resumed = run_batch(inputs, killed, "--jobs", "2")
    assert resumed.returncode == 0, resumed.stderr
    assert f"{6 - len(finished)} built, {len(finished)} already done" in resumed.stdout
    assert digests(killed) == digests(clean)  # same files, same bytes, no temporary leftovers


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL])
def test_killing_a_batch_stops_its_builders(inputs, tmp_path, sig):
    """Only the batch process is signalled (not its group): its builders must go with it."""
    import psutil

    proc = subprocess.Popen(batch_cmd(inputs, tmp_path / "out", "--jobs", "2", "--force"), cwd=REPO,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        parent = psutil.Process(proc.pid)
        deadline = time.monotonic() + 60
        builders = []
        while time.monotonic() < deadline and len(builders) < 2:
            builders = [c for c in parent.children() if "batch_worker" in " ".join(c.cmdline())]
            time.sleep(0.05)
        assert builders, "the batch started no builder"
        proc.send_signal(sig)
        proc.wait(30)
        gone, alive = psutil.wait_procs(builders, timeout=3)
        assert not alive, f"{len(alive)} builder(s) outlived the batch"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
