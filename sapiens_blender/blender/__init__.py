# SPDX-License-Identifier: GPL-3.0-or-later
"""Blender layer: builders that write the geometry core's numpy arrays into bpy data.

Every builder is a plain function (no operator, no undo push): the UI operators that call them
carry ``bl_options = {'UNDO'}``, so one click is one undo step. Builders only *add* data-blocks
with fresh names; nothing the user already had is renamed, changed or deleted (the scene's
render resolution and active camera are the documented exception, see ``camera.py``).
"""

from .deterministic import import_bpy as _import_bpy

_import_bpy()  # before any module of this package imports bpy: deterministic exports
