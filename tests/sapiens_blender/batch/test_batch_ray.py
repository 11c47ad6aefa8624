# SPDX-License-Identifier: GPL-3.0-or-later
"""`batch --engine ray`: a local Ray cluster builds a folder of photos and maps exactly like the
local engine (same files, objects and names; vertices equal to 1e-5 m), reports a bad photo
while the rest go on, resumes a re-run, and leaves no Ray process behind, Ctrl-C included."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")
ray = pytest.importorskip("ray")
psutil = pytest.importorskip("psutil")
Image = pytest.importorskip("PIL.Image")

from gltf_reader import Glb  # noqa: E402
from synthetic_scene import ellipsoid_maps  # noqa: E402

from sapiens_blender.core.local_server.process import ServerProcess  # noqa: E402
from repo_paths import REPO, SUPPORT

pytestmark = [pytest.mark.bpy]

ENTRY = "import sys; from sapiens_blender.cli import main; sys.exit(main())"
# The test backend lives beside this file: Ray workers and the server must import it.
ENV = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), str(SUPPORT)])}
TOLERANCE_M = 1e-5
SMALL_CLUSTER = ("--local-cpus", "2", "--local-object-store-mb", "200")
RAY_DIR = str(Path(ray.__file__).parent)


def batch(src, out, *extra, api=False) -> subprocess.CompletedProcess:
    if api:  # the same batch through the Python API
        code = (f"import sys; from sapiens_blender.batch import run_batch; "
                f"sys.exit(run_batch({str(src)!r}, {str(out)!r}, {', '.join(extra)}))")
        cmd = [sys.executable, "-c", code]
    else:
        cmd = [sys.executable, "-c", ENTRY, "batch", str(src), "--out", str(out), *map(str, extra)]
    return subprocess.run(cmd, cwd=REPO, env=ENV, capture_output=True, text=True, timeout=300)


def ray_processes(since: float) -> list[str]:
    """Live Ray processes (GCS, raylet, workers, agents) started after ``since``."""
    found = []
    for p in psutil.process_iter(["cmdline", "name", "status", "create_time"]):
        if p.info["status"] == psutil.STATUS_ZOMBIE or (p.info["create_time"] or 0) < since:
            continue
        text = " ".join(p.info["cmdline"] or []) or (p.info["name"] or "")
        if any(mark in text for mark in ("raylet", "gcs_server", "ray::", RAY_DIR)):
            found.append(f"{p.pid} {text[:120]}")
    return found


def assert_no_ray_left(since: float) -> None:
    deadline = time.monotonic() + 20  # the head's processes take a moment to exit
    while ray_processes(since) and time.monotonic() < deadline:
        time.sleep(0.25)
    assert not ray_processes(since)


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    src = tmp_path_factory.mktemp("inputs")
    ellipsoid_maps(96, 72, people=1).save(src / "solo.npz")
    ellipsoid_maps(96, 72, people=2).save(src / "pair.npz")
    rng = np.random.default_rng(0)
    for name in ("front", "side"):
        Image.fromarray(rng.integers(0, 256, (72, 96, 3), dtype=np.uint8)).save(src / f"{name}.png")
    (src / "broken.jpg").write_bytes(b"\xff\xd8 not really a photo")
    return src


@pytest.fixture(scope="module")
def local_outputs(inputs, tmp_path_factory):
    """The local engine's outputs, photos analysed by a server with the same test backend."""
    manager = ServerProcess(sys.executable, ["--backend-module", "ellipsoid_backend"],
                            log_dir=tmp_path_factory.mktemp("server-log"),
                            env={"PYTHONPATH": ENV["PYTHONPATH"]})
    client = manager.ensure_running()
    out = tmp_path_factory.mktemp("local")
    try:
        proc = batch(inputs, out, "--format", "glb,blend", "--jobs", "2", "--model", "ellipsoid",
                     "--server", manager.url, f"--token={client.token}")
    finally:
        manager.stop()
    assert proc.returncode == 1 and "failed: broken.jpg:" in proc.stderr, proc.stderr
    return out


def glb_contents(path: Path) -> dict:
    glb = Glb(path)
    out = {}
    for i, node in enumerate(glb.json["nodes"]):
        if "mesh" in node:
            out[node["name"]] = np.concatenate([pos for pos, _ in glb.skinned_primitives(i)])
        else:
            out[node["name"]] = glb.world_matrices()[i]
    return out


