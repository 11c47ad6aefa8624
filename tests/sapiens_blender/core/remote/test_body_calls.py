# SPDX-License-Identifier: GPL-3.0-or-later
"""Maps without a fit + a body build: the fit comes from the real server through the real client,
the template is cached in the user cache folder, the maps keep the fit for later builds."""

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

bpy = pytest.importorskip("bpy")

from sapiens_blender import api  # noqa: E402
from sapiens_blender.blender import mesh  # noqa: E402
from sapiens_blender.core.body import cache as body_cache, records as body_records  # noqa: E402
from sapiens_blender.core.geometry.types import camera_to_blender  # noqa: E402
from sapiens_blender.core.maps.canonical import Maps  # noqa: E402

pytestmark = [pytest.mark.bpy, pytest.mark.anny]


@pytest.mark.slow
def test_build_body_asks_the_server_for_the_fit_and_caches_the_template(body_scene, fit_server, tmp_path,
                                                                      monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    scene = body_scene("standing")
    bare = Maps.from_arrays({k: v for k, v in scene.maps.to_arrays().items() if not k.startswith(("body_", "fit_"))})
    api.new_scene()
    result = api.build_from_maps(bare, body="minimal", server=f"http://{fit_server.url}", token=fit_server.token)
    assert body_records.has_body(bare)  # the maps now carry the fit: a later build needs no server
    template, fit = body_records.body_from_maps(bare)
    assert body_cache.cache_path(template.body_version).is_file()
    assert body_cache.load_cached_template(template.body_version).num_bones == template.num_bones
    person = result.people[0]
    world = mesh.mesh_vertices(person.body_mesh, evaluated=True)
    assert np.abs(world - camera_to_blender(fit.vertices[0].astype(np.float64))).max() < 1e-4
    # The fit found the body that made the maps (joints within a few cm).
    names = list(template.joint_names)
    for joint in ("left_knee", "right_elbow", "left_shoulder"):
        got = fit.joints[0, names.index(joint)]
        truth = scene.fit.joints[0, list(scene.template.joint_names).index(joint)]
        assert np.linalg.norm(got - truth) < 0.08, joint
    saved = bare.save(tmp_path / "fitted.npz")
    api.new_scene()
    again = api.build_from_maps(saved, body="minimal")  # no server given, none needed
    assert again.people[0].body_mesh is not None
