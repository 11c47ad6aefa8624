# SPDX-License-Identifier: GPL-3.0-or-later
"""One batch job built in the current process: the code path every engine shares.

Runs where ``bpy`` is importable (a local builder process or a Ray worker process), never in a
thread next to another build: bpy is one scene per process. A fresh empty scene per job keeps
names and outputs independent of what the process built before. The import of ``bpy`` happens
on first use, once per process.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path


def build_job(job: dict, maps=None) -> dict:
    """Build ``job`` and write its outputs (atomically). ``maps``: already analysed
    :class:`~sapiens_blender.core.maps.canonical.Maps` for a photo; otherwise a photo is analysed through
    ``job['server']``. Returns ``{"ok": True, "summary", "report", "seconds", "timings"}``
    (``report``: ``BuildResult.to_dict()``, JSON-ready) or
    ``{"ok": False, "error"}``: one bad input must not end the batch."""
    start = time.perf_counter()
    try:
        from .. import api
        from ..core.build.options import BuildOptions

        api.new_scene()
        options = BuildOptions(name=job["name"], **job["options"])
        source = Path(job["input"])
        timings = {}
        # With a body asked for, maps without a fit are fitted by the job's server.
        server = {"server": job.get("server"), "token": job.get("token")}
        if job.get("scan"):  # a folder of one person's views -> one scanned body
            maps_dir = source if any(source.glob("*.npz")) else None
            result = api.scan([] if maps_dir else [source], maps_dir=maps_dir, model=job.get("model") or api.DEFAULT_MODEL,
                              body=options.body if options.body != "none" else "clothed",
                              rig_names=options.rig_names, stride=options.stride, name=job["name"], **server)
        elif maps is not None:
            result = api.build_from_maps(maps, options, **server)
        elif source.suffix.lower() == ".npz":
            result = api.build_from_maps(source, options, **server)
        else:
            analysis_start = time.perf_counter()
            maps = api.analyze(source, model=job.get("model") or api.DEFAULT_MODEL,
                               server=job["server"], token=job.get("token"), body=options.body)
            timings["analysis"] = time.perf_counter() - analysis_start
            result = api.build_from_maps(maps, options)
        timings["build"] = sum(result.timings.values())
        export_start = time.perf_counter()
        api.export_all(job["outputs"], result)  # all formats or none
        timings["export"] = time.perf_counter() - export_start
        return {"ok": True, "summary": result.summary(), "report": result.to_dict(), "seconds": time.perf_counter() - start,
                "timings": timings}
    except Exception as exc:  # reported per input; the batch goes on
        traceback.print_exc()
        return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
