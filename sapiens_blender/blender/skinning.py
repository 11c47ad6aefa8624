# SPDX-License-Identifier: GPL-3.0-or-later
"""Skinning: automatic (bone heat) weights, with part-based weights where bone heat fails."""

from __future__ import annotations

import bpy
import numpy as np

from ..core.build.report import SkinningReport
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


def transfer_weights(source: bpy.types.Object, target: bpy.types.Object) -> None:
    """Copy every vertex group of ``source`` onto ``target``, interpolated from the nearest face.

    One C-level operator call (Data Transfer), however many vertices: used to carry bone-heat
    weights solved on a coarse proxy over to the full-resolution mesh.
    """
    with preserved_selection() as view_layer:
        select_only(view_layer, [source, target], source)
        with bpy.context.temp_override(
            active_object=source, object=source,
            selected_objects=[source, target], selected_editable_objects=[source, target],
        ):
            bpy.ops.object.data_transfer(
                use_reverse_transfer=False, data_type="VGROUP_WEIGHTS", use_create=True,
                vert_mapping="POLYINTERP_NEAREST", layers_select_src="ALL", layers_select_dst="NAME",
                mix_mode="REPLACE",
            )


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


def write_weights(mesh_obj: bpy.types.Object, bone_names: list[str], weights, vertices: np.ndarray | None = None) -> None:
    """Write weights into vertex groups named after the bones, for ``vertices`` (default all).

    ``weights`` is dense [N,B] (columns = ``bone_names``) or sparse, an object with ``indices``
    and ``weights`` [N,K] (bone index and weight per slot, as the geometry core's VertexWeights).
    ``VertexGroup.add`` takes one weight per call, so vertices are grouped by quantised weight:
    at most WEIGHT_STEPS C-level calls per bone, never one per vertex.
    """
    if hasattr(weights, "indices"):
        idx_all, w_all = np.asarray(weights.indices), np.asarray(weights.weights, np.float64)
        rows = np.arange(len(idx_all)) if vertices is None else np.asarray(vertices, np.int64)
        k = idx_all.shape[1]
        vert = np.repeat(rows, k)
        bone = idx_all[rows].ravel()
        value = w_all[rows].ravel()
    else:
        dense = np.asarray(weights, np.float64)
        rows = np.arange(len(dense)) if vertices is None else np.asarray(vertices, np.int64)
        vert = np.repeat(rows, dense.shape[1])
        bone = np.tile(np.arange(dense.shape[1]), len(rows))
        value = dense[rows].ravel()
    q = np.rint(np.clip(value, 0.0, 1.0) * WEIGHT_STEPS).astype(np.int64)
    keep = q > 0
    vert, bone, q = vert[keep], bone[keep], q[keep]
    if not len(vert):
        return  # nothing to write (e.g. bones whose part is out of the photo)
    # Sort by (bone, weight) once, then one add() per run of equal (bone, weight).
    order = np.lexsort((q, bone))
    vert, bone, q = vert[order], bone[order], q[order]
    starts = np.flatnonzero(np.r_[True, (bone[1:] != bone[:-1]) | (q[1:] != q[:-1])])
    groups: dict[int, bpy.types.VertexGroup] = {}
    for start, end in zip(starts, np.r_[starts[1:], len(vert)]):
        b = int(bone[start])
        if b not in groups:
            name = bone_names[b]
            groups[b] = mesh_obj.vertex_groups.get(name) or mesh_obj.vertex_groups.new(name=name)
        groups[b].add(vert[start:end].tolist(), float(q[start]) / WEIGHT_STEPS, "REPLACE")


def skin(
    mesh_obj: bpy.types.Object,
    arm_obj: bpy.types.Object,
    fallback_weights,
    bone_names: list[str],
    method: str = "auto",
    proxy: bpy.types.Object | None = None,
    constrain=None,
) -> SkinningReport:
    """Parent the mesh to the armature and make sure every vertex is weighted.

    method 'auto': bone heat, then ``fallback_weights`` (part-based, from the geometry core;
    dense or sparse as in ``write_weights``) for the vertices bone heat left without weight;
    'parts': fallback weights only. With ``proxy`` (a coarser mesh of the same surface, linked
    in the scene) bone heat is solved on the proxy and its weights transferred: bone heat grows
    much faster than linearly with the vertex count (36 s at 77k vertices, see
    docs/performance.md), the transferred weights are smooth anyway.
    ``constrain`` (dense [N,B] -> dense [N,B], e.g. the geometry core's constrain_weights)
    then rewrites every vertex's weights: on its part, at most 4 bones, renormalised.
    Returns a report: method used, how many vertices fell back, and whether any stay unweighted.
    """
    steps = skin_steps(mesh_obj, arm_obj, fallback_weights, bone_names, method, proxy, constrain)
    while True:
        try:
            next(steps)
        except StopIteration as done:
            return done.value


