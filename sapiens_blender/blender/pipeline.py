# SPDX-License-Identifier: GPL-3.0-or-later
"""Maps -> a Blender scene: one camera for the photo, one collection per person.

The geometry core computes (numpy); this module only sequences it and hands the arrays to the
builders, timing each stage. Names: collection "Sapiens <stem>" holds the camera and one child
collection "Sapiens <stem> person <k>" per person, holding the mesh "Sapiens <stem> person <k>"
and its armature "Sapiens <stem> person <k> armature".
"""

from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass, field

import bpy
import numpy as np

from ..core.geometry import joints as geo_joints
from ..core.geometry import normals as geo_normals
from ..core.geometry import skeleton as geo_skeleton
from ..core.geometry.surface import build_surface_mesh
from ..core.geometry.types import GeometryError, Joint, SurfaceMesh
from ..core.maps import Maps
from . import armature, camera, context, materials, mesh, skinning
from .images import image_from_array

TANGENT_FILL = np.array([0.0, 0.0, 1.0], np.float32)  # "no change" in tangent space


@dataclass
class BuildOptions:
    name: str = "photo"  # the photo's stem, used in every name
    stride: int = 1  # one vertex per `stride` pixels
    closed: bool = False  # watertight body (front + inferred back) instead of the visible surface
    normal_space: str = "OBJECT"  # 'OBJECT' (exact, Blender) or 'TANGENT' (glTF/FBX/game engines)
    part_materials: bool = True
    armature: bool = True
    skinning: str = "auto"  # 'auto' (bone heat + part fallback), 'parts', or 'none'
    people: list[int] | None = None  # person ids to build (default: all in the mask)
    joints: dict[int, dict[str, Joint]] | None = None  # 3D joints per person id (a joints file)
    make_active_camera: bool = True
    # Bone heat runs on a coarser proxy of the surface above this many vertices (then the weights
    # are transferred): it costs ~5 s at 19k vertices and ~36 s at 77k.
    bone_heat_max_vertices: int = 20000


@dataclass
class PersonResult:
    person_id: int
    collection: bpy.types.Collection
    mesh: bpy.types.Object
    armature: bpy.types.Object | None
    report: dict = field(default_factory=dict)

    @property
    def objects(self) -> list:
        return [o for o in (self.mesh, self.armature) if o is not None]


@dataclass
class BuildResult:
    camera: bpy.types.Object
    collection: bpy.types.Collection
    people: list[PersonResult]
    timings: dict[str, float]  # seconds per stage, summed over people
    report: dict = field(default_factory=dict)

    @property
    def objects(self) -> list:
        return [self.camera] + [o for p in self.people for o in p.objects]

    def summary(self) -> str:
        lines = [f"people: {len(self.people)}"]
        if self.report.get("warning"):
            lines.append(f"warning: {self.report['warning']}")
        for p in self.people:
            r = p.report
            lines.append(
                f"  person {p.person_id}: {r.get('vertices', 0)} vertices, {r.get('faces', 0)} faces, "
                f"{len(r.get('parts', []))} parts, {r.get('bones', 0)} bones"
                + (f" ({r['estimated_bones']} estimated)" if r.get("estimated_bones") else "")
                + (f", skinning {r['skinning']['method']}" if r.get("skinning") else "")
                + (f", {r['skinning']['fallback_vertices']} vertices with part weights"
                   if r.get("skinning", {}).get("fallback_vertices") else "")
            )
            for warning in r.get("warnings", []):
                lines.append(f"    warning: {warning}")
        lines.append("seconds: " + ", ".join(f"{k} {v:.2f}" for k, v in self.timings.items()))
        return "\n".join(lines)


class _Timer:
    def __init__(self):
        self.seconds: dict[str, float] = {}

    @contextmanager
    def __call__(self, stage: str):
        start = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[stage] = self.seconds.get(stage, 0.0) + time.perf_counter() - start


def build_from_maps(maps: Maps, options: BuildOptions | None = None) -> BuildResult:
    """Build camera + per-person mesh, materials, armature and skinning into the current scene."""
    options = options or BuildOptions()
    if options.normal_space not in ("OBJECT", "TANGENT"):
        raise ValueError(f"normal_space must be 'OBJECT' or 'TANGENT', got {options.normal_space!r}")
    people = maps.person_ids if options.people is None else list(options.people)
    if not people:
        raise GeometryError("the maps contain no person (the mask is empty): nothing to build")
    unknown = sorted(set(people) - set(maps.person_ids))
    if unknown:
        raise GeometryError(f"no person {unknown} in the maps; people present: {maps.person_ids}")
    timer = _Timer()
    base = f"Sapiens {options.name}"
    root = context.new_collection(base)
    with timer("camera"):
        photo = image_from_array(f"{base} photo", maps.image)
        cam = camera.build_camera(maps.intrinsics, maps.width, maps.height, f"{base} camera", root,
                                  background=photo, make_active=options.make_active_camera)
    results = [_build_person(maps, pid, options, root, photo, timer) for pid in people]
    report = {"source": maps.source, "metric": bool(maps.metric), "size": [maps.width, maps.height]}
    if not maps.metric:
        report["warning"] = "relative depth (not metric): sizes are only plausible, not measured"
    return BuildResult(cam, root, results, timer.seconds, report)


