# SPDX-License-Identifier: GPL-3.0-or-later
"""A world and a key light for a built scene that has none, so a render is never black.

Only what is missing is added: a scene with its own world keeps it, a scene with any light
gets no other. The key light is a sun from where the photo's light came (core lighting fit);
the world is the photo's backdrop colour, a soft fill.
"""

from __future__ import annotations

import bpy
import numpy as np
from mathutils import Vector

from ..core.geometry.lighting import estimate_lighting
from ..core.geometry.types import camera_to_blender
from ..core.maps.canonical import Maps

KEY_STRENGTH = 3.0  # sun W/m²: a well exposed subject under Blender's default view transform
MIN_WORLD = 0.08  # the world's luminance at least this: shadows stay readable


def ensure_world_and_light(scene: bpy.types.Scene, maps: Maps, name: str,
                           collection: bpy.types.Collection) -> list[str]:  # fmt: skip
    """Add what is missing; returns what was added ("world", "light")."""
    has_world = scene.world is not None
    has_light = any(ob.type == "LIGHT" for ob in scene.objects)
    if has_world and has_light:
        return []
    lighting = estimate_lighting(maps.image, maps.normal, maps.mask)
    added = []
    if not has_world:
        scene.world = _world(f"{name} world", lighting.background)
        added.append("world")
    if not has_light:
        light = bpy.data.lights.new(f"{name} light", "SUN")
        light.energy = KEY_STRENGTH * (0.5 + lighting.key_share)
        light.angle = np.radians(10.0)  # soft-edged shadows, like a large window
        obj = bpy.data.objects.new(f"{name} light", light)
        towards_light = Vector(camera_to_blender(lighting.direction).tolist())
        obj.rotation_euler = towards_light.to_track_quat("Z", "Y").to_euler()  # a sun shines along -Z
        obj.location = towards_light * 3.0  # only for the viewport: a sun's position does not matter
        collection.objects.link(obj)
        added.append("light")
    return added


def _world(name: str, background) -> bpy.types.World:
    world = bpy.data.worlds.new(name)
    colour = np.asarray(background, np.float64)
    luminance = float(colour @ np.array([0.2126, 0.7152, 0.0722]))
    if luminance < MIN_WORLD:
        colour = colour + (MIN_WORLD - luminance)
    world.color = colour.tolist()  # the viewport and EEVEE without nodes
    if world.node_tree is None:  # Blender < 5 creates worlds without nodes
        world.use_nodes = True
    background_node = next((n for n in world.node_tree.nodes if n.type == "BACKGROUND"), None)
    if background_node is not None:
        background_node.inputs["Color"].default_value = (*colour.tolist(), 1.0)
        background_node.inputs["Strength"].default_value = 1.0
    return world
