# SPDX-License-Identifier: GPL-3.0-or-later
"""`analyze`'s outputs on a disk that fills up: a photo's .npz and previews, all or none."""

from __future__ import annotations

import re

import pytest
from full_disk import FullDisk
from synthetic_scene import ellipsoid_maps

from sapiens_blender.cli.analyze import write_outputs
from sapiens_blender.core.files.atomic import OutputNotWritable


@pytest.fixture()
def sizes(tmp_path):
    """Bytes of each output of one photo, .npz first."""
    return [p.stat().st_size for p in write_outputs(ellipsoid_maps(128, 96), tmp_path / "probe", "shot")]


def test_a_disk_filling_halfway_leaves_none_of_the_photos_outputs(tmp_path, monkeypatch, sizes):
    assert len(sizes) == 5  # the .npz and four previews
    disk = FullDisk(sum(sizes[:3]) + 10).patch(monkeypatch)  # room for the .npz and two previews
    out = tmp_path / "full"
    with pytest.raises(OutputNotWritable) as info:
        write_outputs(ellipsoid_maps(128, 96), out, "shot")
    assert disk.failed == 1
    assert re.fullmatch(rf"cannot write shot_\w+\.png: the disk holding {re.escape(str(out))} is full",
                        str(info.value)), str(info.value)
    assert list(out.iterdir()) == []  # no .npz, no preview, no temporary file


def test_a_full_disk_keeps_the_earlier_runs_outputs(tmp_path, monkeypatch, sizes):
    maps = ellipsoid_maps(128, 96)
    earlier = {p: p.read_bytes() for p in write_outputs(maps, tmp_path / "out", "shot")}
    FullDisk(sizes[0] + sizes[1] // 2).patch(monkeypatch)  # the .npz fits, the previews do not
    maps.depth += 0.01  # a second analysis, different outputs
    with pytest.raises(OutputNotWritable, match="is full"):
        write_outputs(maps, tmp_path / "out", "shot")
    assert {p: p.read_bytes() for p in (tmp_path / "out").iterdir()} == earlier
