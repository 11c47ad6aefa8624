# SPDX-License-Identifier: GPL-3.0-or-later
"""Geometry on numpy: surface mesh, normal textures, parts, 3D joints, skeleton.

Everything here runs inside Blender's Python (numpy + stdlib only). Conventions and the bone
hierarchy are documented in docs/geometry.md.
"""

from .types import CAMERA_TO_BLENDER, GeometryError, Joint, Skeleton, SurfaceMesh, camera_to_blender

__all__ = ["CAMERA_TO_BLENDER", "GeometryError", "Joint", "Skeleton", "SurfaceMesh", "camera_to_blender"]
