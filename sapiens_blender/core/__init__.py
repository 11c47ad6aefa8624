# SPDX-License-Identifier: GPL-3.0-or-later
"""bpy-free core: maps, protocol client, server process manager, geometry (numpy + stdlib)."""
