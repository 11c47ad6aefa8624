# SPDX-License-Identifier: GPL-3.0-or-later
"""Exports replace a link in the output folder instead of writing through it, and a save that
fails says why in the folder's terms."""

from __future__ import annotations

import os

import pytest

bpy = pytest.importorskip("bpy")

from sapiens_blender.blender.export import ExportError, export  # noqa: E402

pytestmark = [pytest.mark.bpy]


@pytest.fixture()
def cube_scene():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.mesh.primitive_cube_add()
    return bpy.context.scene


@pytest.mark.parametrize("suffix", [".glb", ".blend"])
@pytest.mark.parametrize("dangling", [False, True])
def test_a_link_in_the_output_folder_is_replaced(cube_scene, tmp_path, suffix, dangling):
    outside = tmp_path / "outside"
    outside.mkdir()
    victim = outside / f"precious{suffix}"
    if not dangling:
        victim.write_bytes(b"keep me")
    out = tmp_path / "out"
    out.mkdir()
    link = out / f"shot{suffix}"
    link.symlink_to(victim)
    written = export(link)
    assert written == link and link.is_file() and not link.is_symlink()
    assert link.stat().st_size > 100
    assert (victim.read_bytes() == b"keep me") if not dangling else not victim.exists()
    assert [p.name for p in out.iterdir()] == [link.name]  # no temporary file left


@pytest.mark.skipif(not hasattr(os, "getuid") or os.getuid() == 0, reason="root writes anywhere")
def test_a_save_that_cannot_be_written_says_why(cube_scene, tmp_path):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises((ExportError, PermissionError), match="locked|writable|Permission"):
            export(locked / "scene.blend")
    finally:
        locked.chmod(0o700)


def test_a_full_disk_is_named_as_such(cube_scene, tmp_path, monkeypatch):
    """Blender reports a failed save as 'cannot open file ... for writing'; with the disk full
    the user must read that the disk is full."""
    import shutil
    from collections import namedtuple

    from sapiens_blender.core.files import atomic as atomic_files

    # Blender really fails: its temporary file lies in a folder that does not exist.
    monkeypatch.setattr(atomic_files, "temp_path_for", lambda p: tmp_path / "gone" / "t.blend")
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(shutil, "disk_usage", lambda p: usage(10 << 30, 10 << 30, 4096))
    with pytest.raises(ExportError, match="is full"):
        export(tmp_path / "scene.blend")
    assert not (tmp_path / "scene.blend").exists()


@pytest.mark.parametrize("suffix", [".glb", ".fbx"])
def test_a_disk_filling_mid_export_is_one_line_and_leaves_nothing(cube_scene, tmp_path, monkeypatch, capfd,
                                                                   suffix):
    """The exporter runs into ENOSPC halfway: the user reads one line saying the disk is full,
    not Blender's traceback of the exporter (it used to print it twice)."""
    from full_disk import FullDisk

    disk = FullDisk(2000).patch(monkeypatch)
    capfd.readouterr()
    with pytest.raises(ExportError) as info:
        export(tmp_path / f"scene{suffix}")
    assert disk.failed >= 1
    assert str(info.value) == f"cannot write scene{suffix}: the disk holding {tmp_path} is full"
    console = capfd.readouterr()
    assert "Traceback" not in console.out + console.err
    assert list(tmp_path.iterdir()) == []


def test_an_export_that_works_still_shows_blenders_output(cube_scene, tmp_path, capfd):
    capfd.readouterr()
    export(tmp_path / "scene.fbx")
    assert "export" in capfd.readouterr().out.lower()  # the FBX exporter's own lines, replayed
