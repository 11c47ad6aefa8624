# SPDX-License-Identifier: GPL-3.0-or-later
"""What the fit reads off the maps (the pixels the body must cover) and where it starts from."""

import numpy as np
import pytest
from scipy import ndimage

from inference_server.fit.observations import _cover_pixels

pytestmark = [pytest.mark.torch, pytest.mark.anny]


def test_cover_pixels_are_mostly_on_the_outline_and_inside_the_person():
    mine = np.zeros((200, 120), bool)
    mine[20:190, 40:80] = True  # a tall figure
    mine[60:70, 10:110] = True  # with its arms out
    rr, cc = _cover_pixels(mine, 300)
    assert 250 <= len(rr) <= 300 and mine[rr, cc].all()
    outline = mine & ~ndimage.binary_erosion(mine)
    on = outline[rr, cc]
    assert 0.6 <= on.mean() <= 0.75  # two thirds measure the extent; the rest the inside
    # The extremes are among them: the top of the head, the soles, the finger tips.
    assert rr.min() == 20 and rr.max() == 189 and cc.min() == 10 and cc.max() == 109
    # Deterministic, and a small person gives what it has.
    assert np.array_equal(_cover_pixels(mine, 300)[0], rr)
    tiny = np.zeros((10, 10), bool)
    tiny[4:6, 4:6] = True
    assert len(_cover_pixels(tiny, 300)[0]) == 4


def test_the_limb_start_places_a_joint_over_a_hole_in_the_depth_by_its_part(body):
    """Seed 4 of the noisy scene: a hole in the depth covers the left ankle. Of the two points on
    its ray at the shin's length, the start took the one nearer the leg's current (straight)
    depth, 39 cm in front of the truth; the shin's own seen depth picks the right one."""
    import gt_cases
    import scene_variants
    import torch

    from inference_server.fit.correspondences import JOINT_NAMES
    from inference_server.fit.observations import observe
    from inference_server.fit.problem import PersonProblem
    from inference_server.fit.solver import BodyFitter

    maps, bodies = gt_cases._one("arms_raised", "average", -15.0)
    maps = scene_variants.degrade(maps, keypoint_px=3.0, depth_m=0.01, holes=3, seed=4)
    obs = observe(1, mask=maps.mask, parts=maps.parts, part_names_in=maps.part_names,
                  intrinsics=maps.intrinsics, keypoints=maps.keypoints, depth=maps.depth,
                  pointmap=maps.pointmap, metric=maps.metric)
    ankle = JOINT_NAMES.index("left_ankle")
    assert np.isnan(obs.lifted[ankle]) and obs.weights[ankle] > 0  # seen, but no depth there
    prob = PersonProblem(BodyFitter(body), obs)
    prob.init_closed_form()
    with torch.no_grad():
        joints = prob.to_camera(body.skeleton(prob.phenotypes(), prob.rotvecs()).joints[0]).double().numpy()
    assert np.linalg.norm(joints[ankle] - bodies[0].joints["left_ankle"]) < 0.05


def test_a_hips_lifted_depth_is_one_sided_with_metric_depth():
    """Sitting, the pixels over the hips show the thighs, centimetres in front of the hip joints:
    with metric depth the lift only says the hip is behind them; relative depth keeps the hips
    two-sided (its depth scale needs them), and the other joints keep theirs."""
    import scene_variants

    import gt_cases

    from inference_server.fit.correspondences import JOINT_NAMES

    maps, bodies = gt_cases._one("sitting", "average", 20.0)
    metric = gt_cases.observations(maps)[0]
    relative = gt_cases.observations(scene_variants.relative_depth(maps))[0]
    hips = [JOINT_NAMES.index(n) for n in ("left_hip", "right_hip")]
    knees = [JOINT_NAMES.index(n) for n in ("left_knee", "right_knee")]
    assert np.isfinite(metric.lifted[hips]).all() and not metric.lifted_two_sided[hips].any()
    assert relative.lifted_two_sided[hips].all()
    assert metric.lifted_two_sided[knees].all() and relative.lifted_two_sided[knees].all()
    # what made two-sided hips wrong: the surface seen over them lies well in front of them
    gap = np.array([bodies[0].joints[JOINT_NAMES[j]][2] for j in hips]) - metric.lifted[hips]
    assert gap.max() > 0.15
