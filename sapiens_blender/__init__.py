# SPDX-License-Identifier: GPL-3.0-or-later
"""Sapiens for Blender: photos of people to rigged 3D human assets.

This file only registers the add-on. It must stay importable without bpy so the bpy-free
core and the CLI work in plain Python.
"""

__version__ = "0.1.0"


def register():
    from .ui import registration

    registration.register()


def unregister():
    from .ui import registration

    registration.unregister()