def _build_person(maps, pid, options, root, photo, timer) -> PersonResult:
    label = f"Sapiens {options.name} person {pid}"
    coll = context.new_collection(label, root)
    report: dict = {"warnings": []}
    with timer("mesh"):
        surface = _surface(maps, pid, options)
        obj = mesh.build_mesh_object(surface, label, coll)
    report.update({k: v for k, v in surface.report.items() if np.isscalar(v)})
    report.update(vertices=len(obj.data.vertices), faces=len(obj.data.polygons))  # closed body included
    with timer("normal texture"):
        if options.normal_space == "TANGENT":
            texture = geo_normals.encode_normal_texture(
                geo_normals.tangent_space_normal_map(surface, maps), fill=TANGENT_FILL)
        else:
            texture = geo_normals.encode_normal_texture(geo_normals.object_space_normal_map(maps, pid))
        normal_img = image_from_array(f"{label} normals", texture, non_color=True)  # 8-bit: < 0.5°
    with timer("parts"):
        base_mat = materials.build_photo_material(f"{label} photo", photo, normal_img, options.normal_space)
        if options.part_materials:
            assigned = materials.assign_part_materials(obj, surface.face_parts, maps.part_names, base_mat,
                                                       prefix=f"{label} ")
            materials.add_part_vertex_groups(obj, surface.vertex_parts, maps.part_names)
            report["parts"] = [maps.part_names[p] for p in assigned]
        else:
            obj.data.materials.append(base_mat)
            report["parts"] = []
    arm = None
    if options.armature:
        with timer("armature"):
            skel, joint_report = _skeleton(maps, pid, surface, options)
            arm = armature.build_armature(skel, f"{label} armature", coll)
        report.update(bones=len(skel.names), estimated_bones=int(np.count_nonzero(skel.estimated)),
                      joints=joint_report)
        if options.skinning != "none":
            with timer("skinning"):
                weights = _part_weights(surface, skel, maps)
                proxy = None
                if options.skinning == "auto" and len(surface.vertices) > options.bone_heat_max_vertices:
                    proxy = _proxy_object(maps, pid, options, len(surface.vertices), coll)
                try:
                    report["skinning"] = skinning.skin(obj, arm, weights, list(skel.names), options.skinning,
                                                       proxy=proxy)
                finally:
                    if proxy is not None:  # our own temporary object
                        proxy_mesh = proxy.data
                        bpy.data.objects.remove(proxy)
                        bpy.data.meshes.remove(proxy_mesh)
            if report["skinning"]["unweighted_vertices"]:
                report["warnings"].append(
                    f"{report['skinning']['unweighted_vertices']} vertices have no bone weight")
            if report["skinning"]["fallback_vertices"]:
                report["warnings"].append(
                    f"bone heat left {report['skinning']['fallback_vertices']} vertices unweighted: "
                    "part-based weights used there")
    filled = joint_report.get("filled", []) if options.armature else []
    if filled:
        report["warnings"].append(f"joints filled in (estimated): {', '.join(sorted(filled))}")
    return PersonResult(pid, coll, obj, arm, report)


def _surface(maps: Maps, pid: int, options: BuildOptions) -> SurfaceMesh:
    surface = build_surface_mesh(maps, pid, stride=options.stride)
    if options.closed:
        from ..core.geometry.closed import close_body

        surface = close_body(surface, maps)
    return surface


def _proxy_object(maps: Maps, pid: int, options: BuildOptions, n_vertices: int, collection):
    """A coarser mesh of the same surface (for bone heat), linked so operators can use it."""
    factor = int(np.ceil(np.sqrt(n_vertices / options.bone_heat_max_vertices)))
    coarse = BuildOptions(**{**options.__dict__, "stride": options.stride * max(2, factor)})
    surface = _surface(maps, pid, coarse)
    return mesh.build_mesh_object(surface, f"Sapiens {options.name} person {pid} weight proxy", collection)


def _skeleton(maps: Maps, pid: int, surface: SurfaceMesh, options: BuildOptions):
    given = (options.joints or {}).get(pid)
    if given:
        joints = given
    else:
        joints = geo_joints.lift_joints(maps, pid, surface)
    skel = geo_skeleton.build_skeleton(joints, person_id=pid)
    joint_report = dict(getattr(joints, "report", {}) or {})
    joint_report = {k: sorted(v) if isinstance(v, (set, frozenset, list, tuple)) else v
                    for k, v in joint_report.items()}
    if given:
        joint_report["source"] = "joints file"
    return skel, joint_report


def _part_weights(surface: SurfaceMesh, skel, maps: Maps):
    """Part-based weights of every vertex (the geometry core's sparse VertexWeights)."""
    from ..core.geometry.weights import part_based_weights

    return part_based_weights(surface, skel, maps.part_names)
