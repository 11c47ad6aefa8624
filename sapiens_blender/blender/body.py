# SPDX-License-Identifier: GPL-3.0-or-later
"""A fitted body -> Blender: Anny's mesh (topology, UVs), its rig at the bind pose, its weights,
the photo's pose on the armature, placed so it overlays the photo through the photo's camera.

Frames (docs/body_format.md): mesh and bones are in the model frame (Z up, facing -Y), which is
the armature object's local frame; the armature's ``matrix_world`` is
``CAMERA_TO_BLENDER @ placement``. Every array is written in bulk (``foreach_set``, the
attribute API, one operator call per bone group); bones are made one Python step per bone (~100).
"""

from __future__ import annotations

from contextlib import contextmanager

import bpy
import numpy as np
from mathutils import Matrix

from ..core.body.pose import local_pose_quaternions
from ..core.build.options import FITTED_BODY_MODES
from ..core.geometry.types import CAMERA_TO_BLENDER
from .context import preserved_selection, select_only
from .armature import new_armature_in_edit_mode
from .mesh import UV_LAYER

MIN_BONE_LENGTH = 1e-3  # Blender drops zero-length bones
BODY_MODE = "sapiens_body"  # custom property on the body mesh: 'minimal' or 'clothed'
INTERCHANGE_INFLUENCES = 4


def camera_to_blender_4x4() -> np.ndarray:
    out = np.eye(4)
    out[:3, :3] = CAMERA_TO_BLENDER
    return out


def build_body_mesh(rest_vertices: np.ndarray, faces: np.ndarray, uv: np.ndarray, face_uv: np.ndarray,
                    name: str, collection: bpy.types.Collection) -> bpy.types.Object:
    """The body at its bind pose (model frame), Anny's triangles and UVs, smooth shaded."""
    verts = np.ascontiguousarray(np.asarray(rest_vertices, np.float32))
    faces = np.ascontiguousarray(np.asarray(faces, np.int32))
    mesh = bpy.data.meshes.new(name)
    mesh.vertices.add(len(verts))
    mesh.loops.add(faces.size)
    mesh.polygons.add(len(faces))
    mesh.attributes["position"].data.foreach_set("vector", verts.ravel())
    mesh.attributes[".corner_vert"].data.foreach_set("value", faces.ravel())
    mesh.polygons.foreach_set("loop_start", np.arange(0, faces.size, 3, dtype=np.int32))
    mesh.update(calc_edges=True)
    mesh.uv_layers.new(name=UV_LAYER)
    corner_uv = np.asarray(uv, np.float32)[np.asarray(face_uv, np.int64).ravel()]
    mesh.attributes[UV_LAYER].data.foreach_set("vector", np.ascontiguousarray(corner_uv).ravel())
    mesh.shade_smooth()
    mesh.validate()
    obj = bpy.data.objects.new(name, mesh)
    collection.objects.link(obj)
    return obj


def build_body_armature(bone_names, parents, rest_matrices: np.ndarray, rest_tails: np.ndarray,
                        name: str, collection: bpy.types.Collection) -> bpy.types.Object:
    """An armature whose edit bones are the bind pose: each bone's matrix (Blender convention:
    Y head->tail, X/Z fix the roll) and its length to the tail."""
    rest = np.asarray(rest_matrices, np.float64)
    length = np.linalg.norm(np.asarray(rest_tails, np.float64) - rest[:, :3, 3], axis=1)
    length = np.maximum(length, MIN_BONE_LENGTH)
    with new_armature_in_edit_mode(name, collection, "OCTAHEDRAL") as (obj, data):
        bones = []
        for i, bone_name in enumerate(bone_names):  # one step per bone (~100), edit bones have no bulk API
            eb = data.edit_bones.new(bone_name)
            eb.head = (0.0, 0.0, 0.0)
            eb.tail = (0.0, float(length[i]), 0.0)
            eb.matrix = Matrix(rest[i].tolist())  # head, direction and roll from the matrix, length kept
            bones.append(eb)
        for i, parent in enumerate(parents):
            if parent >= 0:
                bones[i].parent = bones[parent]
    return obj


