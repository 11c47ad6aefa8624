# SPDX-License-Identifier: GPL-3.0-or-later
"""One product at a time, on the same objects: the builders behind the panel's buttons.

A ``Scope`` (scope.py) is one analysis in one scene: its root collection, photo image and camera,
found by their tags (``identity``) when ``reuse`` is on, else made anew. A ``PersonBuild`` does
the same for one person's collection, mesh, normal texture, part materials and armature. Every step
first looks for what an earlier click made and keeps it, so a click never duplicates anything:

- mesh: camera + the person's displaced mesh with a photo material (kept if it exists; its
  stride / closed setting are stored on it and reused by the later steps);
- normal texture: the normal image, wired into every Sapiens material on that mesh (switching
  object/tangent space swaps the image in place);
- part materials: one material slot + one "part:" vertex group per part (kept if present);
- armature: kept if the person has one (never rebuilt: it may be posed or edited; delete it to
  get a new one); the mesh is skinned to it unless it already is.

Only Sapiens-tagged data is changed. The user's own material slots on the mesh are kept.
"""

from __future__ import annotations

import time

import bpy
import numpy as np

from ..core.build.report import PersonReport
from ..core.geometry import normals as geo_normals
from ..core.geometry.weights import constrain_weights
from ..core.maps.goliath import KEYPOINT_INDEX
from ..core.geometry.types import GeometryError, SurfaceMesh
from . import armature, context, identity, materials, mesh, skinning
from ..core.build import steps
from ..core.build.options import FITTED_BODY_MODES
from .images import image_from_array
from .scope import Scope

TANGENT_FILL = np.array([0.0, 0.0, 1.0], np.float32)  # "no change" in tangent space
NORMAL_TEXTURE_NODE, NORMAL_MAP_NODE = "Normal texture", "Normal map"
CHIN_CONFIDENCE = 0.3  # below it the head/neck split goes by proportions, not the chin
STRIDE, CLOSED, NORMAL_SPACE = "sapiens_stride", "sapiens_closed", "sapiens_normal_space"


