# SPDX-License-Identifier: GPL-3.0-or-later
"""Build Mesh / Normal Texture / Part Materials / Armature / Build All from the stored analysis.

They read the maps saved in the .blend (no server needed, so they work after reopening the
file) and run the Blender builders on the main thread in steps (surface, mesh, normal
texture, part materials, armature, skinning, world and light), one per timer tick, so the
panel shows progress and Cancel works between steps. One click is one undo step.

The buttons complete ONE set of objects per analysis and person (``pipeline.build_products``
with reuse): what an earlier click made is found by its tags (renamed or moved objects too)
and kept, so clicking again never duplicates anything.

- Mesh: the photo-matching camera and each person's displaced mesh (photo material).
- Normal Texture: the normal map wired into that mesh's Sapiens materials (object space by
  default; tangent space for glTF/FBX); builds the mesh first if there is none.
- Part Materials: one material slot and one vertex group per body part on that mesh.
- Armature: an armature from the keypoints, skinned to that mesh. An existing armature of
  the person is kept (it may be posed or edited): delete it to build a new one.
- Body: the fitted 3D body (rigged, posed, textured); an analysis without a body fit is
  fitted by the server first (a background job, like Analyze) and keeps the fit.
- Build All: all of the above, each once. With the panel's shape "Body", the mesh buttons and
  Build All build the fitted body instead of the relief.
"""

from __future__ import annotations

import os
from dataclasses import replace

import bpy
from bpy.props import EnumProperty

from ..blender import pipeline
from ..core.build.options import wants_fit
from ..core.geometry.types import GeometryError
from ..core.maps.canonical import MapsError
from ..core.jobs.background import FAILED
from ..core.jobs.stepped import StepJob
from ..core.body.records import needs_fit
from ..core.build.options import PRODUCTS, BuildOptions
from . import jobs, properties, state, storage

NORMAL_SPACE_ITEMS = [
    ("OBJECT", "Object Space", "Exact for the built mesh, Blender only"),
    ("TANGENT", "Tangent Space", "MikkTSpace on the UV map: for glTF/FBX and game engines"),
]


def _photo_stem(scene) -> str:
    photo = storage.analysis_summary(scene).get("photo") or "photo"
    return os.path.splitext(os.path.basename(photo))[0] or "photo"


def build_message(label: str, result) -> str:
    """One line per click: what was built, what was already there."""
    parts = []
    for person in result.people:
        built, kept = person.report.built, person.report.kept
        text = f"person {person.person_id}: " + (", ".join(built) + " built" if built else "nothing new")
        if kept:
            text += f" ({', '.join(kept)} kept)"
        parts.append(text)
    message = f"{label}: " + "; ".join(parts)
    if any("armature" in p.report.kept for p in result.people):
        message += ". An existing armature is never rebuilt: delete it and click again for a new one"
    return message


class _BuildOperator:
    bl_options = {"REGISTER"}  # the undo step is pushed when the build has finished (on_success)
    products: tuple = ()

    @classmethod
    def poll(cls, context):
        scene = getattr(context, "scene", None)
        return scene is not None and not state.SESSION.job_running() and storage.has_analysis(scene)

    def execute(self, context):
        scene = context.scene
        session = state.SESSION
        try:
            maps = storage.load_analysis(scene)
            options = BuildOptions(name=_photo_stem(scene), people=properties.selected_people(scene),
                                            normal_space=getattr(self, "normal_space", "OBJECT"),
                                            **properties.build_settings(scene))
        except (MapsError, GeometryError, ValueError) as exc:
            self.report({"ERROR"}, session.set_error(exc))
            return {"CANCELLED"}
        label, products = self.bl_label, _products_for(self.products, options)
        if "body" in products and needs_fit(maps):
            return fit_then_build(self, context, maps, options)
        messages: list[tuple[str, str]] = []

        def done(result):
            message = build_message(label, result)
            session.last_info = message
            messages.append(("INFO", message))
            for person in result.people:
                for warning in person.report.warnings:
                    messages.append(("WARNING", f"person {person.person_id}: {warning}"))
            push_undo(label)

        def failed(error):
            session.set_error(error)

        def cancelled():
            session.last_info = f"{label} cancelled: what was built is kept; click again to complete it"
            push_undo(f"{label} (cancelled)")

        job = StepJob(label, lambda: pipeline.iter_build_products(maps, products, options), on_success=done,
                      on_failure=failed, on_cancel=cancelled)
        jobs.launch(job, state.JobKind.BUILD)
        if not job.finished:  # interactive: the timer runs the steps; the outcome is reported then
            return {"FINISHED"}
        if job.state == FAILED:
            self.report({"ERROR"}, session.last_error)
            return {"CANCELLED"}
        for level, message in messages:
            self.report({level}, message)
        return {"FINISHED"}


