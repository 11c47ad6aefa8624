# SPDX-License-Identifier: GPL-3.0-or-later
"""Atomic writes (the one helper every output uses) and the clean-up of their leftovers.

An output is written as ``.<stem>.sapiens-tmp-<pid>-<random><suffix>`` in the target folder,
then moved into place with ``os.replace``: a crash or a kill never leaves a partial output,
and an existing file is only replaced by a complete one. ``os.replace`` renames over the
*directory entry*: a symbolic link at the output path is replaced by the file, never followed,
so a link planted in an output folder cannot make us write outside it. The pid in the name lets
a clean-up remove only the leftovers of processes that are gone, never a running batch's.

Outputs get the usual mode of new files (0666 less the umask, typically 0644), whatever the
temporary file was created with. stdlib only.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import secrets
from collections.abc import Iterator
from pathlib import Path

from ..errors import SapiensError

TEMP_MARK = ".sapiens-tmp"
# Temporary names of earlier versions (mkstemp-based writers), cleaned the same way.
_LEGACY_PATTERNS = (".*.npz.tmp", ".*.json.tmp", ".*.png.tmp")
_TEMP_NAME = re.compile(rf"^\..*{re.escape(TEMP_MARK)}-(\d+)-[0-9a-f]+")
_TEMP_PARTS = re.compile(rf"^\.(.*){re.escape(TEMP_MARK)}-\d+-[0-9a-f]+(.*)$")  # stem, suffix


def output_path(path: str | os.PathLike) -> Path:
    """``path`` made absolute without resolving its last component (a link stays a link)."""
    path = Path(os.path.abspath(os.fspath(path)))
    return path.parent.resolve() / path.name


def temp_path_for(path: str | os.PathLike) -> Path:
    """A fresh temporary sibling of ``path``; the real suffix stays last (exporters append
    theirs otherwise). The random part makes the name unguessable to other local users."""
    path = Path(path)
    return path.with_name(f".{path.stem}{TEMP_MARK}-{os.getpid()}-{secrets.token_hex(4)}{path.suffix}")


def _new_file_mode() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike) -> Iterator[Path]:
    """``with atomic_output(p) as tmp:`` write ``tmp`` (by name, e.g. with an exporter); on a
    clean exit it replaces ``p`` (a link at ``p`` is replaced, not followed); on an error it
    is removed (with a glTF's side ``.bin``) and ``p`` is untouched."""
    target = output_path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = temp_path_for(target)
    try:
        yield tmp
        if not tmp.exists():
            raise FileNotFoundError(f"nothing was written for {target.name}")
        os.chmod(tmp, _new_file_mode())
        os.replace(tmp, target)
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        tmp.with_suffix(".bin").unlink(missing_ok=True)
        if is_disk_full(exc) and not isinstance(exc, DiskFull):  # said once, by the innermost writer
            raise DiskFull(disk_full_message(target)) from exc
        raise


def is_disk_full(exc: BaseException) -> bool:
    """A write failed for want of space (or of the user's quota)."""
    return isinstance(exc, DiskFull) or isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def disk_full_message(target: Path) -> str:
    """The one line a full disk gets, whichever writer ran into it (a temporary name, of a writer
    nested in another's temporary file, is no use to the user: the output's own is said)."""
    name = Path(target).name
    temp = _TEMP_PARTS.match(name)
    if temp:
        name = temp.group(1) + temp.group(2)
    return f"cannot write {name}: the disk holding {Path(target).parent} is full"


def atomic_write(path: str | os.PathLike, write) -> Path:
    """Create ``path`` atomically: ``write(binary_file)`` fills the temporary file, opened
    exclusively and without following links. Returns ``path``."""
    with atomic_output(path) as tmp:
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | \
            getattr(os, "O_BINARY", 0)
        with os.fdopen(os.open(tmp, flags, 0o600), "wb") as fh:
            write(fh)
    return Path(path)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    return atomic_write(path, lambda fh: fh.write(data))


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    if os.name == "nt":  # no cheap check without ctypes: keep anything that may be live
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temp_files(folder: str | os.PathLike) -> list[Path]:
    """Delete temporary files that writers which are gone left in ``folder``; returns them.
    A file of a running process (another batch writing to the same folder) is kept."""
    removed = []
    folder = Path(folder)
    for p in [q for pattern in (f".*{TEMP_MARK}*", *_LEGACY_PATTERNS) for q in folder.glob(pattern)]:
        match = _TEMP_NAME.match(p.name)
        if match and _pid_alive(int(match.group(1))):
            continue
        if p.is_file() or p.is_symlink():
            p.unlink(missing_ok=True)
            removed.append(p)
    return removed


class OutputNotWritable(SapiensError, OSError):
    """An output cannot be written; the message is one line naming the path and why."""


class DiskFull(OutputNotWritable):
    """The disk (or the user's quota) filled up while an output was written."""


def check_writable(paths) -> None:
    """Before any work: create the folders of ``paths`` and prove each takes a new file (a
    probe file, created and removed, catches read-only disks, permissions and ACLs alike).
    Raises OutputNotWritable naming the first output that cannot be written."""
    for path in paths:
        target = output_path(path)
        if target.is_dir():
            raise OutputNotWritable(f"cannot write {path}: it is a folder")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise OutputNotWritable(f"cannot create the output folder {target.parent}: "
                                    f"{exc.strerror or exc}") from None
        probe = temp_path_for(target)
        try:
            fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0),
                         0o600)
            os.close(fd)
            os.unlink(probe)
        except OSError as exc:
            raise OutputNotWritable(f"cannot write {path}: the folder {target.parent} does not "
                                    f"take new files ({exc.strerror or exc})") from None
