# SPDX-License-Identifier: GPL-3.0-or-later
"""A batch builder process: imports bpy once, then builds one job per JSON line on stdin.

Replies go, one JSON line per job, to a private copy of the original stdout; fd 1 itself is
pointed at stderr so that Blender's and the exporters' console output cannot corrupt them.
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time


PARENT_ENV = "SAPIENS_BATCH_PID"


def die_with_parent() -> None:
    """A builder must not outlive its batch (killed, even with SIGKILL): on Linux the kernel
    kills us when the parent dies; elsewhere a thread notices that the parent changed. A
    temporary file a killed export leaves is removed by the next batch (its pid is dead)."""
    parent = int(os.environ.get(PARENT_ENV) or os.getppid())  # the batch says who it is
    if sys.platform.startswith("linux"):
        import ctypes
        import signal

        try:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
        if os.getppid() != parent:  # the parent died before the call
            os._exit(1)

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.2)
        os._exit(1)

    threading.Thread(target=watch, name="parent-watch", daemon=True).start()


def main() -> None:
    die_with_parent()
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    from ..blender.deterministic import import_bpy

    import_bpy()  # once per process (the expensive import), sized for deterministic exports

    from ..batch.build_job import build_job

    for line in sys.stdin:
        if not line.strip():
            continue
        reply = build_job(json.loads(line))
        replies.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
