# SPDX-License-Identifier: GPL-3.0-or-later
"""Register the add-on's classes in order, unregister them in reverse, and make sure the
inference server never outlives Blender or the add-on."""

from __future__ import annotations

import bpy
from bpy.app.handlers import persistent

from . import animate, build_operators, operators, panel, preferences, properties, scan, state

CLASSES = (
    *properties.CLASSES,
    *preferences.CLASSES,
    *operators.CLASSES,
    *build_operators.CLASSES,
    *panel.CLASSES,
    *animate.CLASSES,  # after panel: its sub-panel's parent must exist
    *scan.CLASSES,
)


@persistent
def _cancel_on_load(*_args):
    """Opening another file: the running job's scene is about to disappear."""
    job = state.SESSION.job
    if job is not None and not job.finished:
        job.cancel()


def register() -> None:
    for cls in CLASSES:
        bpy.utils.register_class(cls)
    properties.register_scene_properties()
    animate.register_scene_properties()
    scan.register_scene_properties()
    bpy.app.handlers.load_pre.append(_cancel_on_load)
    # Quitting Blender: core.local_server.process stops servers at interpreter exit (atexit), and the
    # server's --parent-pid watchdog ends it if Blender crashes.


def unregister() -> None:
    state.reset_session()  # cancels jobs and stops the server we started
    if _cancel_on_load in bpy.app.handlers.load_pre:
        bpy.app.handlers.load_pre.remove(_cancel_on_load)
    scan.unregister_scene_properties()
    animate.unregister_scene_properties()
    properties.unregister_scene_properties()
    for cls in reversed(CLASSES):
        bpy.utils.unregister_class(cls)