def skin_steps(mesh_obj, arm_obj, fallback_weights, bone_names, method="auto", proxy=None, constrain=None):
    """``skin`` in steps: yields the name of the next step, returns the report. Bone heat is
    one Blender operator call and cannot be split further."""
    report = SkinningReport(method=method, vertices=len(mesh_obj.data.vertices))
    if method == "auto":
        yield "bone heat"
        try:
            if proxy is not None:
                parent_with_automatic_weights(proxy, arm_obj)
                parent_with_armature(mesh_obj, arm_obj)
                yield "weight transfer"
                transfer_weights(proxy, mesh_obj)
                report.proxy_vertices = len(proxy.data.vertices)
            else:
                parent_with_automatic_weights(mesh_obj, arm_obj)
        except RuntimeError as exc:  # bone heat can fail outright on degenerate input
            report.auto_error = str(exc)
            parent_with_armature(mesh_obj, arm_obj)
    elif method == "parts":
        parent_with_armature(mesh_obj, arm_obj)
    else:
        raise ValueError(f"skinning method must be 'auto' or 'parts', got {method!r}")
    yield "weight check"
    missing = unweighted_vertices(mesh_obj, arm_obj)
    if missing.any() and fallback_weights is not None:
        write_weights(mesh_obj, bone_names, fallback_weights, np.flatnonzero(missing))
        report.fallback_vertices = int(missing.sum())
    if constrain is not None:
        yield "weights on their parts"
        constrained = constrain(read_weights(mesh_obj, bone_names))
        for part in replace_weights_steps(mesh_obj, bone_names, constrained):
            yield f"writing weights {part}"
        report.max_influences = int(max_influences(mesh_obj, bone_names))
    yield "final check"
    missing = unweighted_vertices(mesh_obj, arm_obj)
    report.unweighted_vertices = int(missing.sum())
    return report


def replace_weights(mesh_obj: bpy.types.Object, bone_names: list[str], dense: np.ndarray) -> None:
    """The bones' vertex groups become exactly ``dense`` [N,B] (other groups are untouched)."""
    for _ in replace_weights_steps(mesh_obj, bone_names, dense):
        pass


def replace_weights_steps(mesh_obj, bone_names: list[str], dense: np.ndarray, bones_per_step: int = 6):
    """``replace_weights`` a few bones at a time; yields "k/n" before each batch."""
    for name in bone_names:
        group = mesh_obj.vertex_groups.get(name)
        if group is not None:
            mesh_obj.vertex_groups.remove(group)
    batches = [list(range(i, min(i + bones_per_step, len(bone_names))))
               for i in range(0, len(bone_names), bones_per_step)]  # fmt: skip
    for k, columns in enumerate(batches):
        yield f"{k + 1}/{len(batches)}"
        part = np.zeros_like(dense)
        part[:, columns] = dense[:, columns]
        write_weights(mesh_obj, bone_names, part)


def max_influences(mesh_obj: bpy.types.Object, bone_names: list[str]) -> int:
    """The most bones any vertex follows (glTF and FBX carry 4)."""
    dense = read_weights(mesh_obj, bone_names)
    return int((dense > 0).sum(axis=1).max(initial=0))


def read_weights(mesh_obj: bpy.types.Object, group_names: list[str]) -> np.ndarray:
    """Dense float32 [N, len(group_names)] vertex-group weights (0 where a vertex is not in a
    group, or the group does not exist), read in one evaluation: a temporary Geometry Nodes
    modifier stores each group as a named attribute of the evaluated mesh, read with
    foreach_get (VertexGroup.weight() would be a per-vertex Python loop)."""
    n = len(mesh_obj.data.vertices)
    out = np.zeros((n, len(group_names)), np.float32)
    present = [(i, name) for i, name in enumerate(group_names) if mesh_obj.vertex_groups.get(name) is not None]
    if not present or n == 0:
        return out
    tree = bpy.data.node_groups.new("sapiens weight reader", "GeometryNodeTree")
    modifier = None
    disabled = []
    try:
        tree.interface.new_socket("Geometry", in_out="INPUT", socket_type="NodeSocketGeometry")
        tree.interface.new_socket("Geometry", in_out="OUTPUT", socket_type="NodeSocketGeometry")
        nodes, links = tree.nodes, tree.links
        geometry = nodes.new("NodeGroupInput").outputs[0]
        for i, name in present:
            source = nodes.new("GeometryNodeInputNamedAttribute")
            source.data_type = "FLOAT"
            source.inputs["Name"].default_value = name
            store = nodes.new("GeometryNodeStoreNamedAttribute")
            store.data_type, store.domain = "FLOAT", "POINT"
            store.inputs["Name"].default_value = f"sapiens_read_{i}"
            links.new(geometry, store.inputs["Geometry"])
            links.new(source.outputs["Attribute"], store.inputs["Value"])
            geometry = store.outputs["Geometry"]
        links.new(geometry, nodes.new("NodeGroupOutput").inputs[0])
        for mod in mesh_obj.modifiers:  # read the weights, not the deformed or subdivided mesh
            if mod.show_viewport:
                disabled.append(mod)
                mod.show_viewport = False
        modifier = mesh_obj.modifiers.new("sapiens weight reader", "NODES")
        modifier.node_group = tree
        depsgraph = bpy.context.evaluated_depsgraph_get()
        evaluated = mesh_obj.evaluated_get(depsgraph)
        data = evaluated.data
        column = np.empty(n, np.float32)
        for i, _ in present:
            data.attributes[f"sapiens_read_{i}"].data.foreach_get("value", column)
            out[:, i] = column
    finally:
        if modifier is not None:
            mesh_obj.modifiers.remove(modifier)
        for mod in disabled:
            mod.show_viewport = True
        bpy.data.node_groups.remove(tree)
    return out
