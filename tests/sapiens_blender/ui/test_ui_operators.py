# SPDX-License-Identifier: GPL-3.0-or-later
"""The add-on's operators in EXEC mode against a real server subprocess serving a tiny numpy
backend (tiny_person_backend.py: two synthetic people), through the bpy module."""

import os
import signal
import sys
import threading
import time

import numpy as np
import pytest
from repo_paths import REPO, SUPPORT

bpy = pytest.importorskip("bpy")
import addon_utils  # noqa: E402  (ships with bpy)
from PIL import Image  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.bpy]


@pytest.fixture(scope="module")
def addon(tmp_path_factory):
    os.environ["SAPIENS_SERVER_PYTHONPATH"] = f"{REPO}{os.pathsep}{SUPPORT}"
    os.environ["TINY_PERSON_STAGE_SECONDS"] = "0.12"
    bpy.ops.wm.read_factory_settings(use_empty=True)
    addon_utils.enable("sapiens_blender", default_set=True, handle_error=None)
    from sapiens_blender.ui import jobs, preferences, state

    prefs = preferences.get_prefs()
    prefs.python_path = sys.executable
    prefs.model_family = "custom"
    prefs.custom_model = "tiny-person"
    prefs.extra_server_args = "--backend-module tiny_person_backend"
    photo = tmp_path_factory.mktemp("photo") / "two_people.png"
    rng = np.random.default_rng(0)
    Image.fromarray(rng.integers(0, 255, (72, 96, 3), dtype=np.uint8)).save(photo)
    bpy.context.scene.sapiens.photo_path = str(photo)
    yield {"prefs": preferences.get_prefs, "state": state, "jobs": jobs, "photo": photo}
    jobs.BLOCKING = None
    addon_utils.disable("sapiens_blender", default_set=True)
    os.environ.pop("SAPIENS_SERVER_PYTHONPATH", None)
    os.environ.pop("TINY_PERSON_STAGE_SECONDS", None)
    assert not hasattr(bpy.types, "SAPIENS_PT_main") and not hasattr(bpy.types.Scene, "sapiens")


@pytest.fixture
def analysed(addon):
    """The scene holds an analysis of the two-person photo and the server runs (whatever ran
    before, so each test also works alone with -k)."""
    from sapiens_blender.ui import storage

    state = addon["state"]
    scene = bpy.context.scene
    scene.sapiens.photo_source = "FILE"
    scene.sapiens.photo_path = str(addon["photo"])
    if not storage.has_analysis(scene) or state.SESSION.server_state() != "ready":
        assert bpy.ops.sapiens.analyze() == {"FINISHED"}, state.SESSION.last_error
    return addon


def call(op):
    """Run an operator; an ERROR report surfaces as RuntimeError in the bpy module."""
    try:
        return op()
    except RuntimeError as exc:
        return {"ERROR: " + str(exc)}


def test_analyze_stores_maps_and_shows_them_as_images(addon):
    state = addon["state"]
    assert bpy.ops.sapiens.analyze() == {"FINISHED"}, state.SESSION.last_error
    scene = bpy.context.scene
    props = scene.sapiens
    assert props.analysis is not None and state.SESSION.server_state() == "ready"
    for image in (props.parts_image, props.normal_image, props.depth_image):
        assert tuple(image.size) == (96, 72) and image.packed_file is not None
    parts = np.array(props.parts_image.pixels[:]).reshape(72, 96, 4)
    assert parts[..., :3].max() > 0 and parts[0, 0, :3].max() == 0  # people coloured, background black
    from sapiens_blender.ui import properties, storage

    assert storage.analysis_summary(scene)["people"] == [1, 2]
    items = [i[0] for i in properties._person_items(props, bpy.context)]
    assert items == ["ALL", "1", "2"]  # the person selector's choices
    assert "2 people found" in state.SESSION.last_info


def ours(role, person=None):
    """The scene's objects built from its current analysis (found by tags, as the buttons do)."""
    from sapiens_blender.blender import identity
    from sapiens_blender.ui import storage

    scene = bpy.context.scene
    key = identity.analysis_key(storage.load_analysis(scene))
    return [o for o in scene.objects if identity.is_tagged(o, key, role, person)]


