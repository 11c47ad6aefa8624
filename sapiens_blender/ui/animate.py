# SPDX-License-Identifier: GPL-3.0-or-later
"""The panel's "Animate": a movie clip or an image sequence -> per person, the fitted body (or
the relief armature) with a baked action.

Settings live in ``scene.sapiens_animate``; the work runs as a core `Job` (frames analysed
several at a time on the server, per-frame progress, Cancel), and the armatures, the clip's
camera (the clip as its background) and the scene's fps and frame range are made on the main
thread when it finishes.
"""

from __future__ import annotations

import os

import bpy
from bpy.props import BoolProperty, EnumProperty, IntProperty, PointerProperty, StringProperty

from ..core.jobs.background import Job
from . import jobs, preferences, state
from .operators import _JobOperator
from .panel import _SapiensPanel, draw_clip_source, draw_job_button


class SapiensAnimateProperties(bpy.types.PropertyGroup):
    source: EnumProperty(
        name="Clip", default="MOVIE",
        items=[("MOVIE", "Movie Clip", "A video loaded as a movie clip"),
               ("SEQUENCE", "Image Sequence", "A folder of frames, sorted by name")])
    clip: PointerProperty(name="Movie Clip", type=bpy.types.MovieClip)
    sequence_dir: StringProperty(name="Frames Folder", subtype="DIR_PATH",
                                 description="Folder holding one image per frame")
    frame_start: IntProperty(name="Start", min=0, default=0,
                             description="First frame of the clip to animate (from 0)")
    frame_end: IntProperty(name="End", min=0, default=0,
                           description="Stop before this frame (0: the end of the clip)")
    stride: IntProperty(name="Stride", min=1, default=1, description="Analyse every N-th frame")
    offline: BoolProperty(name="Whole-Clip Smoothing", default=False,
                          description="Smooth with the whole clip (default: 2 frames of look-ahead)")
    rig: EnumProperty(
        name="Rig", default="BODY",
        items=[("BODY", "Fitted Body", "Each person is the fitted body, fitted once and posed on every "
                                       "frame (a person it cannot fit keeps the relief armature)"),
               ("RELIEF", "Relief Armature", "The armature of the joints, with the relief mesh of the "
                                             "person's best-seen frame")])
    body_mode: EnumProperty(
        name="Body", default="CLOTHED",
        items=[("CLOTHED", "Clothed", "The photo's clothing and hair carried onto the body"),
               ("MINIMAL", "Minimal", "The fitted body alone")])
    expressions: BoolProperty(name="Face Expressions", default=True,
                              description="The 52 ARKit face shape keys on each fitted body, keyed per frame")


def clip_input(props) -> tuple[str, str]:
    """(path, display name) of the chosen clip; ValueError with a clear message."""
    if props.source == "MOVIE":
        if props.clip is None:
            raise ValueError("Pick a movie clip to animate (or switch to Image Sequence).")
        path = bpy.path.abspath(props.clip.filepath)
        if props.clip.source == "SEQUENCE":
            path = os.path.dirname(path)
    else:
        if not props.sequence_dir:
            raise ValueError("Pick the folder of frames to animate.")
        path = bpy.path.abspath(props.sequence_dir)
    if not os.path.exists(path):
        raise ValueError(f"The clip {path} does not exist.")
    name = os.path.basename(os.path.normpath(path))
    return path, (os.path.splitext(name)[0] if os.path.isfile(path) else name)


