# SPDX-License-Identifier: GPL-3.0-or-later
"""Hostile files: zip bombs, pickles, links in the output folder, FIFOs, deep JSON, bad UTF-8.

Each test builds the attack file itself and checks for a clear error, bounded memory, and
that nothing outside the output folder is touched.
"""

from __future__ import annotations

import io
import os
import stat
import subprocess
import sys
import threading
import tracemalloc
import zipfile

import numpy as np
import pytest

from sapiens_blender.core.files import atomic as atomic_files
from sapiens_blender.core.geometry import joints_io
from sapiens_blender.core.maps.canonical import Maps, MapsError
from sapiens_blender.core.maps.png import write_png

from maps_samples import make_maps


def _npy_header(shape, dtype="<f8") -> bytes:
    buffer = io.BytesIO()
    np.lib.format.write_array_header_1_0(buffer, {"descr": dtype, "fortran_order": False,
                                                  "shape": shape})
    return buffer.getvalue()  # magic string included


def _bomb(path, extra_bytes: int) -> None:
    """A valid small maps file plus one member of ``extra_bytes`` zeros (compresses ~1000:1)."""
    small = make_maps()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for key, value in small.to_arrays().items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.asarray(value), allow_pickle=False)
            zf.writestr(f"{key}.npy", buffer.getvalue())
        with zf.open("bomb.npy", "w", force_zip64=True) as member:
            member.write(_npy_header((extra_bytes // 8,)))
            zeros = bytes(1 << 20)
            for _ in range(extra_bytes >> 20):
                member.write(zeros)


def test_a_zip_bomb_is_refused_before_it_unpacks(tmp_path):
    path = tmp_path / "bomb.npz"
    _bomb(path, 96 << 20)
    assert path.stat().st_size < 1 << 20
    tracemalloc.start()
    try:
        with pytest.raises(MapsError, match="unpacks to"):
            Maps.load(path)
        with pytest.raises(MapsError, match="unpacks to"):
            Maps.from_bytes(path.read_bytes())  # the copy kept inside a .blend
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 16 << 20, f"peak {peak >> 20} MiB while refusing"


def test_a_header_claiming_a_huge_array_is_refused(tmp_path):
    path = tmp_path / "liar.npz"
    small = make_maps()
    with zipfile.ZipFile(path, "w") as zf:
        for key, value in small.to_arrays().items():
            buffer = io.BytesIO()
            np.lib.format.write_array(buffer, np.asarray(value), allow_pickle=False)
            zf.writestr(f"{key}.npy", buffer.getvalue())
        zf.writestr("huge.npy", _npy_header((1 << 40,)))
    with pytest.raises(MapsError, match="unpacks to"):
        Maps.load(path)


def test_pickled_members_and_stray_files_are_refused(tmp_path):
    path = tmp_path / "pickle.npz"
    np.savez(path, **make_maps().to_arrays(), evil=np.array([object()], dtype=object))
    with pytest.raises(MapsError, match="pickle"):
        Maps.load(path)
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("readme.txt", b"x" * 100)
    with pytest.raises(MapsError, match="not a .npy"):
        Maps.load(path)


def test_a_fifo_named_like_maps_does_not_hang(tmp_path):
    fifo = tmp_path / "shot.npz"
    os.mkfifo(fifo)
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(_error_of(Maps.load, fifo)), daemon=True)
    worker.start()
    worker.join(5)
    assert outcome and isinstance(outcome[0], MapsError) and "regular file" in str(outcome[0])


def _error_of(fn, *args):
    try:
        fn(*args)
    except Exception as exc:  # noqa: BLE001 - the test inspects it
        return exc
    return None


# ---- joints JSON ------------------------------------------------------------------------------

@pytest.mark.parametrize("content, words", [
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"people": [{"id": 1, "joints": {"nose": {"xyz": [1, 2, \xff]}}}]}', "not UTF-8"),
    (b'{"people": [{"id": 1, "joints": {"nose": {"xyz": [' + b"9" * 5000 + b', 0, 0]}}}]}',
     "not valid JSON"),
    (b'{"people": [{"id": 1, "joints": {"nose": {"xyz": [[[[1]]], 2, 3]}}}]}', "3 numbers"),
    (b'{"people": [{"id": 1, "joints": {"nose": {"xyz": [1e400, 0, 0]}}}]}', "finite"),
])
def test_hostile_joints_files_are_clear_errors(tmp_path, content, words):
    path = tmp_path / "joints.json"
    path.write_bytes(content)
    with pytest.raises(joints_io.JointsFileError, match=words):
        joints_io.read(path)


def test_a_fifo_named_like_joints_does_not_hang(tmp_path):
    fifo = tmp_path / "joints.json"
    os.mkfifo(fifo)
    outcome = []
    worker = threading.Thread(target=lambda: outcome.append(_error_of(joints_io.read, fifo)),
                              daemon=True)
    worker.start()
    worker.join(5)
    assert outcome and isinstance(outcome[0], joints_io.JointsFileError)


# ---- atomic outputs --------------------------------------------------------------------------

@pytest.mark.parametrize("dangling", [False, True])
def test_a_link_at_an_output_is_replaced_not_followed(tmp_path, dangling):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / "precious.npz"
    if not dangling:
        victim.write_bytes(b"keep me")
    out = tmp_path / "out"
    out.mkdir()
    for name, write in [("shot.npz", lambda p: make_maps().save(p)),
                        ("shot.png", lambda p: write_png(p, np.zeros((2, 2, 3), np.uint8))),
                        ("joints.json", lambda p: joints_io.write(p, {}))]:
        link = out / name
        link.symlink_to(victim)
        write(link)
        assert not link.is_symlink() and link.is_file()
    assert (victim.read_bytes() == b"keep me") if not dangling else not victim.exists()
    assert sorted(p.name for p in outside.iterdir()) == ([] if dangling else ["precious.npz"])


def test_outputs_get_the_usual_file_mode(tmp_path):
    old = os.umask(0o022)
    try:
        make_maps().save(tmp_path / "m.npz")
        write_png(tmp_path / "p.png", np.zeros((2, 2), np.uint8))
    finally:
        os.umask(old)
    for name in ("m.npz", "p.png"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o644


def test_a_failed_write_leaves_nothing_and_keeps_the_old_file(tmp_path):
    target = tmp_path / "m.npz"
    target.write_bytes(b"old")

    def explode(fh):
        fh.write(b"partial")
        raise OSError("disk full")

    with pytest.raises(OSError, match="disk full"):
        atomic_files.atomic_write(target, explode)
    assert target.read_bytes() == b"old" and [p.name for p in tmp_path.iterdir()] == ["m.npz"]


def test_clean_up_spares_a_running_writers_temp_files(tmp_path):
    sleeper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        live = tmp_path / f".a{atomic_files.TEMP_MARK}-{sleeper.pid}-0a1b2c3d.glb"
        live.write_bytes(b"being written by another batch")
        dead_pid = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                                  capture_output=True, text=True).stdout.strip()
        dead = tmp_path / f".b{atomic_files.TEMP_MARK}-{dead_pid}-0a1b2c3d.npz"
        dead.write_bytes(b"left by a killed run")
        legacy = [tmp_path / ".c.x1y2.npz.tmp", tmp_path / ".d.k9.json.tmp",
                  tmp_path / ".e.q.png.tmp", tmp_path / f".f{atomic_files.TEMP_MARK}-77.blend"]
        for p in legacy:
            p.write_bytes(b"old pattern")
        removed = atomic_files.remove_stale_temp_files(tmp_path)
        assert live.exists() and not dead.exists()
        assert sorted(removed) == sorted([dead, *legacy])
    finally:
        sleeper.kill()
        sleeper.wait()
