# SPDX-License-Identifier: GPL-3.0-or-later
"""The server's log files: a per-user private folder, files opened without following links.

A shared ``<tmp>/sapiens_blender`` could be created by another local user, who would then read
our logs or plant a link that makes the server append to any file we can write. The folder is
``<tmp>/sapiens_blender-<uid>``, used only when it is a real folder owned by us with mode 0700
(else a fresh private folder); log files are opened with O_NOFOLLOW, new ones with O_EXCL.
sapiens_blender/core/files/private_dirs.py applies the same rules on the add-on's side (the server
never imports sapiens_blender).
"""

from __future__ import annotations

import contextlib
import logging
import os
import stat
import tempfile
import time
from pathlib import Path

log = logging.getLogger("inference_server")
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _is_private(folder: Path) -> bool:
    st = os.lstat(folder)
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def private_log_dir() -> Path:
    base = Path(tempfile.gettempdir())
    if not hasattr(os, "getuid"):  # Windows: the temp folder is already per user
        folder = base / "sapiens_blender"
        folder.mkdir(exist_ok=True)
        return folder
    folder = base / f"sapiens_blender-{os.getuid()}"
    with contextlib.suppress(FileExistsError):
        os.mkdir(folder, 0o700)
    if _is_private(folder):
        return folder
    fresh = Path(tempfile.mkdtemp(prefix=f"sapiens_blender-{os.getuid()}-"))
    log.warning("%s is not a private folder of this user (a link, another owner or open to "
                "others); logging to %s instead", folder, fresh)
    return fresh


def open_log_file(path: Path, *, exclusive: bool):
    """A text stream appending to ``path`` (mode 0600), never through a symbolic link.
    ``exclusive``: the file must be new (a stale one of a reused pid is replaced)."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND | _NOFOLLOW | (os.O_EXCL if exclusive else 0)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, flags, 0o600)
    except FileExistsError:
        os.unlink(path)  # our own private folder: only a stale log of ours can be there
        fd = os.open(path, flags, 0o600)
    except OSError as exc:
        if os.path.islink(path):
            raise OSError(f"{path} is a symbolic link; refusing to log through it") from exc
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError(f"{path} is not a regular file")
    return os.fdopen(fd, "a", encoding="utf-8", buffering=1)


def prune_old_logs(folder: Path, max_age_s: float) -> None:
    """One log per server run keeps concurrent servers apart; old ones must not pile up."""
    cutoff = time.time() - max_age_s
    for old in folder.glob("server-*.log"):
        with contextlib.suppress(OSError):
            st = os.lstat(old)
            if stat.S_ISREG(st.st_mode) and st.st_mtime < cutoff:
                old.unlink()
