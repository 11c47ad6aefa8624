# SPDX-License-Identifier: GPL-3.0-or-later
"""Plain data passed from the geometry core to the Blender builders (numpy arrays only).

Frames: the geometry core computes in the camera frame of the maps (OpenCV: x right, y down,
z forward, metres). ``camera_to_blender`` is the single conversion to Blender's world:
world X = x, world Y = z (depth goes away from the camera along +Y), world Z = -y (up).
The Blender camera sits at the origin looking along +Y with +Z up.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import SapiensError

# Rotation taking camera-frame vectors to Blender world vectors: w = R @ c.
CAMERA_TO_BLENDER = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0], [0.0, -1.0, 0.0]], dtype=np.float64)


def camera_to_blender(xyz: np.ndarray) -> np.ndarray:
    """Map camera-frame points or directions [...,3] to Blender world axes (same dtype)."""
    xyz = np.asarray(xyz)
    out = np.empty_like(xyz)
    out[..., 0] = xyz[..., 0]
    out[..., 1] = xyz[..., 2]
    out[..., 2] = -xyz[..., 1]
    return out


class GeometryError(SapiensError, ValueError):
    """The maps cannot give the requested geometry (unknown person, no depth, ...). Says why."""


@dataclass
class SurfaceMesh:
    """A triangle mesh of one person's visible surface, in the camera frame.

    ``pixel`` keeps, per vertex, the (row, col) of the maps pixel it came from (-1 for vertices
    that have none, e.g. the back of a closed body) so textures and checks can look it up.
    """

    vertices: np.ndarray  # float32 [N,3], camera frame, metres
    faces: np.ndarray  # int32 [M,3], counter-clockwise seen from the camera (normals towards it)
    uv: np.ndarray  # float32 [N,2], photo coordinates in [0,1], v up (Blender convention)
    pixel: np.ndarray  # int32 [N,2], (row, col) or -1
    face_parts: np.ndarray  # uint8 [M], class id per face
    vertex_parts: np.ndarray  # uint8 [N], class id per vertex
    person_id: int = 1
    report: dict = field(default_factory=dict)  # what was dropped/filled, for the user


@dataclass
class Joint:
    name: str  # Goliath-308 keypoint name, or a derived joint name (e.g. "pelvis")
    xyz: np.ndarray  # float64 [3], camera frame, metres, inside the body
    estimated: bool = False


@dataclass
class Skeleton:
    """Bones in the camera frame; ``parents[i]`` is an index into the same lists or -1."""

    names: list[str]
    heads: np.ndarray  # float64 [B,3]
    tails: np.ndarray  # float64 [B,3]
    parents: np.ndarray  # int32 [B]
    rolls: np.ndarray  # float64 [B], radians, Blender edit-bone roll in world space
    estimated: np.ndarray  # bool [B], the bone rests on a filled-in joint
    person_id: int = 1
    # Blender world direction each bone's local Z axis points to (what ``rolls`` encodes); usable
    # with ``EditBone.align_roll``. None when not computed.
    z_axes: np.ndarray | None = None  # float64 [B,3]

    def index(self, name: str) -> int:
        return self.names.index(name)
