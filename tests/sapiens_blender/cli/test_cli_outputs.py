# SPDX-License-Identifier: GPL-3.0-or-later
"""Outputs are checked before the work: an output that cannot be written fails at once with one
line, and several -o are written all or none."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pytest

bpy = pytest.importorskip("bpy")

from synthetic_scene import ellipsoid_maps  # noqa: E402
from cli_runner import run_cli  # noqa: E402

pytestmark = [pytest.mark.bpy]


@pytest.fixture(scope="module")
def maps_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("maps") / "shot.npz"
    ellipsoid_maps(64, 48).save(path)
    return path


@pytest.fixture()
def blocked(tmp_path):
    """A folder that cannot be created, whoever runs the test (its parent is a file)."""
    (tmp_path / "a_file").write_text("x")
    return tmp_path / "a_file" / "out"


def _one_line_error(proc) -> str:
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in proc.stderr, \
        proc.stderr[-2000:]
    return lines[0]


def test_build_into_an_uncreatable_folder_fails_before_building(maps_file, blocked, tmp_path):
    good = tmp_path / "good.glb"
    start = time.perf_counter()
    proc = run_cli("build", "--maps", maps_file, "-o", good, "-o", blocked / "x.blend")
    assert proc.returncode == 1
    assert "a_file" in _one_line_error(proc)
    assert "built" not in proc.stdout and not good.exists()  # all or nothing
    assert time.perf_counter() - start < 30


def test_batch_and_analyze_into_an_uncreatable_folder(maps_file, blocked):
    proc = run_cli("batch", maps_file.parent, "--out", blocked)
    assert proc.returncode == 1 and "a_file" in _one_line_error(proc)
    proc = run_cli("analyze", maps_file, "--out", blocked)  # checked before any server starts
    assert proc.returncode == 1 and "a_file" in _one_line_error(proc)


def test_demo_into_an_uncreatable_folder_fails_at_once(blocked):
    start = time.perf_counter()
    proc = run_cli("demo", "--out", blocked)
    assert proc.returncode == 1 and "a_file" in _one_line_error(proc)
    assert time.perf_counter() - start < 30  # no server start, no analysis


def test_export_all_replaces_nothing_when_one_export_fails(tmp_path, monkeypatch):
    from sapiens_blender.blender.export import ExportError, export_all
    from sapiens_blender.core.files import atomic as atomic_files

    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.mesh.primitive_cube_add()
    first, second = tmp_path / "a.glb", tmp_path / "b.blend"
    first.write_bytes(b"previous a")
    real = atomic_files.temp_path_for

    def failing_blend(path):  # Blender cannot open this temporary name: the save fails
        return tmp_path / "gone" / "t.blend" if Path(path).suffix == ".blend" else real(path)

    monkeypatch.setattr(atomic_files, "temp_path_for", failing_blend)
    with pytest.raises(ExportError):
        export_all([first, second])
    assert first.read_bytes() == b"previous a" and not second.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.glb"]
    monkeypatch.setattr(atomic_files, "temp_path_for", real)
    assert export_all([first, second]) == [first, second]
    assert first.stat().st_size > 100 and second.stat().st_size > 100


if __name__ == "__main__":  # pragma: no cover
    sys.exit(pytest.main([__file__]))
