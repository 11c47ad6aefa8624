# SPDX-License-Identifier: GPL-3.0-or-later
"""Every panel and the preferences draw headlessly in each state (no server, starting, ready,
running, error) with the right buttons enabled. The bpy module never draws panels, so `draw`
gets a recording stand-in layout; scene, preferences, jobs and clients are real."""

import threading

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")
import addon_utils  # noqa: E402

from sapiens_blender.core.remote.client import V2Client  # noqa: E402
from sapiens_blender.core.jobs.background import Job  # noqa: E402

pytestmark = [pytest.mark.bpy]


class Layout:
    """Records what a draw function asks for; `enabled` inherits like Blender's layouts."""

    def __init__(self, parent=None, kind="layout"):
        self.parent, self.kind = parent, kind
        self.enabled, self.active, self.alert = True, True, False
        self.scale_y = self.scale_x = 1.0
        self.items = []

    @property
    def effective_enabled(self):
        return self.enabled and (self.parent is None or self.parent.effective_enabled)

    def _child(self, kind):
        child = Layout(self, kind)
        self.items.append(child)
        return child

    def row(self, **kw):
        return self._child("row")

    def column(self, **kw):
        return self._child("column")

    def box(self):
        return self._child("box")

    def grid_flow(self, **kw):
        return self._child("grid")

    def split(self, **kw):
        return self._child("split")

    def operator(self, idname, **kw):
        bpy_op = getattr(getattr(bpy.ops, idname.split(".")[0]), idname.split(".")[1])
        assert bpy_op.get_rna_type() is not None  # the operator really exists
        self.items.append(("operator", idname, kw.get("text"), self))
        return type("OpProps", (), {})()

    def prop(self, data, name, **kw):
        assert name in data.bl_rna.properties, name  # the property really exists
        self.items.append(("prop", name, kw.get("text"), self))

    def label(self, text="", **kw):
        self.items.append(("label", text, kw.get("icon"), self))

    def progress(self, factor=0.0, type="BAR", text=""):
        assert 0.0 <= factor <= 1.0
        self.items.append(("progress", text, factor, self))

    def template_ID(self, data, prop, **kw):
        self.prop(data, prop)

    def template_icon(self, icon_value=0, scale=1.0):
        self.items.append(("icon", icon_value, scale, self))

    def separator(self, **kw):
        pass

    def walk(self):
        for item in self.items:
            if isinstance(item, Layout):
                yield from item.walk()
            else:
                yield item

    def buttons(self):
        """{operator id: enabled}"""
        return {i[1]: i[3].effective_enabled for i in self.walk() if i[0] == "operator"}

    def labels(self):
        return " | ".join(str(i[1]) for i in self.walk() if i[0] == "label")


class Context:
    def __init__(self):
        self.scene = bpy.context.scene
        self.preferences = bpy.context.preferences


@pytest.fixture(scope="module")
def ui():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    addon_utils.enable("sapiens_blender", default_set=True, handle_error=None)
    from sapiens_blender.ui import panel, preferences, state

    yield panel, preferences, state
    state.reset_session()
    addon_utils.disable("sapiens_blender", default_set=True)


def draw_all(panel):
    layouts = {}
    for name in ("main", "maps", "build", "server"):
        layout = Layout()
        getattr(panel, f"draw_{name}")(layout, Context())
        layouts[name] = layout
    return layouts


def blocked_job(kind, state, stage="inferring seg", fraction=0.4):
    gate = threading.Event()

    def work(progress):
        progress.update(stage, fraction, f"{stage} 40%")
        gate.wait(10)

    job = Job(kind, work).start()
    state.SESSION.job, state.SESSION.job_kind = job, kind
    for _ in range(200):
        job.pump()
        if job.stage == stage:
            break
        threading.Event().wait(0.01)
    return gate, job


