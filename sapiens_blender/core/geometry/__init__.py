# SPDX-License-Identifier: GPL-3.0-or-later
"""Geometry on numpy: surface mesh, normal textures, parts, 3D joints, skeleton.

Everything here runs inside Blender's Python (numpy + stdlib only). Conventions, the bone
hierarchy and the measured accuracy are documented in docs/geometry.md.
"""

from .types import CAMERA_TO_BLENDER, GeometryError, Joint, Skeleton, SurfaceMesh, camera_to_blender  # noqa: I001
from .surface import build_surface_mesh, reproject, unproject
from .normals import (encode_normal_texture, object_space_normal_map, tangent_frames,
                      tangent_space_normal_map)
from .joints import lift_joints
from .skeleton import BONE_HIERARCHY, build_skeleton
from .closed import close_body
from .weights import VertexWeights, part_based_weights

__all__ = [
    "BONE_HIERARCHY", "CAMERA_TO_BLENDER", "GeometryError", "Joint", "Skeleton", "SurfaceMesh",
    "VertexWeights", "build_skeleton", "build_surface_mesh", "camera_to_blender", "close_body",
    "encode_normal_texture", "lift_joints", "object_space_normal_map", "part_based_weights",
    "reproject", "tangent_frames", "tangent_space_normal_map", "unproject",
]
