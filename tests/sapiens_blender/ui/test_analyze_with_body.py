# SPDX-License-Identifier: GPL-3.0-or-later
"""The panel's Analyze with the shape "Body": the server the add-on starts fits the body in the
same request (the maps never go back up), so Build Body builds from the stored analysis at once."""

import os
import sys

import numpy as np
import pytest
from PIL import Image
from repo_paths import REPO, SUPPORT

pytest.importorskip("anny", reason="anny is needed for the body model")
bpy = pytest.importorskip("bpy")
import addon_utils  # noqa: E402  (ships with bpy)

from sapiens_blender.core.body.records import has_body  # noqa: E402

pytestmark = [pytest.mark.slow, pytest.mark.bpy, pytest.mark.anny, pytest.mark.torch]


@pytest.fixture
def addon(body_model_scene, tmp_path, monkeypatch):
    maps_file = body_model_scene.maps.save(tmp_path / "scene.npz")
    monkeypatch.setenv("SAPIENS_SERVER_PYTHONPATH", f"{REPO}{os.pathsep}{SUPPORT}")
    monkeypatch.setenv("SAVED_MAPS_FILE", str(maps_file))  # the backend answers these maps
    bpy.ops.wm.read_factory_settings(use_empty=True)
    addon_utils.enable("sapiens_blender", default_set=True, handle_error=None)
    from sapiens_blender.ui import preferences, state

    prefs = preferences.get_prefs()
    prefs.python_path = sys.executable
    prefs.model_family = "custom"
    prefs.custom_model = "saved-maps"
    prefs.extra_server_args = "--backend-module saved_maps_backend"
    photo = tmp_path / "photo.png"
    Image.fromarray(np.zeros((120, 160, 3), np.uint8)).save(photo)
    props = bpy.context.scene.sapiens
    props.photo_source, props.photo_path = "FILE", str(photo)
    yield state
    state.SESSION.stop_server()
    addon_utils.disable("sapiens_blender", default_set=True)


def test_analyze_with_the_body_shape_fits_in_the_same_request(addon):
    from sapiens_blender.core.remote.client import V2Client
    from sapiens_blender.ui import storage

    sent = []
    real = V2Client._exchange

    def exchange(self, conn, method, url, chunks, headers, timeout):
        sent.append((url, sum(len(c) for c in chunks or ())))
        return real(self, conn, method, url, chunks, headers, timeout)

    scene = bpy.context.scene
    scene.sapiens.shape = "BODY"
    V2Client._exchange = exchange
    try:
        assert bpy.ops.sapiens.analyze() == {"FINISHED"}, addon.SESSION.last_error
    finally:
        V2Client._exchange = real
    stored = storage.load_analysis(scene)
    assert has_body(stored) and "bodies fitted" in addon.SESSION.last_info
    assert not any("body_fit" in url for url, _ in sent)  # no second trip with the maps
    assert max(n for _, n in sent) < 50_000  # only the photo went up
    assert bpy.ops.sapiens.build_body() == {"FINISHED"}, addon.SESSION.last_error
    assert any(o.get("sapiens_role") == "body mesh" for o in scene.objects)
