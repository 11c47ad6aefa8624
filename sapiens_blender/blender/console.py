# SPDX-License-Identifier: GPL-3.0-or-later
"""Blender's console output of one call, held back: shown if the call succeeds, dropped if not.

A Python exporter that fails (a full disk halfway through a .fbx) makes Blender print the
whole traceback on the console, twice, before the operator raises; the caller then says what
went wrong in one line. Headless only (the command line): Blender's own window has its console
elsewhere, and redirecting the process's output there would hide the user's prints.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile

import bpy


def _flush_all() -> None:
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    with contextlib.suppress(Exception):  # C stdio: Blender prints its reports with printf
        import ctypes

        ctypes.CDLL(None).fflush(None)


@contextlib.contextmanager
def console_held_back():
    """Run the body with file descriptors 1 and 2 going to temporary files; replay them if
    the body succeeds. A no-op with Blender's window, or where the descriptors cannot move."""
    if not bpy.app.background or os.name == "nt":
        yield
        return
    _flush_all()
    try:
        saved = {fd: os.dup(fd) for fd in (1, 2)}
        held = {fd: tempfile.TemporaryFile() for fd in (1, 2)}
    except OSError:  # no descriptors or no room to hold the output: show it as it comes
        yield
        return
    # Python-level writes too: Blender prints its reports through sys.stdout, which need not
    # be descriptor 1 (a test's capture, an embedding application).
    streams = sys.stdout, sys.stderr
    texts = io.StringIO(), io.StringIO()
    ok = False
    try:
        for fd, tmp in held.items():
            os.dup2(tmp.fileno(), fd)
        sys.stdout, sys.stderr = texts
        yield
        ok = True
    finally:
        sys.stdout, sys.stderr = streams
        _flush_all()
        for fd in (1, 2):
            os.dup2(saved[fd], fd)
            os.close(saved[fd])
        for (fd, tmp), stream, text in zip(held.items(), streams, texts):
            if ok:
                tmp.seek(0)
                with contextlib.suppress(OSError):
                    os.write(fd, tmp.read())
                with contextlib.suppress(Exception):
                    stream.write(text.getvalue())
                    stream.flush()
            tmp.close()