def write_bone_weights(obj: bpy.types.Object, bone_names, weight_bones: np.ndarray, weight_values: np.ndarray) -> None:
    """One vertex group per bone with exact float weights: each group is written as a point
    attribute (``foreach_set``) and converted in C (one operator call per bone, none per vertex).

    The object is taken out of its collections meanwhile: every operator call re-evaluates the
    view layer, which would re-evaluate this mesh each time (20x slower, see
    benchmarks/bench_body.py).
    """
    mesh = obj.data
    n_verts = len(mesh.vertices)
    wb = np.asarray(weight_bones, np.int64)
    wv = np.asarray(weight_values, np.float32)
    dense = np.zeros((len(bone_names), n_verts), np.float32)  # bone-major: each row is one group
    np.add.at(dense, (wb.T.ravel(), np.tile(np.arange(n_verts), wb.shape[1])), wv.T.ravel())
    collections = list(obj.users_collection)
    for coll in collections:
        coll.objects.unlink(obj)
    try:
        with bpy.context.temp_override(object=obj, active_object=obj):
            for b in np.flatnonzero(dense.any(axis=1)):
                temp_name = f"sapiens_weight_{b}"
                attr = mesh.attributes.new(temp_name, "FLOAT", "POINT")
                attr.data.foreach_set("value", dense[b])
                mesh.attributes.active = attr
                bpy.ops.geometry.attribute_convert(mode="VERTEX_GROUP")
                obj.vertex_groups[temp_name].name = bone_names[b]
    finally:
        for coll in collections:
            coll.objects.link(obj)


def pose_armature(arm: bpy.types.Object, rest_matrices, pose_matrices, parents) -> None:
    """Set the photo's pose: each pose bone's quaternion and location (relative to its rest and
    parent, docs/body_format.md), written in bulk in the armature's bone order."""
    quats, locs = local_pose_quaternions(rest_matrices, pose_matrices, parents)
    names = [b.name for b in arm.data.bones]
    order_names = [pb.name for pb in arm.pose.bones]
    index = {n: i for i, n in enumerate(names)}
    order = np.array([index[n] for n in order_names])
    for pb in arm.pose.bones:  # rotation mode is per bone; ~100 steps
        pb.rotation_mode = "QUATERNION"
    arm.pose.bones.foreach_set("rotation_quaternion", np.ascontiguousarray(quats[order], np.float32).ravel())
    arm.pose.bones.foreach_set("location", np.ascontiguousarray(locs[order], np.float32).ravel())
    arm.data.update_tag()
    bpy.context.view_layer.update()


def write_guessed_groups(obj: bpy.types.Object, guessed: dict, vertex_parts: np.ndarray, part_names) -> list[str]:
    """Vertex groups saying which vertices the photo showed and which the fit guessed (from 3D
    cues, occluded, out of the frame), from the fit report's ``guessed``; their names. Not bone
    names, so the armature ignores them; the artist selects them in Edit Mode."""
    from ..core.body.guessed import GROUP_NAMES, vertex_sources

    made = []
    for source, idx in vertex_sources(guessed, vertex_parts, part_names).items():
        group = obj.vertex_groups.new(name=GROUP_NAMES[source])
        group.add(idx.tolist(), 1.0, "REPLACE")
        made.append(group.name)
    obj["sapiens_guessed_groups"] = made
    return made


def skin_to_armature(obj: bpy.types.Object, arm: bpy.types.Object) -> None:
    """Parent the mesh to the armature (same local frame) with an Armature modifier."""
    obj.parent = arm
    obj.matrix_parent_inverse = Matrix.Identity(4)
    obj.matrix_basis = Matrix.Identity(4)
    mod = obj.modifiers.new("Armature", "ARMATURE")
    mod.object = arm
    mod.use_deform_preserve_volume = False  # plain linear blend skinning, as the fit computed


def place(arm: bpy.types.Object, placement: np.ndarray) -> None:
    arm.matrix_world = Matrix((camera_to_blender_4x4() @ np.asarray(placement, np.float64)).tolist())


@contextmanager
def interchange_weights(objects):
    """While exporting to glTF/FBX: body meshes carry weights pruned to the 4 largest per vertex
    and renormalised (on a temporary copy of their mesh data, so the scene keeps Anny's exact
    weights); what the exporter receives already fits its 4 influences."""
    swapped = []
    try:
        for obj in objects:
            if obj.type != "MESH" or BODY_MODE not in obj:
                continue
            original = obj.data
            name = original.name
            copy = original.copy()
            original.name = f"{name} (scene weights)"
            copy.name = name  # the exported mesh keeps the scene's name
            obj.data = copy
            swapped.append((obj, original, copy, name))
            with preserved_selection() as view_layer:
                select_only(view_layer, [obj], obj)
                with bpy.context.temp_override(object=obj, active_object=obj):
                    bpy.ops.object.vertex_group_limit_total(group_select_mode="BONE_DEFORM",
                                                            limit=INTERCHANGE_INFLUENCES)
                    bpy.ops.object.vertex_group_normalize_all(group_select_mode="BONE_DEFORM", lock_active=False)
        yield
    finally:
        for obj, original, copy, name in swapped:
            obj.data = original
            bpy.data.meshes.remove(copy)
            original.name = name


