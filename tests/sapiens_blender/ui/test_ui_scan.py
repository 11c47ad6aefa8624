# SPDX-License-Identifier: GPL-3.0-or-later
"""The panel's Scan (360°): a folder of maps of a turning body through the add-on's own server
becomes one rigged, textured body carrying its unseen mask; progress per stage; Cancel stops it."""

import time

import pytest

bpy = pytest.importorskip("bpy")
pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

from test_ui_operators import addon  # noqa: E402,F401  (the enabled add-on, shared fixture)

pytestmark = [pytest.mark.slow, pytest.mark.bpy, pytest.mark.anny]


@pytest.fixture
def maps_folder(addon, scan_case, tmp_path):  # noqa: F811
    for i, maps in enumerate(scan_case().views):
        maps.save(tmp_path / f"view{i:02d}.npz")
    props = bpy.context.scene.sapiens_scan
    props.source, props.folder, props.stride, props.max_views = "MAPS", str(tmp_path), 1, 4
    yield addon


def test_scan_a_folder_of_maps(maps_folder):
    state = maps_folder["state"]
    assert bpy.ops.sapiens.scan() == {"FINISHED"}, state.SESSION.last_error
    assert state.SESSION.last_info.startswith("Scanned "), state.SESSION.last_info
    assert "one body from 4 views" in state.SESSION.last_info
    body = next(o for o in bpy.context.scene.objects if o.type == "MESH" and "sapiens_unseen" in o.data.attributes)
    arm = body.find_armature()
    assert arm is not None and len(arm.data.bones) == 104 and len(body.data.vertices) == 13718
    assert any(i.name.endswith("unseen texels") for i in bpy.data.images)


def test_cancel_stops_the_scan(maps_folder):
    state, jobs = maps_folder["state"], maps_folder["jobs"]
    jobs.BLOCKING = False
    try:
        assert bpy.ops.sapiens.scan() == {"FINISHED"}
        job = state.SESSION.job
        start = time.monotonic()
        while job.stage != "fit" and not job.finished and time.monotonic() - start < 120:
            job.pump()
            time.sleep(0.02)
        assert job.stage == "fit", job.stage  # the fit's progress arrived
        assert bpy.ops.sapiens.cancel() == {"FINISHED"}
        assert job.wait(60)
        assert job.state == "cancelled"
    finally:
        jobs.BLOCKING = None
