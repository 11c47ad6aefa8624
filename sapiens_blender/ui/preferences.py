# SPDX-License-Identifier: GPL-3.0-or-later
"""Add-on preferences: where the server runs, which model, device, precision and weights folder,
plus the Check and Set Up Server Environment buttons."""

from __future__ import annotations

import os
from pathlib import Path

import bpy
from bpy.props import BoolProperty, EnumProperty, StringProperty

from ..core.local_server import env_setup, runtime as server_runtime
from ..core.jobs.background import Job, JobState
from . import jobs, state
from .properties import _PATH_OPTIONS

from .. import __package__ as ADDON_ID  # bl_ext.user_default.sapiens_blender once installed

FAMILIES = [
    ("auto", "Automatic", "The best model available on the server's machine"),
    ("sapiens2", "Sapiens2", "Meta Sapiens2: metric depth/pointmap (torch; weights from Hugging Face)"),
    ("sapiens", "Sapiens v1", "Meta Sapiens v1: relative depth (torch; CC BY-NC weights)"),
    ("mediapipe", "MediaPipe (CPU)", "Offline CPU model, no torch needed; coarser results"),
    ("custom", "Other", "Any model name the server lists (e.g. from a --backend-module plugin)"),
]
SIZES = {
    "sapiens2": ["0.4b", "0.8b", "1b", "5b"],
    "sapiens": ["0.3b", "0.6b", "1b", "2b"],
}
_size_items_cache: list = []


def _size_items(self, context):
    sizes = SIZES.get(self.model_family, [])
    items = [(s, s.upper(), f"{s} parameters") for s in sizes] or [("none", "-", "No sizes")]
    _size_items_cache[:] = items  # Blender needs the strings kept alive
    return items


def user_dir(create: bool = True) -> str:
    """The extension's writable folder (never the add-on's own folder, which may be read-only)."""
    try:
        return bpy.utils.extension_path_user(ADDON_ID, create=create)
    except (ValueError, RuntimeError, AttributeError):
        path = state.default_user_dir()
        os.makedirs(path, exist_ok=True)
        return path


def weights_dir(prefs) -> str:
    if prefs is not None and prefs.weights_dir:
        return bpy.path.abspath(prefs.weights_dir)
    try:
        return bpy.utils.extension_path_user(ADDON_ID, path="weights", create=True)
    except (ValueError, RuntimeError, AttributeError):
        return os.path.join(user_dir(), "weights")


def get_prefs(context=None):
    context = context or bpy.context
    addon = context.preferences.addons.get(ADDON_ID)
    return addon.preferences if addon else None


def environment_hint(context=None, body: bool = False) -> str:
    """One line when the chosen model (or the body fit) needs the server environment (torch)
    and none is set up; '' otherwise."""
    prefs = get_prefs(context)
    if prefs is None or prefs.server_mode != state.LOCAL or prefs.python_path:
        return ""
    config = server_config(context)
    if server_runtime.needs_environment(config.model):
        return f"{config.model} needs the server environment (torch): set it up once"
    if body:
        return "The body fit needs the server environment (torch): set it up once"
    return ""


def server_config(context=None) -> state.ConnectionSettings:
    """Snapshot of the preferences for a worker thread (bpy values must not be read there)."""
    prefs = get_prefs(context)
    if prefs is None:
        # No preferences (add-on registered without them): Blender's Python with the bundled wheels.
        return state.ConnectionSettings(python="", online=bool(bpy.app.online_access))
    family = prefs.model_family
    model = f"{family}-{prefs.model_size}" if family in SIZES else family
    if family == "custom":
        model = prefs.custom_model.strip() or "auto"
    return state.ConnectionSettings(
        mode=prefs.server_mode,
        python=bpy.path.abspath(prefs.python_path) if prefs.python_path else "",
        url=prefs.remote_url.strip(),
        token=prefs.remote_token.strip(),
        model=model,
        device=prefs.device,
        precision=prefs.precision,
        weights_dir=weights_dir(prefs),
        online=bool(bpy.app.online_access),
        extra_args=state.parse_extra_args(prefs.extra_server_args),
        # Folders holding extra backend plugins (see docs/user_guide.md, "Advanced").
        extra_pythonpath=os.environ.get("SAPIENS_SERVER_PYTHONPATH", ""),
    )


