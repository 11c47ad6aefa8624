# SPDX-License-Identifier: GPL-3.0-or-later
"""The fitted body's records: template and fit round-trip through a maps .npz, malformed data gets
clear errors.

On bodies made by the fit's own body model (tests/support/body_scenes.py).
"""

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

from sapiens_blender.core.body import records as body_records
from sapiens_blender.core.body.records import BodyError, BodyFit, BodyTemplate
from sapiens_blender.core.maps.canonical import Maps

pytestmark = [pytest.mark.anny]


def test_template_and_fit_round_trip_through_a_maps_npz(body_scene, tmp_path):
    scene = body_scene("two")
    path = scene.maps.save(tmp_path / "two.npz")
    template, fit = body_records.body_from_maps(Maps.load(path))
    assert template.body_version == scene.template.body_version and template.bone_names == scene.template.bone_names
    for name in ("faces", "uv", "face_uv", "weight_bones", "weight_values", "vertex_parts"):
        assert np.array_equal(getattr(template, name), getattr(scene.template, name)), name
    for name in ("person_ids", "rest_bone_matrices", "bone_matrices", "placement", "vertices", "joints"):
        assert np.array_equal(getattr(fit, name), getattr(scene.fit, name)), name
    assert fit.report(2) == {"scene": "two"}
    assert "body_version" in np.load(path).files and "fit_body_version" in np.load(path).files


def test_malformed_fits_get_clear_errors(body_scene):
    scene = body_scene("standing")
    arrays = scene.fit.to_arrays()
    bad = dict(arrays, vertices=arrays["vertices"][:, :100])
    with pytest.raises(BodyError, match="vertices must have shape"):
        BodyFit.from_arrays(bad)
    with pytest.raises(BodyError, match="made for body model"):
        BodyFit.from_arrays(dict(arrays, body_version=np.array("other/1")), template=scene.template)
    with pytest.raises(BodyError, match="missing: rest_vertices"):
        BodyFit.from_arrays({k: v for k, v in arrays.items() if k != "rest_vertices"})
    t = scene.template.to_arrays()
    with pytest.raises(BodyError, match="parent must come before"):
        BodyTemplate.from_arrays(dict(t, bone_parents=np.roll(t["bone_parents"], 1)))
    with pytest.raises(BodyError, match="no person 7"):
        scene.fit.index(7)
