# SPDX-License-Identifier: GPL-3.0-or-later
"""The 3D Viewport sidebar tab "Sapiens": photo, Analyze/Cancel with progress, maps, builders,
person selector and the server line.

Each panel's `draw` forwards to a module-level `draw_*(layout, context)` function so tests can
run it headlessly with a recording layout (the bpy module never draws panels).
"""

from __future__ import annotations

import bpy

from ..core.jobs.background import RUNNING
from ..core.local_server.process import ServerState
from . import preferences, state, storage

BUILD_BUTTONS = (
    ("sapiens.build_mesh", "Mesh", "MESH_DATA"),
    ("sapiens.build_normal_texture", "Normal Texture", "TEXTURE"),
    ("sapiens.build_part_materials", "Part Materials", "MATERIAL"),
    ("sapiens.build_armature", "Armature", "ARMATURE_DATA"),
    ("sapiens.build_body", "Body", "OUTLINER_OB_ARMATURE"),
)


def draw_main(layout, context) -> None:
    session = state.SESSION
    props = context.scene.sapiens
    panel_state = session.panel_state()
    busy = panel_state in (state.BUSY, state.STARTING)

    col = layout.column()
    col.row().prop(props, "photo_source", expand=True)
    if props.photo_source == "FILE":
        col.prop(props, "photo_path", text="")
    else:
        col.template_ID(props, "photo_image", open="image.open")
    has_photo = bool(props.photo_path if props.photo_source == "FILE" else props.photo_image)

    row = col.row(align=True)
    row.scale_y = 1.4
    sub = row.row(align=True)
    sub.enabled = has_photo and not busy
    sub.operator("sapiens.analyze", text="Analyze", icon="VIEWZOOM")
    sub = row.row(align=True)
    sub.enabled = busy
    sub.operator("sapiens.cancel", text="", icon="CANCEL")

    hint = preferences.environment_hint(context, body=props.shape == "BODY")
    if hint and not busy:
        box = col.box()
        box.label(text=hint, icon="INFO")
        box.operator("sapiens.setup_environment", text="Set Up Server Environment", icon="IMPORT")

    job = session.job
    if busy and job is not None and job.state == RUNNING:
        text = job.stage if job.stage == job.message else f"{job.stage}: {job.message}"
        if job.fraction is None:
            col.label(text=text[:80] or "working…", icon="SORTTIME")
        else:
            col.progress(factor=job.fraction, type="BAR", text=text[:80])
    if panel_state == state.ERROR:
        box = col.box()
        box.alert = True
        for i, line in enumerate(_wrap(session.last_error, 48)[:8]):
            box.label(text=line, icon="ERROR" if i == 0 else "BLANK1")
        box.operator("sapiens.clear_error", text="Dismiss", icon="X")
    elif session.last_info and not busy:
        col.label(text=session.last_info[:90], icon="INFO")


def draw_maps(layout, context) -> None:
    props = context.scene.sapiens
    summary = storage.analysis_summary(context.scene)
    col = layout.column()
    if not summary:
        col.label(text="No analysis yet", icon="INFO")
        return
    col.label(text=f"{summary.get('photo', '')}  ({summary.get('source', '?')})")
    w, h = summary.get("size", [0, 0])
    col.label(text=f"{w} x {h} px, {len(summary.get('people', []))} people, "
                   f"{'metric' if summary.get('metric') else 'relative'} depth")
    flow = col.grid_flow(columns=3, even_columns=True, align=True)
    for attr, label in (("parts_image", "Parts"), ("normal_image", "Normals"), ("depth_image", "Depth")):
        image = getattr(props, attr)
        cell = flow.column(align=True)
        if image is not None:
            cell.template_icon(icon_value=_preview_icon(image), scale=5.0)
        cell.label(text=label)


def _preview_icon(image) -> int:
    try:
        return image.preview_ensure().icon_id
    except (AttributeError, RuntimeError):
        return 0


def draw_build(layout, context) -> None:
    session = state.SESSION
    props = context.scene.sapiens
    has_maps = storage.has_analysis(context.scene)
    col = layout.column()
    col.enabled = has_maps and not session.job_running()
    if len(storage.analysis_summary(context.scene).get("people", [])) > 1:
        col.prop(props, "person")
    settings = col.column(align=True)
    settings.prop(props, "stride")
    settings.row(align=True).prop(props, "shape", expand=True)
    body_missing = props.shape == "BODY" and not body_fit_available()
    if props.shape == "BODY":
        settings.prop(props, "body")
        settings.prop(props, "expressions")
        if body_missing:
            settings.label(text="Needs the body fit, which this version does not have yet", icon="ERROR")
    settings.prop(props, "skinning")
    col = col.column()
    col.enabled = not body_missing
    grid = col.grid_flow(columns=2, even_columns=True, align=True)
    for op, text, icon in BUILD_BUTTONS:
        grid.operator(op, text=text, icon=icon)
    row = col.row()
    row.scale_y = 1.3
    row.operator("sapiens.build_all", text="Build All", icon="OUTLINER_OB_ARMATURE")
    if not has_maps:
        layout.label(text="Analyze a photo first", icon="INFO")
    draw_face(layout, getattr(context, "active_object", None))


FACE_KEYS_SHOWN = 5