class SapiensPreferences(bpy.types.AddonPreferences):
    bl_idname = ADDON_ID

    server_mode: EnumProperty(
        name="Server",
        items=[(state.LOCAL, "Local", "Start the inference server on this computer"),
               (state.REMOTE, "Remote", "Use a server that already runs elsewhere (URL + token)")],
        default=state.LOCAL,
    )
    python_path: StringProperty(
        name="Python", subtype="FILE_PATH", **_PATH_OPTIONS,
        description="Python of the server environment (with torch, for Sapiens and the body fit). "
                    "Empty: Blender's own Python with the packages bundled in the add-on, which "
                    "runs the offline MediaPipe model",
    )
    remote_url: StringProperty(name="URL", default="http://127.0.0.1:8000")
    remote_token: StringProperty(name="Token", subtype="PASSWORD")
    model_family: EnumProperty(name="Model", items=FAMILIES, default="auto")
    model_size: EnumProperty(name="Size", items=_size_items)
    custom_model: StringProperty(name="Model Name", description="A model name the server lists")
    device: EnumProperty(
        name="Device",
        items=[("auto", "Automatic", "CUDA, then Apple MPS, then CPU"), ("cuda", "CUDA", "NVIDIA GPU"),
               ("mps", "Apple MPS", "Apple Silicon GPU"), ("cpu", "CPU", "No GPU (slow)")],
        default="auto",
    )
    precision: EnumProperty(
        name="Precision",
        items=[("auto", "Automatic", "bf16/fp16 on GPUs, fp32 on CPU"), ("fp32", "FP32", ""),
               ("bf16", "BF16", ""), ("fp16", "FP16", "")],
        default="auto",
    )
    weights_dir: StringProperty(
        name="Weights Folder", subtype="DIR_PATH", **_PATH_OPTIONS,
        description="Where model weights are cached (empty: the extension's user folder)",
    )
    extra_server_args: StringProperty(
        name="Extra Server Arguments",
        description="Advanced: extra command-line arguments for python -m inference_server",
    )
    show_setup_log: BoolProperty(name="Show Log", default=False)

    def draw(self, context):
        draw_preferences(self, self.layout)


def draw_preferences(prefs, layout) -> None:
    """Separate from the class so tests can call it with a recording layout."""
    session = state.SESSION
    col = layout.column()
    col.row().prop(prefs, "server_mode", expand=True)
    if prefs.server_mode == state.LOCAL:
        row = col.row(align=True)
        row.prop(prefs, "python_path")
        row.operator("sapiens.check_interpreter", text="Check", icon="CHECKMARK")
        if session.check_result:
            icon = "CHECKMARK" if session.check_result.get("ok") else "ERROR"
            col.label(text=session.check_result.get("message", ""), icon=icon)
        _draw_setup(prefs, col.box(), session)
        col.prop(prefs, "extra_server_args")
    else:
        col.prop(prefs, "remote_url")
        col.prop(prefs, "remote_token")
    col.separator()
    col.prop(prefs, "model_family")
    if prefs.model_family in SIZES:
        col.prop(prefs, "model_size")
    elif prefs.model_family == "custom":
        col.prop(prefs, "custom_model")
    col.prop(prefs, "device")
    col.prop(prefs, "precision")
    col.prop(prefs, "weights_dir")
    if not bpy.app.online_access:
        box = col.box()
        box.label(text="Online access is off: weights will not be downloaded.", icon="INFO")
        box.label(text="Allow it in Preferences > System > Network, or use MediaPipe (CPU).")


