# SPDX-License-Identifier: GPL-3.0-or-later
"""Analyze / Cancel and the server line's Start / Stop / Free GPU Memory.

Each operator only snapshots what it needs from bpy, then hands socket work to a core `Job`
(worker thread); results come back to the main thread through `ui.jobs` (timer) or, in
background mode, before the operator returns.
"""

from __future__ import annotations

import os
import tempfile

import bpy

from ..core.body.records import has_body
from ..core.remote import body_calls
from ..core.jobs.background import CANCELLED, DONE, Job
from ..core.local_server.process import ServerState
from . import jobs, map_images, preferences, properties, state, storage

# Server job stages -> the words the panel shows.
STAGE_LABELS = {
    "queued": "waiting for the server",
    "load": "loading model (downloading weights on first use)",
    "decode": "reading photo",
    "encode": "sending maps",
    "done": "receiving maps",
    "fit": "fitting the body",
}


def stage_label(stage: str) -> str:
    if stage in STAGE_LABELS:
        return STAGE_LABELS[stage]
    return f"inferring {stage}" if stage else "inferring"


class _JobOperator:
    """Shared: refuse to start while another job runs; finish with a report in background."""

    @classmethod
    def poll(cls, context):
        return not state.SESSION.job_running()

    def finish(self, job: Job):
        if not job.finished:
            return {"FINISHED"}  # interactive: the timer takes over
        if job.state == DONE:
            if state.SESSION.last_info:
                self.report({"INFO"}, state.SESSION.last_info)
            return {"FINISHED"}
        if job.state == CANCELLED:
            self.report({"WARNING"}, f"{job.name} was cancelled.")
        else:
            self.report({"ERROR"}, state.SESSION.last_error or job.message)
        return {"CANCELLED"}


def photo_input(context) -> tuple[object, str]:
    """(path or bytes, a display name) of the panel's photo; ValueError with a clear message."""
    props = context.scene.sapiens
    if props.photo_source == "IMAGE":
        image = props.photo_image
        if image is None:
            raise ValueError("Pick an image to analyse (or switch the photo source to File).")
        if image.is_dirty:  # painted on since it was loaded: send what the user sees
            return _image_to_png(image), image.name
        if image.packed_file is not None:
            return bytes(image.packed_file.data), image.name
        path = bpy.path.abspath(image.filepath) if image.filepath else ""
        if path and os.path.isfile(path):
            return path, image.name
        return _image_to_png(image), image.name
    if not props.photo_path:
        raise ValueError("Pick a photo file to analyse.")
    path = bpy.path.abspath(props.photo_path)
    if not os.path.isfile(path):
        raise ValueError(f"The photo {path} does not exist.")
    return path, os.path.basename(path)


def _image_to_png(image) -> bytes:
    """A generated/rendered image has no file: save a PNG copy on the main thread."""
    fd, tmp = tempfile.mkstemp(suffix=".png")
    os.close(fd)
    try:
        image.save_render(tmp)
        with open(tmp, "rb") as fh:
            return fh.read()
    finally:
        os.unlink(tmp)


class SAPIENS_OT_analyze(_JobOperator, bpy.types.Operator):
    """Send the photo to the inference server and store the maps (depth, normals, parts,
    keypoints) in this .blend"""

    bl_idname = "sapiens.analyze"
    bl_label = "Analyze"
    bl_options = {"REGISTER"}

    def execute(self, context):
        session = state.SESSION
        try:
            photo, photo_name = photo_input(context)
            config = preferences.server_config(context)
        except ValueError as exc:
            session.set_error(exc)
            self.report({"ERROR"}, str(exc))
            return {"CANCELLED"}
        scene_name = context.scene.name
        body = properties.build_settings(context.scene)["body"]

        def work(progress):
            progress.update("starting server", None, "starting the inference server")
            client = session.connect(config)
            progress.check()
            progress.update("loading", None, f"asking {config.model} to analyse {photo_name}")
            # the shape "Body" has the server fit the body in the same request: Build Body then
            # needs no second trip with the maps (body_calls.analyze decides, as for the CLI)
            maps, _notes = body_calls.analyze(
                client, photo, config.model, body,
                progress=lambda s, f, m: progress.update(stage_label(s), f, m or stage_label(s)),
                cancel_event=progress.cancel_event,
            )
            return maps

        def on_success(maps):
            scene = bpy.data.scenes.get(scene_name)
            if scene is None:
                raise RuntimeError(f"The scene {scene_name!r} was removed during the analysis.")
            storage.store_analysis(scene, maps, photo=photo_name)
            map_images.update_map_images(scene, maps)
            people = len(maps.person_ids)
            fitted = " (bodies fitted)" if has_body(maps) else ""
            session.last_info = f"Analysed {photo_name} with {maps.source}: {people} " \
                                f"{'person' if people == 1 else 'people'} found{fitted}."

        def on_failure(error):
            message = session.set_error(error)
            hint = state.offline_hint(config)
            if hint and any(w in message.lower() for w in ("offline", "weight", "download", "hub", "cache")):
                session.last_error = f"{message} {hint}"

        job = Job("Analysis", work, on_success=on_success, on_failure=on_failure)
        return self.finish(jobs.launch(job, state.JobKind.ANALYZE))