class SAPIENS_OT_animate(_JobOperator, bpy.types.Operator):
    """Analyse every frame of the clip, follow each person and bake an animated armature per
    person, with the clip's camera, fps and frame range"""

    bl_idname = "sapiens.animate"
    bl_label = "Animate"
    bl_options = {"REGISTER"}

    def execute(self, context):
        from ..core.motion.clip import AnimateOptions
        from ..core.motion.smoothing import SmoothingOptions
        from ..core.motion.sources import FrameRange, open_source
        from ..core.motion.stream import run_clip, server_analyzer

        session = state.SESSION
        props = context.scene.sapiens_animate
        try:
            path, name = clip_input(props)
            config = preferences.server_config(context)
            frames = FrameRange(props.frame_start, props.frame_end or None, props.stride)
            fps = context.scene.render.fps / context.scene.render.fps_base \
                if props.source == "SEQUENCE" else None
            # Blender's Python has no OpenCV: the server's interpreter decodes a video for us.
            source = open_source(path, frames, fps, decoder_python=config.python or None)
        except ValueError as exc:
            self.report({"ERROR"}, session.set_error(exc))
            return {"CANCELLED"}
        scene_name = context.scene.name
        options = AnimateOptions(smoothing=SmoothingOptions(lag=None if props.offline else 2))
        rig, body_mode, offline = props.rig, props.body_mode.lower(), props.offline
        expressions = bool(props.expressions)

        def work(progress):
            progress.update("starting server", None, "starting the inference server")
            client = session.connect(config)
            progress.check()
            total = source.selected

            def per_frame(done, _total, message):
                progress.update(f"frame {done}/{total or '?'}", done / total if total else None, message)

            animation = run_clip(source, server_analyzer(client, config.model, cancel_event=progress.cancel_event),
                                 options=options, progress=per_frame, cancel_event=progress.cancel_event)
            if rig == "BODY":
                from ..core.motion.body_drive import drive_bodies, server_body_driver

                def per_track(done, count, message):
                    progress.update("body", done / count if count else None, message)

                drive_bodies(animation, *server_body_driver(client, cancel_event=progress.cancel_event),
                             progress=per_track, whole_clip=offline)
            return animation

        def on_success(animation):
            from ..blender.animation import build_animation

            scene = bpy.data.scenes.get(scene_name)
            if scene is None:
                raise RuntimeError(f"The scene {scene_name!r} was removed while animating.")
            result = build_animation(animation, name, background=path, scene=scene, normal_space="OBJECT",
                                     body_mode=body_mode, expressions=expressions)
            session.last_info = (f"Animated {name}: {len(animation.frames)} frames, "
                                 f"{len(result.armatures)} track(s), driving the {animation.source}.")
            if animation.notes:
                session.last_info += " " + animation.notes[0]

        job = Job("Animation", work, on_success=on_success, on_failure=session.set_error)
        return self.finish(jobs.launch(job, state.JobKind.ANIMATE))


def draw_animate(layout, context) -> None:
    session = state.SESSION
    props = context.scene.sapiens_animate
    busy = session.job_running()
    col = layout.column()
    draw_clip_source(col, props, "sequence_dir")
    row = col.row(align=True)
    row.prop(props, "frame_start")
    row.prop(props, "frame_end")
    row = col.row(align=True)
    row.prop(props, "stride")
    row.prop(props, "offline", text="Whole Clip")
    row = col.row(align=True)
    row.prop(props, "rig", text="")
    sub = row.row(align=True)
    sub.enabled = props.rig == "BODY"
    sub.prop(props, "body_mode", text="")
    sub.prop(props, "expressions", text="", icon="MONKEY")
    draw_job_button(col, session, busy, state.JobKind.ANIMATE, "sapiens.animate", "Animate", "ARMATURE_DATA")


class SAPIENS_PT_animate(_SapiensPanel, bpy.types.Panel):
    bl_label = "Animate"
    bl_parent_id = "SAPIENS_PT_main"
    bl_options = {"DEFAULT_CLOSED"}

    def draw(self, context):
        draw_animate(self.layout, context)


CLASSES = (SapiensAnimateProperties, SAPIENS_OT_animate, SAPIENS_PT_animate)


def register_scene_properties():
    bpy.types.Scene.sapiens_animate = PointerProperty(type=SapiensAnimateProperties)


def unregister_scene_properties():
    del bpy.types.Scene.sapiens_animate