def test_no_server_state(ui):
    panel, _, state = ui
    state.reset_session()
    bpy.context.scene.sapiens.photo_path = ""
    assert state.SESSION.panel_state() == state.NO_SERVER
    d = draw_all(panel)
    main, server, build = d["main"].buttons(), d["server"].buttons(), d["build"].buttons()
    assert main == {"sapiens.analyze": False, "sapiens.cancel": False}  # no photo yet
    assert server == {"sapiens.server_start": True, "sapiens.server_stop": False, "sapiens.free_memory": False}
    assert set(build.values()) == {False} and len(build) == 6  # nothing analysed yet
    assert "No analysis yet" in d["maps"].labels() and "Analyze a photo first" in d["build"].labels()
    bpy.context.scene.sapiens.photo_path = "//photo.jpg"
    assert draw_all(panel)["main"].buttons()["sapiens.analyze"] is True


def test_starting_state_never_blocks_the_ui(ui, tmp_path):
    """A real ServerProcess whose interpreter never prints its ready line holds its lock for the
    whole start-up; drawing must not wait for it."""
    import time

    from sapiens_blender.ui import jobs

    panel, _, state = ui
    state.reset_session()
    slow_python = tmp_path / "slow_python"
    slow_python.write_text("#!/bin/sh\nsleep 3\n")
    slow_python.chmod(0o755)
    config = state.ConnectionSettings(python=str(slow_python), startup_timeout=2.0)
    job = Job("Server start", lambda progress: state.SESSION.connect(config),
              on_failure=state.SESSION.set_error)
    jobs.BLOCKING = False
    try:
        jobs.launch(job, "start server")
        deadline = time.monotonic() + 5
        while state.SESSION.server_state() != "starting" and time.monotonic() < deadline:
            time.sleep(0.01)
        assert state.SESSION.panel_state() == state.STARTING
        start = time.monotonic()
        d = draw_all(panel)
        assert time.monotonic() - start < 0.5  # the server is still starting: no wait
        assert d["main"].buttons() == {"sapiens.analyze": False, "sapiens.cancel": True}
        assert set(d["server"].buttons().values()) == {False}
        assert "Server: starting" in d["server"].labels()
        assert job.wait(10) and job.state == "failed"  # the ready line never came
        assert "did not become ready" in state.SESSION.last_error
        d = draw_all(panel)
        assert d["server"].buttons()["sapiens.server_start"] is True
    finally:
        jobs.BLOCKING = None
        state.reset_session()


def test_ready_state_with_analysis_and_several_people(ui):
    panel, _, state = ui
    from sapiens_blender.ui import map_images, storage
    from synthetic_scene import ellipsoid_maps

    state.reset_session()
    state.SESSION.connection.remote_client = V2Client("http://127.0.0.1:9", "t")  # a configured remote server
    maps = ellipsoid_maps(32, 24, people=2)
    storage.store_analysis(bpy.context.scene, maps, photo="two.png")
    map_images.update_map_images(bpy.context.scene, maps)
    assert state.SESSION.panel_state() == state.READY
    d = draw_all(panel)
    assert d["main"].buttons() == {"sapiens.analyze": True, "sapiens.cancel": False}
    assert d["server"].buttons() == {"sapiens.server_start": False, "sapiens.server_stop": True,
                                     "sapiens.free_memory": True}
    assert set(d["build"].buttons().values()) == {True}
    assert ("prop", "person", None) in [i[:3] for i in d["build"].walk()]  # selector: 2 people
    icons = [i for i in d["maps"].walk() if i[0] == "icon"]
    assert len(icons) == 3
    assert "32 x 24 px, 2 people, metric depth" in d["maps"].labels()


def test_running_state_shows_progress_and_only_cancel(ui):
    panel, _, state = ui
    gate, job = blocked_job("analyze", state)
    try:
        assert state.SESSION.panel_state() == state.BUSY
        d = draw_all(panel)
        assert d["main"].buttons() == {"sapiens.analyze": False, "sapiens.cancel": True}
        bars = [i for i in d["main"].walk() if i[0] == "progress"]
        assert len(bars) == 1 and bars[0][2] == pytest.approx(0.4) and "inferring seg" in bars[0][1]
        assert set(d["build"].buttons().values()) == {False}
        assert set(d["server"].buttons().values()) == {False}
    finally:
        job.cancel()
        gate.set()
        job.wait(5)


