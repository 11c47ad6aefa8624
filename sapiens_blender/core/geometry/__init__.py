# SPDX-License-Identifier: GPL-3.0-or-later
"""Geometry on numpy: surface mesh, normal textures, parts, 3D joints, skeleton."""