def blend_contents(path: Path) -> dict:
    bpy.ops.wm.open_mainfile(filepath=str(path))
    out = {}
    for obj in bpy.data.objects:
        world = np.array(obj.matrix_world)
        if obj.type == "MESH":
            co = np.empty(3 * len(obj.data.vertices))
            obj.data.vertices.foreach_get("co", co)
            out[obj.name] = co.reshape(-1, 3) @ world[:3, :3].T + world[:3, 3]
        else:
            out[obj.name] = world
    return out


def assert_same_contents(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    assert any(v.shape[1] == 3 and len(v) > 100 for v in a.values()), "no mesh was compared"
    for name in a:
        assert a[name].shape == b[name].shape, name
        assert np.abs(a[name] - b[name]).max() <= TOLERANCE_M, name


@pytest.mark.slow
def test_ray_engine_builds_like_the_local_engine(inputs, local_outputs, tmp_path):
    since = time.time()
    out = tmp_path / "ray"
    proc = batch(inputs, out, "--engine", "ray", "--format", "glb,blend", "--model", "ellipsoid",
                 "--backend-module", "ellipsoid_backend", "--batch-size", "2", *SMALL_CLUSTER)
    assert proc.returncode == 1, proc.stderr
    assert "failed: broken.jpg: ImageError" in proc.stderr and "4 built, 0 already done, 1 failed" in proc.stdout
    assert_no_ray_left(since)

    names = sorted(p.name for p in out.iterdir())
    assert names == sorted(p.name for p in local_outputs.iterdir())
    assert names == sorted(f"{s}.{f}" for s in ("solo", "pair", "front", "side") for f in ("glb", "blend"))
    for name in names:
        read = glb_contents if name.endswith(".glb") else blend_contents
        assert_same_contents(read(out / name), read(local_outputs / name))
    assert not list(out.glob(".*sapiens-tmp*"))


def test_cluster_options_and_addresses_are_checked_before_anything_starts(inputs, tmp_path):
    proc = batch(inputs, tmp_path / "out", "--address", "auto")
    assert proc.returncode == 2 and "--address and --local-* need --engine ray" in proc.stderr
    proc = batch(inputs, tmp_path / "out", "--engine", "ray", "--server", "http://127.0.0.1:9")
    assert proc.returncode == 2 and "do not apply to --engine ray" in proc.stderr
    since = time.time()
    proc = batch(inputs, tmp_path / "out", "--engine", "ray", "--address", "127.0.0.1:1")
    assert proc.returncode == 1 and "error: cannot reach the Ray cluster at 127.0.0.1:1" in proc.stderr
    assert not ray_processes(since)


@pytest.mark.slow
def test_ctrl_c_stops_the_cluster_and_a_rerun_resumes(inputs, local_outputs, tmp_path):
    since = time.time()
    out = tmp_path / "out"
    cmd = [sys.executable, "-c", ENTRY, "batch", str(inputs), "--out", str(out), "--engine", "ray",
           "--model", "ellipsoid", "--backend-module", "ellipsoid_backend", *SMALL_CLUSTER]
    # The photos' analysis is slowed so that the maps' builds finish first and the interrupt
    # lands mid-run, with builds both done and to do.
    slow = {**ENV, "ELLIPSOID_ANALYSIS_DELAY_S": "4"}
    proc = subprocess.Popen(cmd, cwd=REPO, env=slow, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    lines = []
    reader = threading.Thread(target=lambda: lines.extend(proc.stderr), daemon=True)
    reader.start()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not any(" built 1 " in line for line in lines):
        time.sleep(0.05)
    waited = time.monotonic() - (deadline - 120)
    proc.send_signal(signal.SIGINT)  # to the driver only, as a terminal's Ctrl-C reaches Python
    code = proc.wait(timeout=60)
    reader.join(10)
    assert code == 130, f"interrupt sent after {waited:.1f} s; stderr:\n" + "".join(lines)[-4000:]
    assert "interrupted" in "".join(lines)
    assert_no_ray_left(since)
    finished = {p.name for p in out.glob("*.glb") if not p.name.startswith(".")}
    assert 0 < len(finished) < 4, "the interrupt should land mid-run"

    # The re-run, through the Python API, builds only what is missing, like the local engine.
    since = time.time()
    again = batch(inputs, out, "engine='ray'", "model='ellipsoid'", "backend_modules=('ellipsoid_backend',)",
                  "local_cpus=2", "local_object_store_mb=200", api=True)
    assert f"{4 - len(finished)} built, {len(finished)} already done, 1 failed" in again.stdout, again.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(f"{s}.glb" for s in ("solo", "pair", "front", "side"))
    for name in ("front.glb", "side.glb"):
        assert_same_contents(glb_contents(out / name), glb_contents(local_outputs / name))
    assert_no_ray_left(since)
