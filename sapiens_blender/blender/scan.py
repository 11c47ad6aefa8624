# SPDX-License-Identifier: GPL-3.0-or-later
"""A scanned body -> Blender: like ``body.build_person_body``, but its clothed layer and texture
come from every view (``core.body.scan``), and it carries where no view saw it: the
``sapiens_unseen`` point attribute (1 = no view saw the vertex) and the packed image
``<name> unseen texels`` (white where the texture is the fill, not a photo)."""

from __future__ import annotations

import time

import bpy
import numpy as np

from ..core.body.scan import scan_surface
from ..core.build.report import BodyReport, BuildReport, PersonReport, fit_warnings
from .body import (BODY_MODE, build_body_armature, build_body_mesh, place, pose_armature, skin_to_armature,
                   write_bone_weights)
from .camera import build_camera
from .context import new_collection
from .images import image_from_array
from .pipeline import BuildResult, PersonResult

UNSEEN_ATTRIBUTE = "sapiens_unseen"


def build_scan(template, fit, views: list, *, name: str = "scan", mode: str = "clothed", rig_names: str = "anny",
               texture_size: int = 1024, progress=None, cancel=None, surface=None) -> BuildResult:
    """One body for ``fit`` (one row per view, core.body.records.BodyFit) and ``views``
    (core.body.scan.ScanView per row), posed and placed as the first view, its camera the first
    view's. ``cancel``: a callable raising to stop between stages. ``surface``: the
    core.body.scan.scan_surface already computed (the panel does it off the main thread)."""
    from ..core.body import surface as body_surface
    from ..core.body.pose import fit_joints
    from ..core.body.rig_names import retarget_rig
    from . import materials

    if mode not in ("minimal", "clothed"):
        raise ValueError(f"body mode must be 'minimal' or 'clothed', got {mode!r}")
    timings = {}
    started = time.perf_counter()
    say = progress or (lambda stage, fraction, text: None)
    say("texture", 0.0, f"texture and clothing from {len(views)} views")
    surf = surface or scan_surface(template, fit, views, mode=mode, texture_size=texture_size)
    timings["surface"] = time.perf_counter() - started
    if cancel is not None:
        cancel()
    say("blender", 0.5, "building the body in Blender")
    t = time.perf_counter()
    root = new_collection(f"Sapiens {name}")
    first = views[0].maps
    camera = build_camera(first.intrinsics, first.width, first.height, f"Sapiens {name} camera", root)
    collection = new_collection(f"Sapiens {name} body", root)
    label = f"Sapiens {name} body"
    pid = int(fit.person_ids[0])
    faces = template.faces
    report = BodyReport(mode=mode, vertices=len(surf.rest), faces=len(faces), fit=fit.report(pid))
    report.warnings += fit_warnings(report.fit)
    report.clothing = surf.report["clothing"] if mode == "clothed" else None
    report.texture = surf.report["texture"]
    names, parents = retarget_rig(template.bone_names, template.bone_parents, rig_names)
    obj = build_body_mesh(surf.rest, faces, template.uv, template.face_uv, label, collection)
    obj[BODY_MODE] = mode
    attr = obj.data.attributes.new(UNSEEN_ATTRIBUTE, "FLOAT", "POINT")
    attr.data.foreach_set("value", surf.unseen_vertices.astype(np.float32))
    arm = build_body_armature(names, parents, fit.rest_bone_matrices[0], fit.rest_bone_tails[0],
                              f"{label} armature", collection)
    arm["sapiens_rig_names"] = rig_names
    write_bone_weights(obj, names, template.weight_bones, template.weight_values)
    skin_to_armature(obj, arm)
    place(arm, fit.placement[0])
    pose_armature(arm, fit.rest_bone_matrices[0], fit.bone_matrices[0], parents)
    per_face = body_surface.face_parts(faces, template.vertex_parts)
    image = image_from_array(f"{label} texture", surf.texture)
    unseen = image_from_array(f"{label} unseen texels", np.repeat(surf.unseen_texels[..., None], 3, axis=2),
                              non_color=True)
    unseen.use_fake_user = True  # kept in the .blend though no material reads it
    base = materials.build_photo_material(f"{label} texture", image)
    assigned = materials.assign_part_materials(obj, per_face, template.part_names, base, prefix=f"{label} ")
    bpy.data.materials.remove(base)
    report.parts = [template.part_names[p] for p in sorted(assigned)]
    report.bones = len(names)
    timings["blender"] = time.perf_counter() - t
    person = PersonReport(body=report, body_bones=len(names))
    person.notes.append(f"scan: {len(views)} views, {100 * surf.report['texture']['unseen_share']:.1f} % of the "
                        f"texture seen by no view (image '{unseen.name}', attribute '{UNSEEN_ATTRIBUTE}')")
    result = PersonResult(person_id=pid, collection=collection, mesh=None, armature=None, report=person,
                          body_mesh=obj, body_armature=arm, joints=fit_joints(template, fit, pid))
    say("blender", 1.0, "body built")
    return BuildResult(camera=camera, collection=root, people=[result], timings=timings, report=BuildReport())