def draw_face(layout, obj) -> None:
    """The active body's expression: its strongest ARKit keys as sliders (the rest in the mesh's
    Shape Keys)."""
    from ..blender.expressions import BASIS, EXPRESSIONS_PROP

    if obj is None or obj.type != "MESH" or EXPRESSIONS_PROP not in obj.data or obj.data.shape_keys is None:
        return
    box = layout.box()
    box.label(text="Face Expression", icon="MONKEY")
    blocks = [kb for kb in obj.data.shape_keys.key_blocks if kb.name != BASIS]
    strongest = sorted(blocks, key=lambda kb: -kb.value)[:FACE_KEYS_SHOWN]
    if not strongest or strongest[0].value <= 0.0:
        box.label(text=f"Neutral ({len(blocks)} ARKit keys)")
        return
    for kb in strongest:
        if kb.value > 0.0:
            box.prop(kb, "value", text=kb.name, slider=True)


def body_fit_available() -> bool:
    """Whether this version builds BuildOptions.body ('minimal'/'clothed')."""
    from ..blender import pipeline

    return bool(getattr(pipeline, "BODY_FIT_AVAILABLE", False))


def draw_server(layout, context) -> None:
    session = state.SESSION
    server_state = session.server_state()
    busy = session.job_running()
    col = layout.column()
    icons = {ServerState.READY: "CHECKMARK", ServerState.STARTING: "SORTTIME", ServerState.ERROR: "ERROR",
             ServerState.STOPPED: "RADIOBUT_OFF"}
    label = f"Server: {server_state.value}"
    if session.job_running() and session.job_kind == state.JobKind.START_SERVER:
        label = "Server: starting"
    url, server_error = session.server_detail()
    if server_state == ServerState.READY and url:
        label += f" ({url})"
    elif session.remote_client is not None:
        label += f" ({session.remote_client.base_url})"
    col.label(text=label, icon=icons.get(server_state, "QUESTION"))
    row = col.row(align=True)
    sub = row.row(align=True)
    sub.enabled = not busy and server_state != ServerState.READY
    sub.operator("sapiens.server_start", text="Start", icon="PLAY")
    sub = row.row(align=True)
    sub.enabled = not busy and server_state != ServerState.STOPPED
    sub.operator("sapiens.server_stop", text="Stop", icon="SNAP_FACE")
    sub = row.row(align=True)
    sub.enabled = not busy and server_state == ServerState.READY
    sub.operator("sapiens.free_memory", text="Free GPU Memory", icon="TRASH")
    if server_state == ServerState.ERROR and server_error:
        col.label(text=server_error[:90], icon="ERROR")


def _wrap(text: str, width: int) -> list[str]:
    lines = []
    for paragraph in (text or "").splitlines() or [""]:
        words, line = paragraph.split(), ""
        for word in words:
            if line and len(line) + 1 + len(word) > width:
                lines.append(line)
                line = word
            else:
                line = f"{line} {word}".strip()
        lines.append(line)
    return lines


def draw_clip_source(col, props, folder_prop: str) -> None:
    """A sub-panel's input: a movie clip or a folder of images (Animate, Scan)."""
    col.row().prop(props, "source", expand=True)
    if props.source == "MOVIE":
        col.template_ID(props, "clip", open="clip.open")
    else:
        col.prop(props, folder_prop, text="")


def draw_job_button(col, session, busy: bool, kind, operator: str, text: str, icon: str) -> None:
    """A sub-panel's big button with its Cancel, and the progress of its own job (Animate, Scan)."""
    row = col.row(align=True)
    row.scale_y = 1.3
    sub = row.row(align=True)
    sub.enabled = not busy
    sub.operator(operator, text=text, icon=icon)
    sub = row.row(align=True)
    mine = busy and session.job_kind == kind
    sub.enabled = mine
    sub.operator("sapiens.cancel", text="", icon="CANCEL")
    job = session.job
    if mine and job is not None:
        label = job.stage if not job.message else f"{job.stage}: {job.message}"
        if job.fraction is not None:
            col.progress(factor=job.fraction, text=label[:60])
        else:
            col.label(text=label[:60], icon="TIME")


class _SapiensPanel:
    bl_space_type = "VIEW_3D"
    bl_region_type = "UI"
    bl_category = "Sapiens"


class SAPIENS_PT_main(_SapiensPanel, bpy.types.Panel):
    bl_label = "Sapiens"

    def draw(self, context):
        draw_main(self.layout, context)


class SAPIENS_PT_maps(_SapiensPanel, bpy.types.Panel):
    bl_label = "Maps"
    bl_parent_id = "SAPIENS_PT_main"

    def draw(self, context):
        draw_maps(self.layout, context)


class SAPIENS_PT_build(_SapiensPanel, bpy.types.Panel):
    bl_label = "Build"
    bl_parent_id = "SAPIENS_PT_main"

    def draw(self, context):
        draw_build(self.layout, context)


class SAPIENS_PT_server(_SapiensPanel, bpy.types.Panel):
    bl_label = "Server"
    bl_parent_id = "SAPIENS_PT_main"

    def draw(self, context):
        draw_server(self.layout, context)


CLASSES = (SAPIENS_PT_main, SAPIENS_PT_maps, SAPIENS_PT_build, SAPIENS_PT_server)
