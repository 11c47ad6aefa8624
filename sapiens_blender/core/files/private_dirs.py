# SPDX-License-Identifier: GPL-3.0-or-later
"""Per-user private folders for logs and temporary files, and files opened without links.

A shared ``<tmp>/sapiens_blender`` could be created first by another local user, who would then
read our logs or plant a symbolic link that makes us write to any file we can write. We use
``<tmp>/sapiens_blender-<uid>`` only when it is a real folder we own with mode 0700 (else a
fresh private folder), and open files there with O_NOFOLLOW. The server applies the same rules
in inference_server/log_files.py (it never imports sapiens_blender). stdlib only.
"""

from __future__ import annotations

import contextlib
import os
import stat
import tempfile
from pathlib import Path

NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def is_private_dir(folder: Path) -> bool:
    """A real folder (not a link) owned by this user, closed to group and others."""
    st = os.lstat(folder)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def private_temp_dir(name: str = "sapiens_blender") -> Path:
    base = Path(tempfile.gettempdir())
    if not hasattr(os, "getuid"):  # Windows: the temp folder is already per user
        folder = base / name
        folder.mkdir(exist_ok=True)
        return folder
    folder = base / f"{name}-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    if is_private_dir(folder):
        return folder
    return Path(tempfile.mkdtemp(prefix=f"{name}-{os.getuid()}-"))


def open_no_follow(path: Path, mode: str = "wb"):
    """``open(path, mode)`` for "wb"/"ab", mode 0600, refusing a symbolic link at ``path``."""
    flags = os.O_WRONLY | os.O_CREAT | NOFOLLOW | (os.O_APPEND if "a" in mode else os.O_TRUNC)
    try:
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise OSError(f"{path} is a symbolic link; refusing to write through it") from exc
        raise
    return os.fdopen(fd, mode)
