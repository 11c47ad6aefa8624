# SPDX-License-Identifier: GPL-3.0-or-later
"""Collections, selection and mode handling shared by the builders."""

from __future__ import annotations

from contextlib import contextmanager

import bpy


def new_collection(name: str, parent: bpy.types.Collection | None = None) -> bpy.types.Collection:
    """A new collection linked under ``parent`` (the scene's master collection by default).

    ``bpy.data.collections.new`` gives a unique name (``.001`` suffix) when ``name`` is taken,
    so an existing collection of the user's is never reused or renamed.
    """
    coll = bpy.data.collections.new(name)
    (parent or bpy.context.scene.collection).children.link(coll)
    return coll


def link(obj: bpy.types.Object, collection: bpy.types.Collection) -> bpy.types.Object:
    collection.objects.link(obj)
    return obj


@contextmanager
def preserved_selection():
    """Restore the user's selection, active object and mode after operator-based steps.

    Operators such as ``mode_set`` and ``parent_set`` act on the view layer's selection; the
    builders select their own objects for them and put everything back afterwards.
    """
    view_layer = bpy.context.view_layer
    active = view_layer.objects.active
    selected = [ob for ob in view_layer.objects if ob.select_get()]
    mode = bpy.context.mode
    if mode != "OBJECT" and active is not None:
        bpy.ops.object.mode_set(mode="OBJECT")
    try:
        yield view_layer
    finally:
        if bpy.context.mode != "OBJECT":
            bpy.ops.object.mode_set(mode="OBJECT")
        for ob in view_layer.objects:
            ob.select_set(ob in selected)
        view_layer.objects.active = active
        restore = {"EDIT_MESH": "EDIT", "EDIT_ARMATURE": "EDIT", "POSE": "POSE"}.get(mode)
        if restore and active is not None and active.name in view_layer.objects:
            bpy.ops.object.mode_set(mode=restore)


def select_only(view_layer, objects, active) -> None:
    for ob in view_layer.objects:
        ob.select_set(False)
    for ob in objects:
        ob.select_set(True)
    view_layer.objects.active = active