def test_error_state_shows_the_message_and_dismiss(ui):
    panel, _, state = ui
    state.SESSION.connection.remote_client = None
    state.SESSION.set_error("the Python interpreter /x/python was not found: set the server's "
                            "Python in the add-on preferences")
    assert state.SESSION.panel_state() == state.ERROR
    d = draw_all(panel)
    assert d["main"].buttons() == {"sapiens.analyze": True, "sapiens.cancel": False,
                                   "sapiens.clear_error": True}
    assert "/x/python" in d["main"].labels()
    assert d["server"].buttons()["sapiens.server_start"] is True
    state.SESSION.clear_error()


@pytest.mark.parametrize("mode", ["LOCAL", "REMOTE"])
def test_preferences_draw_in_each_mode(ui, mode):
    _, preferences, state = ui
    prefs = preferences.get_prefs()
    prefs.server_mode = mode
    prefs.model_family = "sapiens2"
    state.SESSION.check_result = {"ok": False, "message": "torch is missing"}
    layout = Layout()
    preferences.draw_preferences(prefs, layout)
    props = [i[1] for i in layout.walk() if i[0] == "prop"]
    if mode == "LOCAL":
        assert {"python_path", "extra_server_args"} <= set(props)
        assert layout.buttons() == {"sapiens.check_interpreter": True, "sapiens.setup_environment": True,
                                    "sapiens.cancel_setup": False}
        assert "torch is missing" in layout.labels()
    else:
        assert {"remote_url", "remote_token"} <= set(props) and "python_path" not in props
    assert {"model_family", "model_size", "device", "precision", "weights_dir"} <= set(props)
    assert "Online access is off" in layout.labels()  # the bpy module runs offline
    prefs.server_mode = "LOCAL"
    state.SESSION.check_result = {}


def test_preferences_while_setting_up(ui):
    _, preferences, state = ui
    gate, job = blocked_job("setup", state, stage="installing torch", fraction=0.5)
    state.SESSION.setup_job, state.SESSION.job = job, None
    try:
        layout = Layout()
        preferences.draw_preferences(preferences.get_prefs(), layout)
        assert layout.buttons()["sapiens.setup_environment"] is False
        assert layout.buttons()["sapiens.cancel_setup"] is True
        assert any(i[0] == "progress" and "installing torch" in i[1] for i in layout.walk())
    finally:
        job.cancel()
        gate.set()
        job.wait(5)
        state.SESSION.setup_job = None


def test_map_images_encode_the_maps(ui):
    from sapiens_blender.ui import map_images
    from synthetic_scene import ellipsoid_maps

    maps = ellipsoid_maps(32, 24)
    normals = map_images.normals_rgb(maps)
    inside = maps.mask > 0
    # facing the camera (n ~ (0,0,-1)) shows as the usual light blue of normal maps
    centre = normals[12, 16]
    assert centre[2] > 0.95 and abs(centre[0] - 0.5) < 0.1
    depth = map_images.depth_rgb(maps)[..., 0]
    assert depth[~inside].max() == 0 and depth[inside].min() >= 0.2 - 1e-6
    assert np.isclose(depth[inside].max(), 1.0)


def test_build_settings_reach_the_build_and_body_waits_for_the_fit(ui):
    panel, _, state = ui
    from sapiens_blender.ui import properties, storage
    from synthetic_scene import ellipsoid_maps

    state.reset_session()
    scene = bpy.context.scene
    storage.store_analysis(scene, ellipsoid_maps(32, 24), photo="one.png")
    props = scene.sapiens
    d = draw_all(panel)
    drawn = [i[1] for i in d["build"].walk() if i[0] == "prop"]
    assert {"stride", "shape", "skinning"} <= set(drawn) and "body" not in drawn
    props.stride, props.shape, props.skinning = 3, "CLOSED", "parts"
    assert properties.build_settings(scene) == {"stride": 3, "closed": True, "body": "none", "skinning": "parts",
                                                "expressions": True}
    props.shape, props.body, props.expressions = "BODY", "minimal", False
    assert properties.build_settings(scene)["body"] == "minimal"
    assert properties.build_settings(scene)["expressions"] is False
    props.expressions = True
    d = draw_all(panel)
    assert {"body", "expressions"} <= set(i[1] for i in d["build"].walk() if i[0] == "prop")
    if not panel.body_fit_available():  # until the body fit exists: said, and nothing to click
        assert "Needs the body fit" in d["build"].labels()
        assert set(d["build"].buttons().values()) == {False}
    props.shape, props.stride, props.skinning = "RELIEF", 1, "auto"
    assert set(draw_all(panel)["build"].buttons().values()) == {True}


