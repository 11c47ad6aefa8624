# SPDX-License-Identifier: GPL-3.0-or-later
"""The face's 52 ARKit expressions as shape keys on a fitted body's mesh (docs/expressions.md).

Shape keys deform the mesh before its modifiers, so they act at the bind pose and the armature
carries them: what anny computes (rest + offsets, then skinning). The glTF exporter writes them
as morph targets named in ``extras.targetNames``, the FBX exporter as blend shapes. Each key's
positions are written in bulk (``foreach_set``), one key per step (52).
"""

from __future__ import annotations

import bpy
import numpy as np

from ..core.body.expressions import key_positions

BASIS = "Basis"
EXPRESSIONS_PROP = "sapiens_expressions"  # custom property on the mesh: how many ARKit keys it has


def add_expression_keys(obj: bpy.types.Object, template, rest_vertices: np.ndarray,
                        values: np.ndarray | None = None) -> list[bpy.types.ShapeKey]:
    """A Basis key and one key per template expression (ARKit names), set to ``values`` [E]."""
    names = template.expression_names
    positions = key_positions(template, rest_vertices)
    obj.shape_key_add(name=BASIS, from_mix=False)
    keys = []
    for k, name in enumerate(names):
        kb = obj.shape_key_add(name=name, from_mix=False)
        kb.data.foreach_set("co", np.ascontiguousarray(positions[k]).ravel())
        kb.slider_min, kb.slider_max = 0.0, 1.0
        keys.append(kb)
    if values is not None:
        set_expression_values(obj, values, names)
    obj.data.shape_keys.use_relative = True
    obj.data[EXPRESSIONS_PROP] = len(names)
    obj.data.update()
    return keys


def set_expression_values(obj: bpy.types.Object, values, names) -> None:
    """Set the named keys' values (ARKit's 0..1)."""
    blocks = obj.data.shape_keys.key_blocks
    for name, value in zip(names, np.clip(np.asarray(values, np.float64), 0.0, 1.0)):
        blocks[name].value = float(value)


def expression_values(obj: bpy.types.Object) -> dict[str, float]:
    """{ARKit name: value} of a body mesh's expression keys (empty when it has none)."""
    keys = obj.data.shape_keys if obj.type == "MESH" else None
    if keys is None:
        return {}
    return {kb.name: float(kb.value) for kb in keys.key_blocks if kb.name != BASIS}


def key_expressions(obj: bpy.types.Object, names, keys: np.ndarray, values: np.ndarray, action_name: str):
    """One action on the mesh's shape keys: every expression's value keyed on the frames ``keys``
    [T] (``values`` [T,E]); glTF writes it as a ``weights`` channel, FBX as blend-shape curves."""
    shape_keys = obj.data.shape_keys
    action = bpy.data.actions.new(action_name)
    action.use_fake_user = True
    shape_keys.animation_data_create()
    shape_keys.animation_data.action = action
    n = len(keys)
    co = np.empty(2 * n, np.float32)
    co[0::2] = keys
    linear = np.full(n, bpy.types.Keyframe.bl_rna.properties["interpolation"].enum_items["LINEAR"].value, np.int32)
    for k, name in enumerate(names):  # one curve per key (52), its points in bulk
        fc = action.fcurve_ensure_for_datablock(shape_keys, f'key_blocks["{name}"].value', group_name="Expressions")
        fc.keyframe_points.add(n)
        co[1::2] = values[:, k]
        fc.keyframe_points.foreach_set("co", co)
        fc.keyframe_points.foreach_set("interpolation", linear)
        fc.update()
    return action
