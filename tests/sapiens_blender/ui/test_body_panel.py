# SPDX-License-Identifier: GPL-3.0-or-later
"""The panel's Body button and Build All on a stored analysis with (and without) a body fit."""

import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

bpy = pytest.importorskip("bpy")
import addon_utils  # noqa: E402  (ships with bpy)

from sapiens_blender.core.maps.canonical import Maps  # noqa: E402

pytestmark = [pytest.mark.bpy, pytest.mark.anny]


@pytest.fixture
def addon():
    bpy.ops.wm.read_factory_settings(use_empty=True)
    addon_utils.enable("sapiens_blender", default_set=True, handle_error=None)
    yield
    addon_utils.disable("sapiens_blender", default_set=True)


def ours(role):
    return [o for o in bpy.context.scene.objects if o.get("sapiens_role") == role]


def test_without_a_fit_build_all_builds_the_rest(addon, body_scene):
    from sapiens_blender.ui import panel, storage

    assert ("sapiens.build_body", "Body", "OUTLINER_OB_ARMATURE") in panel.BUILD_BUTTONS
    scene = body_scene("standing")
    bare = Maps.from_arrays({k: v for k, v in scene.maps.to_arrays().items() if not k.startswith(("body_", "fit_"))})
    storage.store_analysis(bpy.context.scene, bare)
    assert bpy.ops.sapiens.build_all() == {"FINISHED"} and not ours("body mesh") and ours("armature")


def test_body_button_builds_the_fitted_body_and_build_all_keeps_it(addon, body_scene):
    from sapiens_blender.ui import storage

    scene = body_scene("standing")
    storage.store_analysis(bpy.context.scene, scene.maps)
    assert bpy.ops.sapiens.build_body() == {"FINISHED"}
    (body,) = ours("body mesh")
    assert len(ours("body armature")) == 1 and body.get("sapiens_body") == "clothed"
    assert bpy.ops.sapiens.build_all() == {"FINISHED"}
    assert ours("body mesh") == [body] and len(ours("mesh")) == 1 and len(ours("armature")) == 1


def test_body_on_an_analysis_with_nobody_says_so_without_a_fit(addon):
    """An analysis that found nobody: Body reports it at once (no server started, no fit asked)."""
    import numpy as np

    from sapiens_blender.ui import state, storage
    from synthetic_scene import ellipsoid_maps

    arrays = ellipsoid_maps(32, 24).to_arrays()
    arrays["mask"] = np.zeros_like(arrays["mask"])
    storage.store_analysis(bpy.context.scene, Maps.from_arrays(arrays), photo="nobody.png")
    with pytest.raises(RuntimeError, match="no person found by synthetic-ellipsoid: nothing to build"):
        bpy.ops.sapiens.build_body()  # the operator's error report (background mode raises it)
    assert "no person found" in state.SESSION.last_error
    assert state.SESSION.server is None  # no server started for a fit
