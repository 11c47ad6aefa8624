# SPDX-License-Identifier: GPL-3.0-or-later
"""A disk that fills up: once ``room`` bytes are written, a write fails with ENOSPC, as on a
full disk. It is patched in at the lowest write layer a test reaches in this process (Python's
``open`` and ``os.fdopen``: Blender's Python exporters and our atomic writers) and only for our
temporary output files (their names carry TEMP_MARK); every other file writes as usual."""

from __future__ import annotations

import builtins
import errno
import io
import os

from sapiens_blender.core.files.atomic import TEMP_MARK


class FullDisk:
    def __init__(self, room: int):
        self.room = room
        self.failed = 0  # writes refused

    def patch(self, monkeypatch) -> "FullDisk":
        real_open, real_fdopen = builtins.open, os.fdopen

        def opened(file, mode="r", *args, **kwargs):
            if isinstance(file, (str, os.PathLike)) and TEMP_MARK in os.fspath(file) and set(mode) & set("wax"):
                return self._wrap(io.FileIO(file, mode.replace("b", "").replace("t", "")), mode, kwargs)
            return real_open(file, mode, *args, **kwargs)

        def fdopened(fd, mode="r", *args, **kwargs):
            name = os.readlink(f"/proc/self/fd/{fd}") if os.path.exists(f"/proc/self/fd/{fd}") else ""
            if TEMP_MARK in name and set(mode) & set("wax"):
                return self._wrap(io.FileIO(fd, "w"), mode, kwargs)
            return real_fdopen(fd, mode, *args, **kwargs)

        monkeypatch.setattr(builtins, "open", opened)
        monkeypatch.setattr(os, "fdopen", fdopened)
        return self

    def _wrap(self, raw: io.FileIO, mode: str, kwargs):
        disk = self

        class Filling(io.RawIOBase):  # the file, with the disk's room counted down
            def writable(self):
                return True

            def seekable(self):
                return True

            def seek(self, *args):
                return raw.seek(*args)

            def tell(self):
                return raw.tell()

            def write(self, data):
                if len(data) > disk.room:
                    disk.failed += 1
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                disk.room -= len(data)
                return raw.write(data)

            def close(self):
                raw.close()
                super().close()

        buffered = io.BufferedWriter(Filling())
        return buffered if "b" in mode else io.TextIOWrapper(buffered, encoding=kwargs.get("encoding") or "utf-8")
