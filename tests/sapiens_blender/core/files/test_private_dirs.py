# SPDX-License-Identifier: GPL-3.0-or-later
"""The add-on's server log folder is per user and private; its files never follow links."""

from __future__ import annotations

import os
import tempfile

import pytest

from sapiens_blender.core.files import private_dirs
from sapiens_blender.core.local_server.process import ServerProcess

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")


def test_a_planted_or_open_folder_is_not_used(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    planted = tmp_path / f"sapiens_blender-{os.getuid()}"
    planted.mkdir()
    os.chmod(planted, 0o777)
    folder = private_dirs.private_temp_dir()
    assert folder != planted and private_dirs.is_private_dir(folder)
    os.chmod(planted, 0o700)
    assert private_dirs.private_temp_dir() == planted
    assert ServerProcess().log_dir == planted


def test_open_no_follow_refuses_a_link(tmp_path):
    target = tmp_path / "precious"
    target.write_bytes(b"keep")
    (tmp_path / "log").symlink_to(target)
    with pytest.raises(OSError, match="link"):
        private_dirs.open_no_follow(tmp_path / "log", "wb")
    assert target.read_bytes() == b"keep"
    with private_dirs.open_no_follow(tmp_path / "new", "wb") as fh:
        fh.write(b"x")
    assert os.stat(tmp_path / "new").st_mode & 0o077 == 0
