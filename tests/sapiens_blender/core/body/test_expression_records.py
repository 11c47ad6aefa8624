# SPDX-License-Identifier: GPL-3.0-or-later
"""The template's ARKit expressions: they round-trip through a maps .npz and the cache, older
files without them still load, malformed ones are refused, and the shape-key positions are the
bind pose plus each expression's offsets."""

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

from sapiens_blender.core.body import expressions as body_expressions  # noqa: E402
from sapiens_blender.core.body import records as body_records  # noqa: E402
from sapiens_blender.core.body.expression_fit import photo_expression  # noqa: E402
from sapiens_blender.core.body.records import BodyError, BodyFit, BodyTemplate  # noqa: E402
from sapiens_blender.core.maps.canonical import Maps  # noqa: E402

pytestmark = [pytest.mark.anny]


def test_the_template_carries_the_52_arkit_expressions_on_the_face(body_scene):
    t = body_scene("standing").template
    assert t.expression_names == body_expressions.ARKIT_NAMES
    face = t.vertex_parts[t.expression_vertices] == t.part_names.index("Face_Neck")
    assert face.mean() > 0.95 and 3000 < len(t.expression_vertices) < 4000  # the head (a few neck vertices)
    jaw = t.expression_deltas[t.expression_names.index("jawOpen")]
    assert 0.01 < -jaw[:, 2].min() < 0.05, "jawOpen lowers the chin by centimetres (model frame: Z up)"
    # Left is the person's left (+X in the model frame), as ARKit's: the lid closes by a centimetre.
    rest_x = body_scene("standing").fit.rest_vertices[0, t.expression_vertices, 0]
    for name, side in (("eyeBlinkLeft", 1), ("eyeBlinkRight", -1), ("mouthSmileLeft", 1)):
        moved = np.linalg.norm(t.expression_deltas[t.expression_names.index(name)], axis=1)
        assert side * (moved * rest_x).sum() / moved.sum() > 0.015, name
    blink = t.expression_deltas[t.expression_names.index("eyeBlinkLeft")]
    assert 0.008 < -blink[:, 2].min() < 0.02


def test_expressions_round_trip_and_older_files_load_without_them(body_scene, tmp_path):
    scene = body_scene("standing")
    values = np.zeros((1, 52), np.float32)
    values[0, 24] = 0.7
    fit = BodyFit.from_arrays(dict(scene.fit.to_arrays(), expressions=values), template=scene.template)
    maps = Maps.load(scene.maps.save(tmp_path / "a.npz"))
    body_records.attach_body(maps, scene.template, fit)
    template, back = body_records.body_from_maps(Maps.load(maps.save(tmp_path / "b.npz")))
    assert template.expression_names == scene.template.expression_names
    assert np.array_equal(template.expression_vertices, scene.template.expression_vertices)
    assert np.array_equal(template.expression_deltas, scene.template.expression_deltas)
    assert np.array_equal(back.expressions, values)
    values, source = photo_expression(template, back, 0, maps, 1)
    assert values[24] == pytest.approx(0.7) and source == "the fit's expression values"
    # A template and a fit from before the expressions: no keys, zero values, no error.
    old_t = {k: v for k, v in scene.template.to_arrays().items() if not k.startswith("expression")}
    old = BodyTemplate.from_arrays(old_t)
    assert not body_expressions.has_expressions(old) and old.expression_deltas is None
    old_fit = BodyFit.from_arrays({k: v for k, v in scene.fit.to_arrays().items() if k != "expressions"}, template=old)
    assert old_fit.expressions.shape == (1, 0)
    assert not body_expressions.has_expressions(BodyTemplate.from_arrays(old.to_arrays()))


def test_malformed_expressions_are_refused(body_scene):
    scene = body_scene("standing")
    t = scene.template.to_arrays()
    with pytest.raises(BodyError, match="expression_deltas must be"):
        BodyTemplate.from_arrays(dict(t, expression_deltas=t["expression_deltas"][:, :10]))
    with pytest.raises(BodyError, match="index outside"):
        BodyTemplate.from_arrays(dict(t, expression_vertices=t["expression_vertices"] + 20000))
    with pytest.raises(BodyError, match="finite offsets"):
        BodyTemplate.from_arrays(dict(t, expression_deltas=t["expression_deltas"] * 100))
    with pytest.raises(BodyError, match="one vertex per face_landmark_names"):
        BodyTemplate.from_arrays(dict(t, face_landmark_vertices=t["face_landmark_vertices"][:-1]))
    with pytest.raises(BodyError, match="one vertex per face_landmark_names"):
        BodyTemplate.from_arrays(dict(t, face_landmark_vertices=t["face_landmark_vertices"] + 20000))
    with pytest.raises(BodyError, match="without expression_vertices"):
        BodyTemplate.from_arrays({k: v for k, v in t.items() if k != "expression_deltas"})
    with pytest.raises(BodyError, match="expression values"):
        BodyFit.from_arrays(dict(scene.fit.to_arrays(), expressions=np.zeros((1, 5), np.float32)),
                            template=scene.template)


def test_key_positions_are_the_bind_pose_plus_each_offset(body_scene):
    scene = body_scene("standing")
    t, rest = scene.template, scene.fit.rest_vertices[0]
    keys = body_expressions.key_positions(t, rest)
    assert keys.shape == (52,) + rest.shape
    off_face = np.setdiff1d(np.arange(len(rest)), t.expression_vertices)
    assert np.array_equal(keys[:, off_face], np.broadcast_to(rest[off_face], (52, len(off_face), 3)))
    k = t.expression_names.index("mouthSmileRight")
    assert np.allclose(keys[k, t.expression_vertices] - rest[t.expression_vertices], t.expression_deltas[k], atol=1e-6)