def _draw_setup(prefs, box, session) -> None:
    job = session.setup_job
    running = job is not None and not job.finished
    box.label(text="Server Environment", icon="CONSOLE")
    row = box.row(align=True)
    sub = row.row(align=True)
    sub.enabled = not running
    sub.operator("sapiens.setup_environment", text="Set Up Server Environment", icon="IMPORT")
    cancel = row.row(align=True)
    cancel.enabled = running
    cancel.operator("sapiens.cancel_setup", text="", icon="CANCEL")
    if job is not None:
        if running:
            box.progress(factor=job.fraction or 0.0, type="BAR", text=f"{job.stage}: {job.message}"[:90])
        else:
            box.label(text=job.message.splitlines()[0][:120] if job.message else job.state,
                      icon="CHECKMARK" if job.state == JobState.DONE else "ERROR")
    if session.setup_log:
        box.prop(prefs, "show_setup_log", toggle=True)
        if prefs.show_setup_log:
            for line in _log_tail(session.setup_log, 12):
                box.label(text=line[:140])


def _log_tail(path: str, lines: int) -> list[str]:
    try:
        return Path(path).read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return []


class SAPIENS_OT_check_interpreter(bpy.types.Operator):
    """Run the server's Python interpreter and report whether torch, CUDA or MPS are found"""

    bl_idname = "sapiens.check_interpreter"
    bl_label = "Check Python"

    @classmethod
    def poll(cls, context):
        job = state.SESSION.check_job
        return job is None or job.finished

    def execute(self, context):
        prefs = get_prefs(context)
        python = bpy.path.abspath(prefs.python_path) if prefs and prefs.python_path else ""
        session = state.SESSION
        session.check_result = {"ok": True, "message": f"checking {python or 'the interpreter'}…"}

        def done(result):
            session.check_result = result

        # Importing torch takes seconds: run the probe off the main thread.
        job = Job("Interpreter check", lambda progress: env_setup.probe_interpreter(python, timeout=60),
                  on_success=done)
        jobs.launch(job, state.JobKind.CHECK, slot="check_job")
        if job.finished:  # background mode: report like any operator
            result = session.check_result
            self.report({"INFO"} if result.get("ok") else {"WARNING"}, result.get("message", ""))
        return {"FINISHED"}


class SAPIENS_OT_setup_environment(bpy.types.Operator):
    """Create a Python environment for the server in the extension's user folder (downloads torch
    and the server's packages, several GB) and use it"""

    bl_idname = "sapiens.setup_environment"
    bl_label = "Set Up Server Environment"

    def execute(self, context):
        session = state.SESSION
        if session.setup_job is not None and not session.setup_job.finished:
            self.report({"WARNING"}, "The server environment is already being set up.")
            return {"CANCELLED"}
        if not bpy.app.online_access:
            self.report({"ERROR"}, "Setting up the server environment downloads packages, but "
                        "online access is off. Allow it in Preferences > System > Network.")
            return {"CANCELLED"}
        plan = env_setup.EnvPlan(env_setup.default_env_dir(user_dir()),
                                 torch=env_setup.detect_torch_variant())
        log_path = os.path.join(user_dir(), "server-env-setup.log")
        session.setup_log = log_path

        def work(progress):
            return env_setup.build_environment(plan, log_path, progress.update, progress.cancel_event)

        def done(python):
            prefs = get_prefs()  # looked up again: the preferences may have been reloaded since
            if prefs is not None:
                prefs.python_path = str(python)
            session.check_result = {}

        job = Job("Server environment set-up", work, on_success=done)
        jobs.launch(job, state.JobKind.SETUP, slot="setup_job")
        return {"FINISHED"}


class SAPIENS_OT_cancel_setup(bpy.types.Operator):
    """Stop setting up the server environment (nothing half-installed is kept)"""

    bl_idname = "sapiens.cancel_setup"
    bl_label = "Cancel Environment Set-Up"

    def execute(self, context):
        job = state.SESSION.setup_job
        if job is None or job.finished:
            return {"CANCELLED"}
        job.cancel()
        return {"FINISHED"}


CLASSES = (SapiensPreferences, SAPIENS_OT_check_interpreter, SAPIENS_OT_setup_environment,
           SAPIENS_OT_cancel_setup)
