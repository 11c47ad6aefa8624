# SPDX-License-Identifier: GPL-3.0-or-later
"""Materials: the photo as base colour plus a normal texture, and one slot per body part."""

from __future__ import annotations

import colorsys

import bpy
import numpy as np

from .mesh import UV_LAYER

PART_GROUP_PREFIX = "part:"  # vertex groups per part; the prefix keeps them apart from bone groups


def build_photo_material(
    name: str,
    photo: bpy.types.Image,
    normal_texture: bpy.types.Image | None = None,
    normal_space: str = "OBJECT",
) -> bpy.types.Material:
    """Principled BSDF with the photo as base colour and an optional Normal Map node.

    ``normal_space`` is 'OBJECT' (exact for the built mesh, Blender only) or 'TANGENT'
    (MikkTSpace on the UV map: what glTF/FBX and game engines understand).
    """
    if normal_space not in ("OBJECT", "TANGENT"):
        raise ValueError(f"normal_space must be 'OBJECT' or 'TANGENT', got {normal_space!r}")
    mat = bpy.data.materials.new(name)
    if mat.node_tree is None:  # Blender < 5 creates materials without nodes
        mat.use_nodes = True
    nodes, links = mat.node_tree.nodes, mat.node_tree.links
    bsdf = next(n for n in nodes if n.type == "BSDF_PRINCIPLED")
    bsdf.inputs["Roughness"].default_value = 0.7
    tex = nodes.new("ShaderNodeTexImage")
    tex.name = tex.label = "Photo"
    tex.image = photo
    tex.location = (-600, 300)
    links.new(tex.outputs["Color"], bsdf.inputs["Base Color"])
    if normal_texture is not None:
        ntex = nodes.new("ShaderNodeTexImage")
        ntex.name = ntex.label = "Normal texture"
        ntex.image = normal_texture
        ntex.interpolation = "Linear"
        ntex.location = (-600, -100)
        nmap = nodes.new("ShaderNodeNormalMap")
        nmap.space = normal_space
        nmap.uv_map = UV_LAYER
        nmap.location = (-300, -100)
        links.new(ntex.outputs["Color"], nmap.inputs["Color"])
        links.new(nmap.outputs["Normal"], bsdf.inputs["Normal"])
    return mat


def part_color(index: int, count: int) -> tuple[float, float, float, float]:
    """A distinct viewport colour per part (golden-ratio hues)."""
    hue = (index * 0.618034) % 1.0
    r, g, b = colorsys.hsv_to_rgb(hue, 0.55, 0.9)
    return (r, g, b, 1.0)


def assign_part_materials(
    obj: bpy.types.Object,
    face_parts: np.ndarray,
    part_names: tuple[str, ...] | list[str],
    base_material: bpy.types.Material,
    prefix: str = "",
) -> dict[int, bpy.types.Material]:
    """One material slot per part present, named after it, faces assigned via ``material_index``.

    Each part material is a copy of ``base_material`` (same photo and normal texture, so the
    render is unchanged) with its own viewport colour, ready to be edited per part.
    """
    face_parts = np.asarray(face_parts)
    present = [int(p) for p in np.unique(face_parts)]
    materials: dict[int, bpy.types.Material] = {}
    slot_of = np.zeros(max(present + [0]) + 1, np.int32)
    for slot, part in enumerate(present):
        label = part_names[part] if part < len(part_names) else f"part_{part}"
        mat = base_material.copy()
        mat.name = f"{prefix}{label}"
        mat.diffuse_color = part_color(slot, len(present))
        obj.data.materials.append(mat)
        materials[part] = mat
        slot_of[part] = slot
    obj.data.polygons.foreach_set("material_index", np.ascontiguousarray(slot_of[face_parts]))
    return materials


def add_part_vertex_groups(
    obj: bpy.types.Object, vertex_parts: np.ndarray, part_names: tuple[str, ...] | list[str]
) -> list[str]:
    """A vertex group per part present ("part:<name>", weight 1): one C-level call per group."""
    vertex_parts = np.asarray(vertex_parts)
    names = []
    for part in np.unique(vertex_parts):
        label = part_names[part] if part < len(part_names) else f"part_{part}"
        group = obj.vertex_groups.new(name=f"{PART_GROUP_PREFIX}{label}")
        group.add(np.flatnonzero(vertex_parts == part).tolist(), 1.0, "REPLACE")
        names.append(group.name)
    return names