class PersonBuild:
    """The products of one person; each ``ensure_*`` builds what is missing, keeps the rest."""

    def __init__(self, scope: Scope, pid: int):
        self.scope, self.pid = scope, pid
        self.label = f"{scope.base} person {pid}"
        self.report = PersonReport()
        self._surface: SurfaceMesh | None = None
        self._skeleton = None  # the skeleton this build made (the skinning step reuses it)
        self.collection = scope.find_collection(identity.PERSON_COLLECTION, pid)
        self.mesh = scope.find_object(identity.MESH, pid, self.collection)
        self.armature = scope.find_object(identity.ARMATURE, pid, self.collection)
        self.body_mesh = scope.find_object(identity.BODY_MESH, pid, self.collection)
        self.body_armature = scope.find_object(identity.BODY_ARMATURE, pid, self.collection)
        self.joints: dict | None = None  # the joints the armature was built from ({name: Joint})

    def _note(self, product: str, built: bool) -> None:
        self.report.note_product(product, built)  # ensure_mesh runs for every step: noted once

    def finish(self) -> PersonReport:
        """The report, with what the person's objects hold now (kept ones included)."""
        if self.mesh is not None:
            self.report.parts = [m.name[len(self.label) + 1:] for m in self.mesh.data.materials
                                    if identity.is_tagged(m, self.scope.key, identity.PART_MATERIAL)]
        if self.armature is not None:
            self.report.bones = len(self.armature.data.bones)
        if self.body_armature is not None:
            self.report.body_bones = len(self.body_armature.data.bones)
        return self.report

    def ensure_collection(self) -> bpy.types.Collection:
        if self.collection is None:
            coll = context.new_collection(self.label, self.scope.root())
            self.collection = identity.tag(coll, self.scope.key, identity.PERSON_COLLECTION, self.pid)
        return self.collection

    # --- mesh ---------------------------------------------------------------------------------
    def surface(self) -> SurfaceMesh:
        """The person's surface, as the mesh was built (its stored stride and closed setting)."""
        if self._surface is None:
            opts = self.scope.options
            stride = int(self.mesh.get(STRIDE, opts.stride)) if self.mesh is not None else opts.stride
            closed = bool(self.mesh.get(CLOSED, opts.closed)) if self.mesh is not None else opts.closed
            with self.scope.timer("mesh"):
                surface = steps.surface(self.scope.maps, self.pid, stride, closed)
            if self.mesh is not None:
                me = self.mesh.data
                n_verts = len(surface.vertices)
                if len(me.vertices) != n_verts or len(me.polygons) != len(surface.faces):
                    raise GeometryError(
                        f"The mesh '{self.mesh.name}' was edited (it has {len(me.vertices)} vertices, the "
                        f"analysis gives {n_verts}), so part materials and skinning cannot be matched to "
                        "it. Delete it (or remove its 'sapiens_analysis' custom property) and build again.")
            self._surface = surface
        return self._surface

    def ensure_mesh(self) -> bpy.types.Object:
        self.scope.camera()
        if self.mesh is not None:
            self._note("mesh", False)
        else:
            opts = self.scope.options
            surface = self.surface()
            with self.scope.timer("mesh"):
                obj = mesh.build_mesh_object(surface, self.label, self.ensure_collection())
            identity.tag(obj, self.scope.key, identity.MESH, self.pid)
            obj[STRIDE], obj[CLOSED] = int(opts.stride), bool(opts.closed)
            identity.point_at(self.collection, identity.MESH, obj)
            obj.data.materials.append(self.photo_material())
            self.mesh = obj
            self.report.surface = {k: v for k, v in surface.report.items() if np.isscalar(v)}
            self._note("mesh", True)
        self.report.vertices, self.report.faces = len(self.mesh.data.vertices), len(self.mesh.data.polygons)
        return self.mesh

    def photo_material(self) -> bpy.types.Material:
        """The person's photo material (found or new), with the mesh's normal texture if it has one."""
        mat = self.scope.find_data(bpy.data.materials, identity.PHOTO_MATERIAL, self.pid)
        if mat is None:
            mat = materials.build_photo_material(f"{self.label} photo", self.scope.photo())
            self.scope.made(identity.tag(mat, self.scope.key, identity.PHOTO_MATERIAL, self.pid))
        space = self.mesh.get(NORMAL_SPACE) if self.mesh is not None else None
        if space:
            set_normal_texture(mat, self.normal_image(space), space)
        return mat

    def _our_materials(self) -> list[bpy.types.Material]:
        return [m for m in self.mesh.data.materials if identity.is_tagged(m, self.scope.key)]

    # --- normal texture -----------------------------------------------------------------------
    def normal_image(self, space: str) -> bpy.types.Image:
        image = self.scope.find_data(bpy.data.images, identity.NORMALS, self.pid, **{NORMAL_SPACE: space})
        if image is None:
            maps = self.scope.maps
            with self.scope.timer("normal texture"):
                if space == "TANGENT":
                    normal = geo_normals.tangent_space_normal_map(self.surface(), maps)
                    texture = geo_normals.encode_normal_texture(normal, fill=TANGENT_FILL)
                else:
                    texture = geo_normals.encode_normal_texture(geo_normals.object_space_normal_map(maps, self.pid))
                image = image_from_array(f"{self.label} normals", texture, non_color=True)  # 8-bit: < 0.5°
            self.scope.made(identity.tag(image, self.scope.key, identity.NORMALS, self.pid))
            image[NORMAL_SPACE] = space
        return image

    def ensure_normal_texture(self, space: str) -> None:
        obj = self.ensure_mesh()
        done = obj.get(NORMAL_SPACE) == space
        obj[NORMAL_SPACE] = space
        targets = self._our_materials()
        base = self.scope.find_data(bpy.data.materials, identity.PHOTO_MATERIAL, self.pid)
        if base is not None and base not in targets:
            targets.append(base)  # later part materials are copies of it
        if not targets:
            targets = [self.photo_material()]
            self.report.warnings.append(
                f"'{obj.name}' uses only your own materials (kept): the normal texture is in the "
                f"material '{targets[0].name}', which is not assigned to it")
        image = self.normal_image(space)
        for mat in targets:
            set_normal_texture(mat, image, space)
        self._note("normal texture", not done)

    # --- part materials -----------------------------------------------------------------------
    def ensure_part_materials(self) -> None:
        obj = self.ensure_mesh()
        maps = self.scope.maps
        slots = list(obj.data.materials)
        has_materials = any(identity.is_tagged(m, self.scope.key, identity.PART_MATERIAL) for m in slots)
        has_groups = any(g.name.startswith(materials.PART_GROUP_PREFIX) for g in obj.vertex_groups)
        if not has_materials:
            surface = self.surface()
            with self.scope.timer("parts"):
                base = self.photo_material()
                if all(m is None or identity.is_tagged(m, self.scope.key) for m in slots):
                    obj.data.materials.clear()  # only our photo material was there
                    offset = 0
                else:
                    offset = len(slots)  # the user's own slots stay, ours come after them
                assigned = materials.assign_part_materials(obj, surface.face_parts, maps.part_names, base,
                                                           prefix=f"{self.label} ")
                for mat in assigned.values():
                    identity.tag(mat, self.scope.key, identity.PART_MATERIAL, self.pid)
                if offset:
                    index = np.empty(len(obj.data.polygons), np.int32)
                    obj.data.polygons.foreach_get("material_index", index)
                    obj.data.polygons.foreach_set("material_index", index + np.int32(offset))
        if not has_groups:
            surface = self.surface()
            with self.scope.timer("parts"):
                materials.add_part_vertex_groups(obj, surface.vertex_parts, maps.part_names)
        self._note("part materials", not (has_materials and has_groups))

    # --- armature -----------------------------------------------------------------------------
    def ensure_armature(self, skin: bool = True) -> None:
        """The armature (kept if there is one), then, with ``skin``, the skinning (which the
        panel runs in its own steps, ``skinning_steps``: bone heat alone can take seconds)."""
        self.ensure_mesh()
        opts, timer = self.scope.options, self.scope.timer
        skel = self._skeleton
        if self.armature is None:
            with timer("armature"):
                skel, joint_report, self.joints = steps.skeleton(self.scope.maps, self.pid, self.surface(),
                                                                 opts.joints)
                arm = armature.build_armature(skel, f"{self.label} armature", self.ensure_collection())
            identity.tag(arm, self.scope.key, identity.ARMATURE, self.pid)
            identity.point_at(self.collection, identity.ARMATURE, arm)
            self.armature = arm
            self.report.bones = len(skel.names)
            self.report.estimated_bones = int(np.count_nonzero(skel.estimated))
            self.report.joints = dict(joint_report)
            filled = sorted(joint_report.get("filled", []))
            if filled:  # one sentence for both counts: bones are estimated because joints were
                self.report.notes.append(
                    f"{self.report.estimated_bones} of {len(skel.names)} bones are estimated from "
                    f"{len(filled)} joints filled in: {', '.join(filled)}")
            self._skeleton = skel
        self._note("armature", skel is not None)
        if skin:
            for _ in self.skinning_steps():
                pass

    def skinning_steps(self):
        """Skin the mesh to the armature, in steps (yields each next step's name)."""
        self.ensure_armature(skin=False)
        obj, opts = self.mesh, self.scope.options
        if opts.skinning == "none" or is_skinned(obj, self.armature):
            return
        skel = self._skeleton
        if skel is None:  # a kept armature: the skeleton is only needed for the fallback weights
            skel, _, self.joints = steps.skeleton(self.scope.maps, self.pid, self.surface(), opts.joints)
        for mod in [m for m in obj.modifiers if m.type == "ARMATURE" and m.object is None]:
            obj.modifiers.remove(mod)  # left behind by a deleted armature of ours
        work = self._skin_steps(obj, skel)
        while True:  # time only the work, not the pauses between the panel's steps
            started = time.perf_counter()
            try:
                stage = next(work)
            except StopIteration as done:
                self.scope.timer.add("skinning", time.perf_counter() - started)
                self.report.skinning = done.value
                break
            self.scope.timer.add("skinning", time.perf_counter() - started)
            yield stage
        self._note("skinning", True)
        skin = self.report.skinning
        if skin.unweighted_vertices:
            self.report.warnings.append(f"{skin.unweighted_vertices} vertices have no bone weight")
        if skin.fallback_vertices:
            self.report.warnings.append(
                f"bone heat left {skin.fallback_vertices} vertices unweighted: part-based weights used there")

    def _skin_steps(self, obj, skel):
        opts, surface = self.scope.options, self.surface()
        weights = steps.part_weights(surface, skel, self.scope.maps)
        proxy = None
        if opts.skinning == "auto" and len(surface.vertices) > opts.bone_heat_max_vertices:
            yield "proxy mesh"
            stride = int(obj.get(STRIDE, opts.stride))
            coarse = steps.proxy_stride(stride, len(surface.vertices), opts.bone_heat_max_vertices)
            proxy_surface = steps.surface(self.scope.maps, self.pid, coarse, bool(obj.get(CLOSED, opts.closed)))
            proxy = mesh.build_mesh_object(proxy_surface, f"{self.label} weight proxy", self.ensure_collection())
        try:
            maps = self.scope.maps
            chin = maps.person_keypoints(self.pid)[KEYPOINT_INDEX["tip_of_chin"]]
            chin = chin[:2] if chin[2] >= CHIN_CONFIDENCE else None

            def constrain(dense):
                return constrain_weights(dense, surface, skel, maps.part_names, weights, chin=chin,
                                         intrinsics=maps.intrinsics)

            return (yield from skinning.skin_steps(obj, self.armature, weights, list(skel.names), opts.skinning,
                                                   proxy=proxy, constrain=constrain))
        finally:
            if proxy is not None:  # our own temporary object (also when the build is cancelled)
                proxy_mesh = proxy.data
                bpy.data.objects.remove(proxy)
                bpy.data.meshes.remove(proxy_mesh)


    # --- the fitted body ----------------------------------------------------------------------
    def ensure_body(self) -> None:
        """The fitted body (mesh + rig, posed, textured), kept if this person already has one."""
        from ..core.body.pose import fit_joints
        from . import body

        scope, opts = self.scope, self.scope.options
        scope.camera()
        template, fit = scope.body()
        if self.pid not in fit.person_ids:
            self.report.warnings.append("the body fit has no body for this person: none built")
            return
        if self.body_mesh is not None and self.body_armature is not None:
            self._note("body", False)
        else:
            leftover = self.body_mesh or self.body_armature
            if leftover is not None:  # half of an earlier body was deleted: a new pair, the rest is kept
                self.report.warnings.append(
                    f"'{leftover.name}' lost its {'armature' if self.body_mesh else 'mesh'}: a new body was "
                    "built beside it (delete the old one if you do not need it)")
            if opts.body not in FITTED_BODY_MODES:
                raise ValueError(f"body must be 'minimal' or 'clothed', got {opts.body!r}")
            with scope.timer("body"):
                obj, arm, report, images = body.build_person_body(
                    template, fit, self.pid, scope.maps, mode=opts.body, rig_names=opts.rig_names,
                    expressions=opts.expressions,
                    label=f"{self.label} body", collection=self.ensure_collection())
            for data, role in ((obj, identity.BODY_MESH), (arm, identity.BODY_ARMATURE)):
                identity.tag(data, scope.key, role, self.pid)
                identity.point_at(self.collection, role, data)
            for data in [m for m in obj.data.materials if m is not None] + images:
                identity.tag(data, scope.key, identity.BODY_DATA, self.pid)
            self.body_mesh, self.body_armature = obj, arm
            self.report.warnings.extend(report.warnings)
            self.report.body = report
            self._note("body", True)
        self.joints = fit_joints(template, fit, self.pid)


