# SPDX-License-Identifier: GPL-3.0-or-later
"""The server's log folder is private to its user and its log files never follow links."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import pytest

from server_harness import REPO, server_env

from inference_server import log_files

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX permissions")


@pytest.fixture
def temp_root(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    return tmp_path


def test_a_folder_planted_by_someone_else_is_not_used(temp_root):
    victim = temp_root / "victim"
    victim.mkdir()
    (temp_root / f"sapiens_blender-{os.getuid()}").symlink_to(victim)
    folder = log_files.private_log_dir()
    assert folder.parent == temp_root and not folder.is_symlink() and folder != victim
    assert oct(os.stat(folder).st_mode & 0o777) == oct(0o700)


def test_an_open_folder_is_not_used(temp_root):
    shared = temp_root / f"sapiens_blender-{os.getuid()}"
    shared.mkdir(mode=0o777)
    os.chmod(shared, 0o777)
    assert log_files.private_log_dir() != shared


def test_the_private_folder_is_reused(temp_root):
    first = log_files.private_log_dir()
    assert first == log_files.private_log_dir() == temp_root / f"sapiens_blender-{os.getuid()}"


def test_log_files_do_not_follow_links(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    link = tmp_path / "server-1.log"
    link.symlink_to(target)
    with pytest.raises(OSError, match="link"):
        log_files.open_log_file(link, exclusive=False)  # --log-file: refuse
    stream = log_files.open_log_file(link, exclusive=True)  # our own name: replace the link
    stream.write("log line\n")
    stream.close()
    assert not link.is_symlink() and link.read_text() == "log line\n"
    assert target.read_text() == "keep me\n"


def test_the_server_refuses_a_log_file_that_is_a_link(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    link = tmp_path / "server.log"
    link.symlink_to(target)
    proc = subprocess.run([sys.executable, "-m", "inference_server", "--log-file", str(link)],
                          capture_output=True, env=server_env("t"), cwd=REPO, timeout=60)
    assert proc.returncode == 2 and b"link" in proc.stderr
    assert target.read_text() == "keep me\n"


def test_new_log_files_are_private(tmp_path):
    stream = log_files.open_log_file(tmp_path / "server-2.log", exclusive=True)
    stream.write("x\n")
    stream.close()
    assert os.stat(tmp_path / "server-2.log").st_mode & 0o077 == 0
