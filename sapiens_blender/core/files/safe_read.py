# SPDX-License-Identifier: GPL-3.0-or-later
"""Reading user-supplied files without hanging or exploding (stdlib only).

A FIFO or a device named like an input would block ``open`` or ``read`` forever; a huge or
deeply nested JSON file would take the memory or the recursion limit. These helpers open
without blocking, accept regular files only, bound the size and turn every parse failure
into the caller's error class with a message that names the file.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

MAX_JSON_BYTES = 64 * 1024 * 1024


def open_regular(path: str | os.PathLike, error=ValueError, what: str = "file"):
    """A binary file object for ``path``, refusing anything but a regular file (a FIFO would
    block; O_NONBLOCK makes even its open return at once)."""
    path = Path(path)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise error(f"{path} is not a regular file (a pipe, device or folder); "
                        f"expected a {what}")
        if hasattr(os, "set_blocking"):
            os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike, max_bytes: int, error=ValueError,
                 what: str = "file") -> bytes:
    with open_regular(path, error, what) as fh:
        size = os.fstat(fh.fileno()).st_size
        if size > max_bytes:
            raise error(f"{path} is {size} bytes; a {what} is at most {max_bytes}")
        return fh.read(max_bytes + 1)


def parse_json(data: bytes, source: str, error=ValueError):
    """``json.loads`` whose every failure (bad UTF-8, syntax, nesting deeper than Python's
    recursion limit, 5,000-digit numbers) is ``error`` naming ``source``."""
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise error(f"{source} is not UTF-8 text: {exc}") from None
    except RecursionError:
        raise error(f"{source} is nested too deeply to be a valid file") from None
    except ValueError as exc:
        raise error(f"{source} is not valid JSON: {exc}") from None


def read_json(path: str | os.PathLike, error=ValueError, what: str = "JSON file",
              max_bytes: int = MAX_JSON_BYTES):
    return parse_json(read_regular(path, max_bytes, error, what), str(path), error)