class SAPIENS_OT_cancel(bpy.types.Operator):
    """Stop the running analysis or server start (the server cancels its job too)"""

    bl_idname = "sapiens.cancel"
    bl_label = "Cancel"

    @classmethod
    def poll(cls, context):
        return state.SESSION.job_running()

    def execute(self, context):
        state.SESSION.job.cancel()
        return {"FINISHED"}


class SAPIENS_OT_server_start(_JobOperator, bpy.types.Operator):
    """Start the inference server (or connect to the remote one) without analysing anything"""

    bl_idname = "sapiens.server_start"
    bl_label = "Start Server"

    def execute(self, context):
        session = state.SESSION
        try:
            config = preferences.server_config(context)
        except ValueError as exc:
            self.report({"ERROR"}, session.set_error(exc))
            return {"CANCELLED"}

        def work(progress):
            progress.update("starting server", None, "starting the inference server")
            session.connect(config)

        def on_success(_):
            session.last_info = "The inference server is ready."

        job = Job("Server start", work, on_success=on_success, on_failure=session.set_error)
        return self.finish(jobs.launch(job, state.JobKind.START_SERVER))


class SAPIENS_OT_server_stop(_JobOperator, bpy.types.Operator):
    """Stop the local inference server (frees all its memory)"""

    bl_idname = "sapiens.server_stop"
    bl_label = "Stop Server"

    @classmethod
    def poll(cls, context):
        return not state.SESSION.job_running() and state.SESSION.server_state() != ServerState.STOPPED

    def execute(self, context):
        session = state.SESSION

        def work(progress):
            # SIGTERM, then up to 10 s for a clean exit: not on the main thread.
            progress.update("stopping server", None, "stopping the inference server")
            session.stop_server()

        def on_success(_):
            session.last_info = "The inference server was stopped."

        job = Job("Server stop", work, on_success=on_success, on_failure=session.set_error)
        return self.finish(jobs.launch(job, state.JobKind.STOP_SERVER))


class SAPIENS_OT_free_memory(_JobOperator, bpy.types.Operator):
    """Unload the server's models so their GPU memory is free for rendering; the next
    analysis loads them again"""

    bl_idname = "sapiens.free_memory"
    bl_label = "Free GPU Memory"

    @classmethod
    def poll(cls, context):
        return not state.SESSION.job_running() and state.SESSION.server_state() == ServerState.READY

    def execute(self, context):
        session = state.SESSION
        client = session.current_client()
        if client is None:
            self.report({"WARNING"}, "The inference server is not running.")
            return {"CANCELLED"}

        def work(progress):
            progress.update("freeing memory", None, "unloading models")
            loaded = [m["name"] for m in client.repository_index() if m.get("state") == "READY"]
            for name in loaded:
                progress.check()
                client.unload_model(name)
            return loaded

        def on_success(names):
            session.last_info = (f"Unloaded {', '.join(names)}." if names
                                 else "No model was loaded; nothing to free.")

        job = Job("Free memory", work, on_success=on_success, on_failure=session.set_error)
        return self.finish(jobs.launch(job, state.JobKind.FREE_MEMORY))


class SAPIENS_OT_clear_error(bpy.types.Operator):
    """Dismiss the error shown in the panel"""

    bl_idname = "sapiens.clear_error"
    bl_label = "Dismiss"

    def execute(self, context):
        state.SESSION.clear_error()
        return {"FINISHED"}


class SAPIENS_OT_report(bpy.types.Operator):
    """Show a finished background job's outcome in Blender's status bar and Info log"""

    bl_idname = "sapiens.report"
    bl_label = "Sapiens Report"
    bl_options = {"INTERNAL"}

    level: bpy.props.EnumProperty(items=[("INFO", "Info", ""), ("WARNING", "Warning", ""),
                                         ("ERROR", "Error", "")], default="INFO")
    message: bpy.props.StringProperty()

    def execute(self, context):
        self.report({self.level}, self.message)
        return {"FINISHED"}


CLASSES = (SAPIENS_OT_report, SAPIENS_OT_analyze, SAPIENS_OT_cancel, SAPIENS_OT_server_start, SAPIENS_OT_server_stop,
           SAPIENS_OT_free_memory, SAPIENS_OT_clear_error)
