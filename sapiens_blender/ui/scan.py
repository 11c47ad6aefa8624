# SPDX-License-Identifier: GPL-3.0-or-later
"""The panel's "Scan (360°)": a clip of one person turning, a folder of photos of them, or a
folder of their maps -> one complete, textured, rigged body.

Settings live in ``scene.sapiens_scan``; the analysis, the fit and the texture (numpy) run as a
core `Job` with progress per stage and Cancel; the body is built on the main thread at the end.
"""

from __future__ import annotations

import os

import bpy
from bpy.props import EnumProperty, IntProperty, PointerProperty, StringProperty

from ..core.jobs.background import Job
from . import jobs, preferences, state
from .operators import _JobOperator
from .panel import _SapiensPanel, draw_clip_source, draw_job_button


class SapiensScanProperties(bpy.types.PropertyGroup):
    source: EnumProperty(
        name="Views", default="MOVIE",
        items=[("MOVIE", "Clip", "A movie clip of the person turning round"),
               ("FOLDER", "Photos", "A folder of photos of the person from around them"),
               ("MAPS", "Maps", "A folder of maps .npz, one per view, as `analyze` writes")])
    clip: PointerProperty(name="Movie Clip", type=bpy.types.MovieClip)
    folder: StringProperty(name="Folder", subtype="DIR_PATH", description="The photos or maps of the views")
    stride: IntProperty(name="Stride", min=1, default=1, description="Use every N-th frame or photo")
    max_views: IntProperty(name="Max Views", min=0, default=24,
                           description="At most this many views, evenly spaced (0: all)")
    body_mode: EnumProperty(
        name="Body", default="CLOTHED",
        items=[("CLOTHED", "Clothed", "The views' clothing and hair carried onto the body"),
               ("MINIMAL", "Minimal", "The fitted body alone")])


def scan_input(props) -> tuple[list, str | None, str]:
    """(inputs, maps folder, display name) of the chosen views; ValueError with a clear message."""
    if props.source == "MOVIE":
        if props.clip is None:
            raise ValueError("Pick a movie clip of the person turning (or switch to Photos or Maps).")
        path = bpy.path.abspath(props.clip.filepath)
        if props.clip.source == "SEQUENCE":
            path = os.path.dirname(path)
    else:
        if not props.folder:
            raise ValueError("Pick the folder of the views.")
        path = bpy.path.abspath(props.folder)
    if not os.path.exists(path):
        raise ValueError(f"{path} does not exist.")
    name = os.path.splitext(os.path.basename(os.path.normpath(path)))[0]
    return ([], path, name) if props.source == "MAPS" else ([path], None, name)


class SAPIENS_OT_scan(_JobOperator, bpy.types.Operator):
    """Fit one body to every view of one person and texture it from all of them"""

    bl_idname = "sapiens.scan"
    bl_label = "Scan (360°)"
    bl_options = {"REGISTER"}

    def execute(self, context):
        from ..core.body.scan import scan_surface
        from ..core.body.scan_views import scan_frames
        from ..core.remote.scan_calls import gather_scan

        session = state.SESSION
        props = context.scene.sapiens_scan
        try:
            inputs, maps_dir, name = scan_input(props)
            config = preferences.server_config(context)
            frames, names = scan_frames(inputs, maps_dir, props.stride)
        except ValueError as exc:
            self.report({"ERROR"}, session.set_error(exc))
            return {"CANCELLED"}
        max_views, mode, scene_name = props.max_views or None, props.body_mode.lower(), context.scene.name

        def work(progress):
            progress.update("starting server", None, "starting the inference server")
            client = session.connect(config)
            progress.check()
            template, fit, views, notes = gather_scan(
                client, frames, names, config.model, max_views, cancel_event=progress.cancel_event,
                progress=lambda stage, fraction, text: progress.update(stage, fraction, text))
            progress.update("texture", None, f"texture and clothing from {len(views)} views")
            progress.check()
            return template, fit, views, notes, scan_surface(template, fit, views, mode=mode)

        def on_success(out):
            from ..blender.scan import build_scan

            template, fit, views, notes, surface = out
            if bpy.data.scenes.get(scene_name) is None:
                raise RuntimeError(f"The scene {scene_name!r} was removed while scanning.")
            build_scan(template, fit, views, name=name, mode=mode, surface=surface)
            session.last_info = f"Scanned {name}: one body from {len(views)} views." + \
                (f" {notes[0]}" if notes else "")

        job = Job("Scan", work, on_success=on_success, on_failure=session.set_error)
        return self.finish(jobs.launch(job, state.JobKind.SCAN))


def draw_scan(layout, context) -> None:
    session = state.SESSION
    props = context.scene.sapiens_scan
    busy = session.job_running()
    col = layout.column()
    draw_clip_source(col, props, "folder")
    row = col.row(align=True)
    row.prop(props, "stride")
    row.prop(props, "max_views")
    col.prop(props, "body_mode", text="")
    draw_job_button(col, session, busy, state.JobKind.SCAN, "sapiens.scan", "Scan (360°)", "OUTLINER_OB_ARMATURE")


class SAPIENS_PT_scan(_SapiensPanel, bpy.types.Panel):
    bl_label = "Scan (360°)"
    bl_parent_id = "SAPIENS_PT_main"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        draw_scan(self.layout, context)


CLASSES = (SapiensScanProperties, SAPIENS_OT_scan, SAPIENS_PT_scan)


def register_scene_properties():
    bpy.types.Scene.sapiens_scan = PointerProperty(type=SapiensScanProperties)


def unregister_scene_properties():
    del bpy.types.Scene.sapiens_scan
