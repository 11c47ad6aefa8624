# SPDX-License-Identifier: GPL-3.0-or-later
"""A batch builder process: imports bpy once, then builds one job per JSON line on stdin.

Replies go, one JSON line per job, to a private copy of the original stdout; fd 1 itself is
pointed at stderr so that Blender's and the exporters' console output cannot corrupt them.
"""

from __future__ import annotations

import json
import os
import sys
import time
import traceback
from pathlib import Path


def main() -> None:
    replies = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    import bpy  # noqa: F401  (once per process: this is the expensive import)

    from .. import api
    from ..blender.pipeline import BuildOptions

    for line in sys.stdin:
        if not line.strip():
            continue
        job = json.loads(line)
        start = time.perf_counter()
        try:
            api.new_scene()  # same names and outputs whatever this process built before
            options = BuildOptions(name=job["name"], **job["options"])
            source = Path(job["input"])
            if source.suffix.lower() == ".npz":
                result = api.build_from_maps(source, options, server=job.get("server"), token=job.get("token"))
            else:
                result = api.build_from_photo(source, model=job.get("model") or api.DEFAULT_MODEL,
                                              server=job["server"], token=job.get("token"), options=options)
            for out in job["outputs"]:
                api.export(out, result)
            reply = {"ok": True, "summary": result.summary(), "seconds": time.perf_counter() - start}
        except Exception as exc:  # one bad input must not end the batch: report it and go on
            traceback.print_exc()
            reply = {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        replies.write(json.dumps(reply) + "\n")


if __name__ == "__main__":
    main()
