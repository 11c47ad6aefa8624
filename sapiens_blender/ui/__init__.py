# SPDX-License-Identifier: GPL-3.0-or-later
"""Blender UI: preferences, panel, operators and the timer glue (imports bpy in submodules)."""
