# SPDX-License-Identifier: GPL-3.0-or-later
"""Import ``bpy`` so that the same build gives the same bytes.

Blender computes tangents (MikkTSpace) in parallel; the order of its float sums changes from
run to run, and the glTF exporter's rounding to 4 decimals turns that 1e-7 noise into 1e-4
differences in a few vertices' tangents. Blender sizes its task scheduler once, when ``bpy`` is
imported, from the CPUs the importing thread may use: importing it with one CPU makes
Blender's own tasks run in order (measured: byte-identical .glb files, and the build's time is
mostly numpy's, which keeps every core). Where Blender is already running (the add-on) or the
platform cannot set CPU affinity, this changes nothing: start Blender with ``--threads 1`` there.
"""

from __future__ import annotations

import os
import sys


def import_bpy():
    """``import bpy`` with Blender's task scheduler sized to one thread (see module doc)."""
    if "bpy" in sys.modules or not hasattr(os, "sched_setaffinity"):
        import bpy

        return bpy
    cpus = os.sched_getaffinity(0)
    try:
        os.sched_setaffinity(0, {min(cpus)})
    except OSError:
        cpus = None
    try:
        import bpy
    finally:
        if cpus is not None:
            os.sched_setaffinity(0, cpus)
    return bpy
