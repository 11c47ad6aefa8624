# SPDX-License-Identifier: GPL-3.0-or-later
"""What a build is asked to make (plain data, bpy-free): the products, the body modes and
``BuildOptions``. The Blender layer (blender/pipeline.py) reads them; the CLI, the API, the panel
and the batch fill them in without importing bpy."""

from __future__ import annotations

from dataclasses import dataclass

from ..geometry.types import Joint

PRODUCTS = ("mesh", "normal_texture", "part_materials", "armature", "body")
BODY_MODES = ("none", "minimal", "clothed")


@dataclass
class BuildOptions:
    name: str = "photo"  # the photo's stem, used in every name
    stride: int = 1  # one vertex per `stride` pixels
    closed: bool = False  # watertight body (front + inferred back) instead of the visible surface
    body: str = "none"  # 'none', or a fitted full body: 'minimal' or 'clothed' (the body fit)
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