def is_skinned(obj: bpy.types.Object, arm: bpy.types.Object) -> bool:
    return obj.parent == arm or any(m.type == "ARMATURE" and m.object == arm for m in obj.modifiers)


def set_normal_texture(mat: bpy.types.Material, image: bpy.types.Image, space: str) -> None:
    """Wire ``image`` as the normal of ``mat``'s Principled BSDF; existing nodes are reused."""
    if space not in ("OBJECT", "TANGENT"):
        raise ValueError(f"normal_space must be 'OBJECT' or 'TANGENT', got {space!r}")
    nodes, links = mat.node_tree.nodes, mat.node_tree.links
    bsdf = next((n for n in nodes if n.type == "BSDF_PRINCIPLED"), None)
    if bsdf is None:
        return  # the user rebuilt this material without a BSDF: nothing to wire into
    tex = nodes.get(NORMAL_TEXTURE_NODE)
    if tex is None:
        tex = nodes.new("ShaderNodeTexImage")
        tex.name = tex.label = NORMAL_TEXTURE_NODE
        tex.interpolation = "Linear"
        tex.location = (-600, -100)
    tex.image = image
    nmap = nodes.get(NORMAL_MAP_NODE) or next((n for n in nodes if n.type == "NORMAL_MAP"), None)
    if nmap is None:
        nmap = nodes.new("ShaderNodeNormalMap")
        nmap.name = nmap.label = NORMAL_MAP_NODE
        nmap.location = (-300, -100)
    nmap.space = space
    nmap.uv_map = mesh.UV_LAYER
    if not tex.outputs["Color"].links or tex.outputs["Color"].links[0].to_node != nmap:
        links.new(tex.outputs["Color"], nmap.inputs["Color"])
    if not nmap.outputs["Normal"].links:
        links.new(nmap.outputs["Normal"], bsdf.inputs["Normal"])