def test_each_build_operator_creates_its_objects(analysed):
    """The buttons complete one set per person (reuse in detail: test_incremental_build.py)."""
    assert bpy.ops.sapiens.build_mesh() == {"FINISHED"}
    assert len(ours("camera")) == 1 and len(ours("mesh", 1)) == 1 and len(ours("mesh", 2)) == 1
    assert not ours("armature")

    assert bpy.ops.sapiens.build_normal_texture() == {"FINISHED"}
    tree = ours("mesh", 1)[0].data.materials[0].node_tree
    assert tree.nodes["Normal texture"].image.colorspace_settings.name == "Non-Color"
    assert next(n for n in tree.nodes if n.type == "NORMAL_MAP").space == "OBJECT"

    bpy.context.scene.sapiens.person = "2"  # the person selector: only person 2
    assert bpy.ops.sapiens.build_part_materials() == {"FINISHED"}
    person_2 = ours("mesh", 2)[0]
    assert len(person_2.data.materials) > 1 and len(person_2.vertex_groups) > 1
    assert len(ours("mesh", 1)[0].data.materials) == 1

    assert bpy.ops.sapiens.build_armature() == {"FINISHED"}
    (arm,) = ours("armature")
    assert len(arm.data.bones) > 10 and person_2.parent == arm

    bpy.context.scene.sapiens.person = "ALL"
    assert bpy.ops.sapiens.build_all() == {"FINISHED"}
    assert len(ours("armature")) == 2 and len(ours("mesh")) == 2 and len(ours("camera")) == 1


def test_free_memory_then_stop(analysed):
    state = analysed["state"]
    assert bpy.ops.sapiens.free_memory() == {"FINISHED"}
    assert "tiny-person" in state.SESSION.last_info
    assert bpy.ops.sapiens.server_stop() == {"FINISHED"}
    assert state.SESSION.server_state() == "stopped"
    assert not bpy.ops.sapiens.free_memory.poll()


def test_analysis_survives_save_and_reopen(analysed, tmp_path):
    addon = analysed
    addon["state"].SESSION.stop_server()
    path = tmp_path / "saved.blend"
    bpy.ops.wm.save_as_mainfile(filepath=str(path))
    bpy.ops.wm.read_homefile(use_empty=True)  # a new file; the add-on stays enabled
    assert bpy.context.scene.sapiens.analysis is None
    bpy.ops.wm.open_mainfile(filepath=str(path))
    scene = bpy.context.scene
    assert scene.sapiens.analysis is not None and scene.sapiens.parts_image.size[0] == 96
    assert addon["state"].SESSION.server_state() == "stopped"  # no server needed to rebuild
    assert bpy.ops.sapiens.build_mesh() == {"FINISHED"}
    assert sorted(o["sapiens_person"] for o in ours("mesh")) == [1, 2]  # built, or kept from before


def test_cancel_stops_a_running_analysis(addon):
    """The interactive path: the operator returns at once, Cancel is clicked, the job pumps."""
    state, jobs = addon["state"], addon["jobs"]
    jobs.BLOCKING = False
    try:
        bpy.context.scene.sapiens.photo_path = str(addon["photo"])
        start = time.monotonic()
        assert bpy.ops.sapiens.analyze() == {"FINISHED"}
        job = state.SESSION.job
        assert state.SESSION.panel_state() == state.BUSY
        while "infer" not in job.stage and time.monotonic() - start < 60:
            job.pump()
            time.sleep(0.02)
        assert "infer" in job.stage, job.message  # progress arrived while it ran
        assert bpy.ops.sapiens.cancel.poll() and bpy.ops.sapiens.cancel() == {"FINISHED"}
        assert job.wait(10)
        assert job.state == "cancelled" and not bpy.ops.sapiens.cancel.poll()
        # What the (never firing) timer does next: stop itself and report the outcome.
        assert jobs._tick(job) is None
        assert jobs.outcome(job) == ("WARNING", "Analysis was cancelled.")
        assert state.SESSION.panel_state() != state.BUSY
    finally:
        jobs.BLOCKING = None


