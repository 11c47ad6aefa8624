# SPDX-License-Identifier: GPL-3.0-or-later
"""Skeleton -> Blender armature object (edit bones: heads, tails, parents, roll)."""

from __future__ import annotations

from contextlib import contextmanager

import bpy
import numpy as np

from ..core.geometry.types import Skeleton, camera_to_blender
from .context import preserved_selection, select_only

MIN_BONE_LENGTH = 1e-4  # Blender deletes zero-length bones when leaving edit mode


@contextmanager
def new_armature_in_edit_mode(name: str, collection: bpy.types.Collection, display_type: str):
    """A new armature object in ``collection``, in edit mode for the ``with`` block (the only way
    to create bones; it works headless): yields (object, armature data). Back in object mode
    afterwards, with the user's mode, selection and active object restored."""
    data = bpy.data.armatures.new(name)
    data.display_type = display_type
    obj = bpy.data.objects.new(name, data)
    obj.show_in_front = True
    collection.objects.link(obj)
    with preserved_selection() as view_layer:
        select_only(view_layer, [obj], obj)
        bpy.ops.object.mode_set(mode="EDIT")
        try:
            yield obj, data
        finally:
            bpy.ops.object.mode_set(mode="OBJECT")


def build_armature(skeleton: Skeleton, name: str, collection: bpy.types.Collection) -> bpy.types.Object:
    """An armature object at the origin whose bones are the skeleton's (armature space = world)."""
    heads = camera_to_blender(np.asarray(skeleton.heads, np.float64))
    tails = camera_to_blender(np.asarray(skeleton.tails, np.float64))
    # Guard degenerate bones (coincident joints): Blender would silently drop them.
    short = np.linalg.norm(tails - heads, axis=1) < MIN_BONE_LENGTH
    tails[short] = heads[short] + np.array([0.0, 0.0, 0.01])
    parents = np.asarray(skeleton.parents, np.int64)
    rolls = np.asarray(skeleton.rolls, np.float64)
    estimated = np.asarray(skeleton.estimated, bool)

    with new_armature_in_edit_mode(name, collection, "STICK") as (obj, data):
        bones = []
        for i, bone_name in enumerate(skeleton.names):  # one Python step per bone (~60), not per vertex
            eb = data.edit_bones.new(bone_name)
            eb.head = heads[i]
            eb.tail = tails[i]
            eb.roll = float(rolls[i])
            bones.append(eb)
        for i, parent in enumerate(parents):
            if parent >= 0:
                bones[i].parent = bones[parent]
                # Connect only where the child starts exactly at the parent's tail.
                bones[i].use_connect = bool(np.allclose(heads[i], tails[parent], atol=1e-6))
        names = [eb.name for eb in bones]
    for bone_name, est in zip(names, estimated):
        data.bones[bone_name]["sapiens_estimated"] = bool(est)
    return obj