# --- one person's body, end to end -------------------------------------------------------------
def build_person_body(template, fit, person_id: int, maps, *, mode: str = "clothed", rig_names: str = "anny",
                      label: str, collection: bpy.types.Collection, texture_size: int = 1024,
                      expressions: bool = True):
    """(mesh object, armature object, BodyReport, the images it made) for one fitted person.

    ``mode`` 'minimal': the fitted body; 'clothed': plus the photo's clothing/hair thickness
    (``core.body.dressing.dressing``) laid on at the bind pose, so it follows the rig. In both, the
    texture's hidden side takes the clothing's colour where the dressing covers the body.
    ``expressions``: the 52 ARKit shape keys, set to the fit's expression (when the template has them).
    """
    from ..core.body import dressing as body_dressing, surface as body_surface, texture as body_texture
    from ..core.build.report import EXPRESSION_SHOWN, BodyReport, fit_warnings
    from ..core.body.expression_fit import photo_expression
    from ..core.body.expressions import has_expressions
    from ..core.body.rig_names import retarget_rig
    from . import materials
    from .expressions import add_expression_keys
    from .images import image_from_array

    if mode not in FITTED_BODY_MODES:
        raise ValueError(f"body mode must be 'minimal' or 'clothed', got {mode!r}")
    i = fit.index(person_id)
    faces = template.faces
    rest = fit.rest_vertices[i].astype(np.float64)
    posed = fit.vertices[i].astype(np.float64)
    report = BodyReport(mode=mode, vertices=len(rest), faces=len(faces), fit=fit.report(person_id))
    report.warnings += fit_warnings(report.fit)
    worn = body_dressing.dressing(maps, person_id, posed, faces, template.vertex_parts, rest_vertices=rest,
                                 thickness=mode == "clothed", **body_dressing.head_landmarks(template, fit, i))
    if mode == "clothed":
        report.clothing = dict(worn.report, max_thickness_m=round(float(worn.thickness.max()), 4))
        if worn.report.get("note"):
            report.warnings.append(worn.report["note"])
        rest = body_dressing.dress(rest, faces, worn.thickness, worn.over)
        posed = body_dressing.dress(posed, faces, worn.thickness, worn.over)
    names, parents = retarget_rig(template.bone_names, template.bone_parents, rig_names)
    obj = build_body_mesh(rest, faces, template.uv, template.face_uv, label, collection)
    obj[BODY_MODE] = mode
    if expressions and has_expressions(template):
        values, source = photo_expression(template, fit, i, maps, person_id)
        add_expression_keys(obj, template, rest, values)
        report.expressions = len(template.expression_names)
        report.expression_source = source
        report.expression_values = {n: round(float(v), 2) for n, v in zip(template.expression_names, values)
                                    if v > EXPRESSION_SHOWN}
    arm = build_body_armature(names, parents, fit.rest_bone_matrices[i], fit.rest_bone_tails[i],
                              f"{label} armature", collection)
    arm["sapiens_rig_names"] = rig_names
    write_bone_weights(obj, names, template.weight_bones, template.weight_values)
    write_guessed_groups(obj, report.fit.get("guessed") or {}, template.vertex_parts, template.part_names)
    skin_to_armature(obj, arm)
    place(arm, fit.placement[i])
    pose_armature(arm, fit.rest_bone_matrices[i], fit.bone_matrices[i], parents)
    per_face = body_surface.face_parts(faces, template.vertex_parts)
    texture, bake = body_texture.bake_texture(maps, person_id, posed, faces, template.uv, template.face_uv,
                                              per_face, size=texture_size, dressed=worn.dressed,
                                              part_names=template.part_names, rest_vertices=fit.rest_vertices[i])
    report.texture = bake
    image = image_from_array(f"{label} texture", texture)
    base = materials.build_photo_material(f"{label} texture", image)
    assigned = materials.assign_part_materials(obj, per_face, template.part_names, base, prefix=f"{label} ")
    bpy.data.materials.remove(base)
    report.parts = [template.part_names[p] for p in sorted(assigned)]
    report.bones = len(names)
    return obj, arm, report, [image]