def test_killed_server_gives_a_clear_message_and_restarts(addon):
    state = addon["state"]
    assert bpy.ops.sapiens.server_start() == {"FINISHED"}, state.SESSION.last_error
    first_pid = state.SESSION.server.pid

    def kill_when_inferring():
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            job = state.SESSION.job
            if job is not None and job.state == "running" and "infer" in job.stage:
                os.kill(first_pid, signal.SIGKILL)  # mid-inference (it takes ~0.5 s)
                return
            time.sleep(0.01)

    killer = threading.Thread(target=kill_when_inferring)
    killer.start()
    result = call(bpy.ops.sapiens.analyze)
    killer.join()
    assert list(result)[0].startswith("ERROR: ") and "server" in list(result)[0]
    message = state.SESSION.last_error.lower()
    assert "server" in message and ("stopped" in message or "closed" in message or "not running" in message), message
    assert bpy.ops.sapiens.analyze() == {"FINISHED"}, state.SESSION.last_error
    assert state.SESSION.server.pid != first_pid and not state.SESSION.last_error


def test_wrong_interpreter_gives_a_clear_message(addon):
    state, prefs = addon["state"], addon["prefs"]()
    good = prefs.python_path
    prefs.python_path = "/no/such/python3"
    try:
        assert "/no/such/python3" in list(call(bpy.ops.sapiens.analyze))[0]
        message = state.SESSION.last_error
        assert "/no/such/python3" in message and "preferences" in message, message
        assert state.SESSION.panel_state() == state.ERROR
        bpy.ops.sapiens.check_interpreter()
        assert "does not exist" in state.SESSION.check_result["message"]
    finally:
        prefs.python_path = good
        bpy.ops.sapiens.clear_error()
    state.SESSION.stop_server()


def test_remote_mode_uses_a_server_started_elsewhere(addon, tmp_path):
    from sapiens_blender.core.local_server.process import ServerProcess

    state, prefs = addon["state"], addon["prefs"]()
    remote = ServerProcess(sys.executable, ["--backend-module", "tiny_person_backend"], log_dir=tmp_path,
                           env={"PYTHONPATH": f"{REPO}{os.pathsep}{SUPPORT}"})
    client = remote.ensure_running()
    prefs.server_mode = "REMOTE"
    prefs.remote_url = client.base_url
    try:
        prefs.remote_token = "wrong"
        result = list(call(bpy.ops.sapiens.analyze))[0]
        assert result.startswith("ERROR: ") and "token" in result.lower(), result
        bpy.ops.sapiens.clear_error()
        prefs.remote_token = remote.token
        assert bpy.ops.sapiens.analyze() == {"FINISHED"}, state.SESSION.last_error
        assert state.SESSION.server is None or state.SESSION.server.pid is None  # nothing local started
        assert state.SESSION.server_state() == "ready"
    finally:
        prefs.server_mode = "LOCAL"
        state.SESSION.stop_server()
        remote.stop()


QUIT_SCRIPT = """
import os, sys, bpy, addon_utils
sys.path.insert(0, sys.argv[1])
addon_utils.enable("sapiens_blender", default_set=True, handle_error=None)
from sapiens_blender.ui import preferences, state
preferences.get_prefs().python_path = sys.executable
assert bpy.ops.sapiens.server_start() == {"FINISHED"}, state.SESSION.last_error
print("PID", state.SESSION.server.pid, flush=True)
# the script ends here without stopping anything: like quitting Blender
"""


def test_server_stops_when_blender_quits(tmp_path):
    import subprocess

    script = tmp_path / "quit.py"
    script.write_text(QUIT_SCRIPT)
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(tmp_path / "user"))
    proc = subprocess.run([sys.executable, str(script), str(REPO)], capture_output=True, text=True,
                          timeout=120, env=env, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    pid = int(proc.stdout.split("PID")[1].split()[0])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.1)
    os.kill(pid, signal.SIGKILL)
    pytest.fail(f"the server (pid {pid}) outlived Blender")


