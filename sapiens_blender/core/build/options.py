# SPDX-License-Identifier: GPL-3.0-or-later
"""What a build is asked to make (plain data, bpy-free): the products, the body modes and
``BuildOptions``. The Blender layer (blender/pipeline.py) reads them; the CLI, the API, the panel
and the batch fill them in without importing bpy."""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

from ..geometry.types import Joint

PRODUCTS = ("mesh", "normal_texture", "part_materials", "armature", "body")


class BodyMode(str, Enum):
    """What body a build makes: none (the relief), or the fitted body without or with the photo's
    clothing. A str, so 'none' / 'minimal' / 'clothed' (CLI, panel, API keywords) compare equal."""

    NONE = "none"
    MINIMAL = "minimal"
    CLOTHED = "clothed"

    @classmethod
    def parse(cls, value: "BodyMode | str | None") -> "BodyMode":
        """A body mode from its name (None: none); anything else is a ValueError naming the modes."""
        if value is None:
            return cls.NONE
        try:
            return cls(value)
        except ValueError:
            raise ValueError(f"body must be one of {', '.join(BODY_MODES)}, got {value!r}") from None


BODY_MODES = tuple(m.value for m in BodyMode)
FITTED_BODY_MODES = (BodyMode.CLOTHED.value, BodyMode.MINIMAL.value)  # the modes that build a body


def wants_fit(body: "BodyMode | str | None") -> bool:
    """Whether the body mode needs the body fit (every mode but none does)."""
    return BodyMode.parse(body) is not BodyMode.NONE


@dataclass
class BuildOptions:
    name: str = "photo"  # the photo's stem, used in every name
    stride: int = 1  # one vertex per `stride` pixels
    closed: bool = False  # watertight body (front + inferred back) instead of the visible surface
    body: str = BodyMode.NONE.value  # a BodyMode: 'none', or a fitted full body, 'minimal' or 'clothed'
    normal_space: str = "OBJECT"  # 'OBJECT' (exact, Blender) or 'TANGENT' (glTF/FBX/game engines)
    part_materials: bool = True
    armature: bool = True
    skinning: str = "auto"  # 'auto' (bone heat + part fallback), 'parts', or 'none'
    people: list[int] | None = None  # person ids to build (default: all in the mask)
    joints: dict[int, dict[str, Joint]] | None = None  # 3D joints per person id (a joints file)
    make_active_camera: bool = True
    lighting: bool = True  # a world and a sun from the photo where the scene has none (renders not black)
    rig_names: str = "anny"  # the fitted body's bone names: 'anny', 'rigify', 'mixamo' or 'unreal' (body/rig_names.py)
    expressions: bool = True  # the fitted body's 52 ARKit face shape keys (False: the lean file)
    # Bone heat runs on a coarser proxy of the surface above this many vertices (then the weights
    # are transferred): it costs ~5 s at 19k vertices and ~36 s at 77k.
    bone_heat_max_vertices: int = 20000