def test_a_model_that_needs_torch_offers_the_environment_set_up(ui):
    panel, preferences, state = ui
    state.reset_session()
    prefs = preferences.get_prefs()
    try:
        prefs.python_path = ""
        prefs.model_family = "mediapipe"
        assert "sapiens.setup_environment" not in draw_all(panel)["main"].buttons()  # runs on Blender's Python
        prefs.model_family = "sapiens2"
        main = draw_all(panel)["main"]
        assert main.buttons()["sapiens.setup_environment"] is True
        assert "needs the server environment (torch)" in main.labels()
        prefs.python_path = "/envs/torch/bin/python"  # set up: nothing to offer
        assert "sapiens.setup_environment" not in draw_all(panel)["main"].buttons()
    finally:
        prefs.python_path, prefs.model_family = "", "auto"


def test_the_active_body_shows_its_expression(ui):
    panel, _, _ = ui
    from sapiens_blender.blender.expressions import EXPRESSIONS_PROP

    me = bpy.data.meshes.new("face")
    me.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0)], [], [(0, 1, 2)])
    obj = bpy.data.objects.new("face", me)
    obj.shape_key_add(name="Basis")
    for name, value in (("jawOpen", 0.7), ("mouthSmileLeft", 0.3), ("tongueOut", 0.0)):
        obj.shape_key_add(name=name).value = value
    layout = Layout()
    panel.draw_face(layout, obj)
    assert layout.items == [], "a mesh that is not a fitted body shows nothing"
    me[EXPRESSIONS_PROP] = 3
    panel.draw_face(layout, obj)
    shown = [i[2] for i in layout.walk() if i[0] == "prop"]
    assert shown == ["jawOpen", "mouthSmileLeft"] and "Face Expression" in layout.labels()
    for kb in me.shape_keys.key_blocks:
        kb.value = 0.0
    neutral = Layout()
    panel.draw_face(neutral, obj)
    assert "Neutral (3 ARKit keys)" in neutral.labels()
    bpy.data.objects.remove(obj)
    bpy.data.meshes.remove(me)


@pytest.mark.parametrize("name, kind, op", [("animate", "ANIMATE", "sapiens.animate"), ("scan", "SCAN", "sapiens.scan")])
def test_animate_and_scan_show_their_own_job_only(ui, name, kind, op):
    """Each sub-panel's button with its Cancel: idle, while its own job runs (its progress), and
    while another job runs (neither button, no progress)."""
    import importlib

    _, _, state = ui
    draw = getattr(importlib.import_module(f"sapiens_blender.ui.{name}"), f"draw_{name}")

    def drawn():
        layout = Layout()
        draw(layout, Context())
        return layout

    idle = drawn()
    assert idle.buttons() == {op: True, "sapiens.cancel": False}
    for job_kind, mine in ((getattr(state.JobKind, kind), True), (state.JobKind.ANALYZE, False)):
        gate, job = blocked_job(job_kind, state)
        try:
            d = drawn()
            assert d.buttons() == {op: False, "sapiens.cancel": mine}
            bars = [i for i in d.walk() if i[0] == "progress"]
            assert len(bars) == int(mine) and (not mine or bars[0][2] == pytest.approx(0.4))
        finally:
            job.cancel()
            gate.set()
            job.wait(5)
            state.SESSION.job = None