def test_analyze_an_image_already_in_the_blend(addon):
    """Photo source 'Image': a loaded file, then a generated image with no file at all."""
    state = addon["state"]
    props = bpy.context.scene.sapiens
    props.photo_source = "IMAGE"
    try:
        props.photo_image = bpy.data.images.load(str(addon["photo"]))
        assert bpy.ops.sapiens.analyze() == {"FINISHED"}, state.SESSION.last_error
        generated = bpy.data.images.new("painted", 40, 30)
        generated.pixels.foreach_set(np.full(40 * 30 * 4, 0.5, np.float32))
        props.photo_image = generated
        assert bpy.ops.sapiens.analyze() == {"FINISHED"}, state.SESSION.last_error
        assert tuple(props.parts_image.size) == (40, 30)  # the generated pixels were sent
        props.photo_image = None
        assert "Pick an image" in list(call(bpy.ops.sapiens.analyze))[0]
    finally:
        props.photo_source = "FILE"
        bpy.ops.sapiens.clear_error()
        state.SESSION.stop_server()


def test_environment_set_up_respects_online_access(addon):
    assert bpy.app.online_access is False  # the bpy module runs offline
    message = list(call(bpy.ops.sapiens.setup_environment))[0]
    assert "online access is off" in message and "Preferences > System > Network" in message
    assert addon["state"].SESSION.setup_job is None  # nothing was started


def test_check_interpreter_reports_torch(addon):
    state = addon["state"]
    assert bpy.ops.sapiens.check_interpreter() == {"FINISHED"}
    result = state.SESSION.check_result
    assert result["ok"] and result["torch"] and "CPU only" in result["message"]


def test_build_runs_in_steps_with_progress_and_cancel(analysed):
    """The interactive path of Build (timers never fire in the bpy module, so the test pumps):
    one step per pump, progress between steps, Cancel keeps what was built, and the next click
    completes it without duplicates."""
    state, jobs = analysed["state"], analysed["jobs"]
    for role in ("mesh", "armature"):
        for ob in ours(role):
            bpy.data.objects.remove(ob)
    jobs.BLOCKING = False
    try:
        assert bpy.ops.sapiens.build_all() == {"FINISHED"}
        job = state.SESSION.job
        assert not ours("mesh") and state.SESSION.panel_state() == state.BUSY  # returned at once
        seen = []
        while not job.finished and job.stage != "person 2: mesh":
            job.pump()
            seen.append((job.stage, job.fraction))
        stages = [s for s, _ in seen]
        assert stages[:6] == ["person 1: surface", "person 1: mesh", "person 1: normal texture",
                              "person 1: part materials", "person 1: armature", "person 1: skinning"]
        assert "person 1: skinning: bone heat" in stages  # skinning runs in steps of its own
        assert stages[-1] == "person 2: mesh" and "person 2: surface" in stages
        fractions = [f for _, f in seen]
        assert fractions == sorted(fractions) and 0 == fractions[0] < fractions[-1] < 1
        assert bpy.ops.sapiens.cancel() == {"FINISHED"}
        assert job.pump() and job.state == "cancelled"
        assert [o["sapiens_person"] for o in ours("mesh")] == [1] and len(ours("armature")) == 1
        assert jobs.outcome(job)[0] == "WARNING" and "kept" in state.SESSION.last_info
        assert max(seconds for _, seconds in job.step_seconds) < 5.0
    finally:
        jobs.BLOCKING = None
    assert bpy.ops.sapiens.build_all() == {"FINISHED"}  # blocking: completes what is missing
    assert sorted(o["sapiens_person"] for o in ours("mesh")) == [1, 2]
    assert sorted(o["sapiens_person"] for o in ours("armature")) == [1, 2]


def test_panel_build_settings_reach_the_mesh(analysed):
    for role in ("mesh", "armature"):
        for ob in ours(role):
            bpy.data.objects.remove(ob)
    props = bpy.context.scene.sapiens
    props.stride, props.shape = 3, "CLOSED"
    try:
        assert bpy.ops.sapiens.build_mesh() == {"FINISHED"}
        meshes = ours("mesh")
        assert meshes and all(m["sapiens_stride"] == 3 and m["sapiens_closed"] for m in meshes)
    finally:
        props.stride, props.shape = 1, "RELIEF"
        for ob in ours("mesh"):
            bpy.data.objects.remove(ob)