def push_undo(message: str) -> None:
    """One undo step for a whole build (it ran over many timer ticks, not inside the operator)."""
    try:
        bpy.ops.ed.undo_push(message=message)
    except RuntimeError:
        pass  # no undo stack (background mode without a window)


class SAPIENS_OT_build_mesh(_BuildOperator, bpy.types.Operator):
    """Build (or find) the photo-matching camera and each person's displaced mesh"""

    bl_idname = "sapiens.build_mesh"
    bl_label = "Build Mesh"
    products = ("mesh",)


class SAPIENS_OT_build_normal_texture(_BuildOperator, bpy.types.Operator):
    """Add the person's normal map to the photo material of their mesh (building the mesh if needed)"""

    bl_idname = "sapiens.build_normal_texture"
    bl_label = "Build Normal Texture"
    products = ("mesh", "normal_texture")
    normal_space: EnumProperty(name="Space", items=NORMAL_SPACE_ITEMS, default="OBJECT")


class SAPIENS_OT_build_part_materials(_BuildOperator, bpy.types.Operator):
    """Give the person's mesh one material and one vertex group per body part"""

    bl_idname = "sapiens.build_part_materials"
    bl_label = "Build Part Materials"
    products = ("mesh", "part_materials")


class SAPIENS_OT_build_armature(_BuildOperator, bpy.types.Operator):
    """Build an armature from the keypoints and skin the person's mesh to it (an existing one is kept)"""

    bl_idname = "sapiens.build_armature"
    bl_label = "Build Armature"
    products = ("mesh", "armature")


class SAPIENS_OT_build_body(_BuildOperator, bpy.types.Operator):
    """Build the fitted 3D body: a complete, rigged and posed human with the photo's clothing and
    texture (an analysis without a body fit is fitted by the server first)"""

    bl_idname = "sapiens.build_body"
    bl_label = "Build Body"
    products = ("body",)


def _products_for(products, options) -> tuple:
    """The Body button builds the body; with the shape "Body" (``options.body``), so do the
    mesh buttons and Build All; otherwise they build the relief / closed shell only."""
    if tuple(products) == ("body",) or wants_fit(options.body):
        return ("body",)
    return tuple(p for p in products if p != "body")


def fit_then_build(operator, context, maps, options):
    """Fit the stored analysis on the server (a background job, like Analyze), keep the fit in
    the stored analysis (its key stays: earlier objects are still found), then build the body."""
    from ..core.remote.body_calls import fit_maps
    from ..core.jobs.background import Job
    from . import preferences
    from .operators import _JobOperator, stage_label

    session = state.SESSION
    try:
        config = preferences.server_config(context)
    except ValueError as exc:
        operator.report({"ERROR"}, session.set_error(exc))
        return {"CANCELLED"}
    scene_name = context.scene.name
    photo = storage.analysis_summary(context.scene).get("photo", "")
    if not wants_fit(options.body):
        options = replace(options, body=context.scene.sapiens.body)

    def work(progress):
        progress.update("starting server", None, "starting the inference server")
        client = session.connect(config)
        progress.check()
        fitted, _ = fit_maps(client, maps, progress=lambda s, f, m: progress.update(stage_label(s), f, m or s),
                             cancel_event=progress.cancel_event)
        return fitted

    def on_success(fitted):
        scene = bpy.data.scenes.get(scene_name)
        if scene is None:
            raise RuntimeError(f"The scene {scene_name!r} was removed during the body fit.")
        storage.store_analysis(scene, fitted, photo=photo)
        result = pipeline.build_products(fitted, ("body",), options)
        session.last_info = build_message("Build Body", result)
        push_undo("Build Body")

    job = Job("Body fit", work, on_success=on_success, on_failure=session.set_error)
    return _JobOperator.finish(operator, jobs.launch(job, state.JobKind.FIT))


class SAPIENS_OT_build_all(_BuildOperator, bpy.types.Operator):
    """Build camera, mesh, normal texture, part materials and skinned armature: whatever is missing"""

    bl_idname = "sapiens.build_all"
    bl_label = "Build All"
    products = PRODUCTS
    normal_space: EnumProperty(name="Normal Space", items=NORMAL_SPACE_ITEMS, default="OBJECT")


CLASSES = (SAPIENS_OT_build_mesh, SAPIENS_OT_build_normal_texture, SAPIENS_OT_build_part_materials,
           SAPIENS_OT_build_armature, SAPIENS_OT_build_body, SAPIENS_OT_build_all)
