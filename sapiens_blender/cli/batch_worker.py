# SPDX-License-Identifier: GPL-3.0-or-later
"""A batch builder process: imports bpy once, then builds one job per JSON line on stdin.

Replies go, one JSON line per job, to a private copy of the original stdout; fd 1 itself is
pointed at stderr so that Blender's and the exporters' console output cannot corrupt them.
"""

from __future__ import annotations

import json
import os
import sys


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import bpy  # noqa: F401  (once per process: this is the expensive import)

    from ..core.engines.build_job import build_job

    for line in sys.stdin:
        if not line.strip():
            continue
        reply = build_job(json.loads(line))
        replies.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
