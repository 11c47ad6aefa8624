# SPDX-License-Identifier: GPL-3.0-or-later
"""The scan's surface (core/body/scan.py) on ground truth: a dressed body whose colours differ
front, sides and back, turning in 6 views (tests/support/scan_scenes.py), each view's true
posed body given (the fit is tested in tests/inference_server/fit/test_scan.py)."""

import copy

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

from sapiens_blender.core.body import scan as sc  # noqa: E402
from sapiens_blender.core.body import surface as bs, texture as bt  # noqa: E402
from sapiens_blender.core.body.scan_views import ScanError, select_views  # noqa: E402

pytestmark = [pytest.mark.anny]


@pytest.fixture(scope="module")
def setup(scan_case, body):
    from sapiens_blender.core.body.records import BodyTemplate

    case = scan_case()
    template = BodyTemplate.from_arrays(body.template())
    views = [sc.ScanView(m, 1, b.vertices) for m, b in zip(case.views, case.bodies)]
    return case, template, views


def _scores(case, template, texture):
    import scan_scoring

    truth = case.bodies[0]
    return scan_scoring.score_views(truth.vertices, truth.faces, case.colours, truth.vertices, template.faces,
                                    template.uv, template.face_uv, texture,
                                    viewpoints=((30.0, 0.0), (180.0, 0.0), (120.0, 30.0)))


def test_fused_texture_shows_the_back_and_sides_the_first_view_never_saw(setup):
    case, t, views = setup
    parts = bs.face_parts(t.faces, t.vertex_parts)
    texture, unseen, report = sc.fuse_texture(views, t.faces, t.uv, t.face_uv, parts, size=256)
    single, _ = bt.bake_texture(case.views[0], 1, views[0].vertices, t.faces, t.uv, t.face_uv, parts, size=256)
    fused, alone = _scores(case, t, texture), _scores(case, t, single)
    back = (180.0, 0.0)
    assert fused[back]["colour"] < 15.0 and alone[back]["colour"] > 30.0, (fused, alone)
    assert np.mean([s["colour"] for s in fused.values()]) < 15.0, fused
    # The mask marks exactly the texels no view saw: a few (soles, armpits), not the back.
    assert 0.0 < report["unseen_share"] < 0.15
    assert unseen.dtype == np.uint8 and set(np.unique(unseen)) <= {0, 255}
    assert report["mean_views_per_seen_texel"] > 1.5


def test_each_views_exposure_is_evened_out(setup):
    case, t, views = setup
    _tex, _unseen, report = sc.fuse_texture(views, t.faces, t.uv, t.face_uv, size=256)
    gains = np.asarray(report["gains"])
    # Each view's colours are scaled back towards the first view's exposure (gain x applied ~ 1):
    # what is left is under 60 % of what was applied (the light rides on the camera, so the
    # views' shading differs too, which no gain can remove).
    left, applied = np.abs(gains * case.gains - 1.0), np.abs(case.gains - 1.0)
    assert left.mean() < 0.6 * applied.mean() and left.max() < 0.1, (left, applied)


def test_a_view_that_fits_badly_weighs_less():
    q = sc.fit_quality([0.003, 0.0032, 0.012, None, 0.0028])
    assert q[0] == q[1] == q[3] == q[4] == 1.0 and q[2] < 0.2


def test_clothed_layer_from_every_view(setup):
    case, t, views = setup
    worn, seen = sc.scan_dressing(views, t.faces, t.vertex_parts)
    # The views' bodies are the dressed truth itself: the measured layer over them is ~0, and
    # the views together see most vertices (not the soles, between the fingers), one alone under half.
    one, seen_one = sc.scan_dressing(views[:1], t.faces, t.vertex_parts)
    assert seen.mean() > 0.75 and seen_one.mean() < 0.5, (seen.mean(), seen_one.mean())
    assert np.median(worn.thickness[seen]) < 0.004


def test_views_that_add_nothing_are_skipped_and_said_why(setup):
    case, _t, _views = setup
    v = case.views
    repeat = copy.deepcopy(v[0])
    blurred = copy.deepcopy(v[1])
    img = blurred.image.astype(np.float32)
    for _ in range(3):  # a box blur: the detail inside the person goes
        img = (img + np.roll(img, 1, 0) + np.roll(img, -1, 0) + np.roll(img, 1, 1) + np.roll(img, -1, 1)) / 5
    blurred.image = img.astype(np.uint8)
    cut = copy.deepcopy(v[2])
    half = cut.width // 2
    cut.mask[:, :half] = 0
    cut.keypoints[0, :, 0] -= half  # the person moved half out of the left edge
    sel = select_views([v[0], repeat, blurred, cut, v[3], v[4]])
    assert sel.kept == [0, 4, 5]
    assert "repeats" in sel.skipped[1] and "blurred" in sel.skipped[2] and "out of frame" in sel.skipped[3]
    assert select_views(v, max_views=3).kept == [0, 2, 5]  # evenly spaced
    with pytest.raises(ScanError, match="at least 2 usable views"):
        select_views([v[0], repeat])


def test_clothed_layer_averages_the_fits_part_thickness(setup):
    case, t, views = setup
    worn, seen = sc.scan_dressing(views, t.faces, t.vertex_parts)
    n = len(views[0].vertices)
    # The views' bodies are the dressed truth: they measure ~0; the fit's 1 cm halves to ~5 mm.
    both, _ = sc.scan_dressing(views, t.faces, t.vertex_parts, part_thickness=np.full(n, 0.01))
    dressed = seen & (worn.dressed > 0.5)
    assert dressed.sum() > 1000 and np.median(worn.thickness[dressed]) < 0.004
    np.testing.assert_allclose(np.median(both.thickness[dressed]), 0.005 + 0.5 * np.median(worn.thickness[dressed]),
                               atol=0.001)
    # No part thickness from the fit (0 everywhere): the views' measure alone.
    alone, _ = sc.scan_dressing(views, t.faces, t.vertex_parts, part_thickness=np.zeros(n))
    np.testing.assert_array_equal(alone.thickness, worn.thickness)


def test_fitted_thickness_per_vertex_from_the_fits_report(setup):
    _case, t, _views = setup

    class Fit:
        person_ids = np.array([1])

        def __init__(self, report):
            self._report = report

        def report(self, pid):
            return self._report
    assert sc.fitted_thickness(t, Fit({})) is None
    per_vertex = sc.fitted_thickness(t, Fit({"clothing_thickness_m": {"Torso": 0.015, "Left_Upper_Leg": 0.02}}))
    names = [str(n) for n in t.part_names]
    parts = np.asarray(t.vertex_parts)
    assert np.all(per_vertex[parts == names.index("Torso")] == 0.015)
    assert np.all(per_vertex[parts == names.index("Left_Upper_Leg")] == 0.02)
    assert np.all(per_vertex[parts == names.index("Left_Hand")] == 0.0)
