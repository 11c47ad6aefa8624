# SPDX-License-Identifier: GPL-3.0-or-later
"""Skinning: automatic (bone heat) weights, with part-based weights where bone heat fails."""

from __future__ import annotations

import bpy
import numpy as np

from .context import preserved_selection, select_only
from .mesh import mesh_vertices

WEIGHT_STEPS = 1000  # weights are written grouped by value, quantised to 1/1000


def parent_with_automatic_weights(mesh_obj: bpy.types.Object, arm_obj: bpy.types.Object) -> None:
    """``parent_set(type='ARMATURE_AUTO')`` with the two objects selected (armature active)."""
    with preserved_selection() as view_layer:
        select_only(view_layer, [mesh_obj, arm_obj], arm_obj)
        with bpy.context.temp_override(
            active_object=arm_obj, object=arm_obj,
            selected_objects=[mesh_obj, arm_obj], selected_editable_objects=[mesh_obj, arm_obj],
        ):
            bpy.ops.object.parent_set(type="ARMATURE_AUTO")


def parent_with_armature(mesh_obj: bpy.types.Object, arm_obj: bpy.types.Object) -> None:
    """Parent + Armature modifier without computing weights (for weights written by us)."""
    mesh_obj.parent = arm_obj
    mesh_obj.matrix_parent_inverse = arm_obj.matrix_world.inverted()
    if not any(m.type == "ARMATURE" for m in mesh_obj.modifiers):
        mod = mesh_obj.modifiers.new("Armature", "ARMATURE")
        mod.object = arm_obj


def unweighted_vertices(mesh_obj: bpy.types.Object, arm_obj: bpy.types.Object) -> np.ndarray:
    """bool [N]: vertices with no deforming weight at all.

    Reading every vertex's groups would be a per-vertex Python loop; instead, translate the root
    bones by 1 m in pose mode and evaluate once: the Armature modifier moves every weighted
    vertex by exactly that rigid offset (weights are normalised) and leaves unweighted ones.
    """
    rest = mesh_vertices(mesh_obj, evaluated=True)
    roots = [pb for pb in arm_obj.pose.bones if pb.parent is None]
    saved = [tuple(pb.location) for pb in roots]
    for pb in roots:
        pb.location = (0.0, 1.0, 0.0)  # along each root bone: any non-zero offset will do
    bpy.context.view_layer.update()
    try:
        moved = mesh_vertices(mesh_obj, evaluated=True)
    finally:
        for pb, loc in zip(roots, saved):
            pb.location = loc
        bpy.context.view_layer.update()
    return np.linalg.norm(moved - rest, axis=1) < 0.5


def write_weights(
    mesh_obj: bpy.types.Object, bone_names: list[str], weights: np.ndarray, vertices: np.ndarray | None = None
) -> None:
    """Write ``weights`` [N,B] (for ``vertices``, all by default) into groups named after bones.

    ``VertexGroup.add`` takes one weight per call, so vertices are grouped by quantised weight:
    at most WEIGHT_STEPS C-level calls per bone, never one per vertex.
    """
    weights = np.asarray(weights, np.float64)
    idx = np.arange(len(weights)) if vertices is None else np.asarray(vertices, np.int64)
    q = np.rint(np.clip(weights[idx], 0.0, 1.0) * WEIGHT_STEPS).astype(np.int64)
    for b, bone in enumerate(bone_names):
        column = q[:, b]
        nonzero = column > 0
        if not nonzero.any():
            continue
        group = mesh_obj.vertex_groups.get(bone) or mesh_obj.vertex_groups.new(name=bone)
        col, ids = column[nonzero], idx[nonzero]
        order = np.argsort(col, kind="stable")
        col, ids = col[order], ids[order]
        values, starts = np.unique(col, return_index=True)
        for value, chunk in zip(values, np.split(ids, starts[1:])):
            group.add(chunk.tolist(), float(value) / WEIGHT_STEPS, "REPLACE")


def skin(
    mesh_obj: bpy.types.Object,
    arm_obj: bpy.types.Object,
    fallback_weights: np.ndarray | None,
    bone_names: list[str],
    method: str = "auto",
) -> dict:
    """Parent the mesh to the armature and make sure every vertex is weighted.

    method 'auto': bone heat, then ``fallback_weights`` [N,B] (part-based, from the geometry
    core) for the vertices bone heat left without weight; 'parts': fallback weights only.
    Returns a report: method used, how many vertices fell back, and whether any stay unweighted.
    """
    report = {"method": method, "fallback_vertices": 0, "vertices": len(mesh_obj.data.vertices)}
    if method == "auto":
        try:
            parent_with_automatic_weights(mesh_obj, arm_obj)
        except RuntimeError as exc:  # bone heat can fail outright on degenerate input
            report["auto_error"] = str(exc)
            parent_with_armature(mesh_obj, arm_obj)
    elif method == "parts":
        parent_with_armature(mesh_obj, arm_obj)
    else:
        raise ValueError(f"skinning method must be 'auto' or 'parts', got {method!r}")
    missing = unweighted_vertices(mesh_obj, arm_obj)
    if missing.any() and fallback_weights is not None:
        write_weights(mesh_obj, bone_names, fallback_weights, np.flatnonzero(missing))
        report["fallback_vertices"] = int(missing.sum())
        missing = unweighted_vertices(mesh_obj, arm_obj)
    report["unweighted_vertices"] = int(missing.sum())
    return report
