# SPDX-License-Identifier: GPL-3.0-or-later
"""The body fit against ray-cast anny bodies whose answer is known (tests/support/gt_cases.py).

The thresholds are what the fit reaches today with a margin; where that is short of the issue's
targets, docs/body_fit.md says so with the measured figures (benchmarks/bench_fit.py --quality).
Distances are to the fitted *surface* (not its vertices) and include the side the camera
does not see.
"""

import json

import numpy as np
import pytest

import gt_cases

pytestmark = [pytest.mark.slow, pytest.mark.groundtruth, pytest.mark.torch, pytest.mark.anny]

# case: (hidden cm, Chamfer %, joints mean cm, joints max cm, |height error| cm). Measured
# (bench_fit.py --quality): about half of each limit; the height limit is the 2 cm.
LIMITS = {
    "clean": (0.5, 0.3, 1.0, 2.0, 2.0),
    "turned_stepping_heavy": (1.0, 0.5, 1.2, 2.5, 2.0),
    "across_slim": (0.9, 0.7, 1.3, 2.5, 2.0),
    # With the hand keypoints: a forearm turned 90 degrees was fitted with its hand upside down
    # (4.1 cm joints max, finger joints 15 cm off) until the start turned it (init_hands).
    "hands_across": (1.2, 0.6, 1.3, 2.5, 2.0),
    # Straight elbows: one hinge limit for knees and elbows (-0.15 rad) held them bent ~30
    # degrees (anny's rest arm is bent): wrist 4.9 cm off, until each hinge had its own
    # (inference_server/fit/limits.py).
    "straight_arms": (0.5, 0.3, 1.0, 2.0, 2.0),
    # Sitting: the pixels over the hips show the thighs, 7-20 cm in front of the hip joints; as
    # a two-sided depth that made the body 5.4 cm short (hips 3 cm off); one-sided 2.3-2.6 cm,
    # the size the keypoints left open kept through the surface stage; 1.6 with the shape free
    # there (docs/body_fit.md).
    # L-BFGS moving the translation in 20 cm units (FitSettings.translation_unit): -0.8 cm, joints
    # max 1.0 (-1.66 and 1.89 in metres); held to 1.5 cm, under the 2.
    "sitting": (0.5, 0.4, 1.0, 1.5, 1.5),
    # 2.2 m: the tallest start size is anny's height 1, whose logit was infinite (a NaN fit).
    "very_tall": (1.0, 0.5, 1.6, 3.0, 2.0),
    "child": (0.5, 0.4, 1.1, 2.5, 2.0),
    "dressed": (0.9, 0.5, 1.6, 3.0, 2.0),
    "dressed_child": (0.6, 0.6, 1.4, 2.5, 2.0),
    "noisy": (0.8, 0.5, 1.6, 3.5, 2.0),
    # The limb start once folded this arm 25 cm off (its elbow's ray meets the bone's reach
    # almost tangentially): 7.3 cm joints max, now 1.1.
    "noisy_far_elbow": (0.8, 0.5, 1.6, 3.0, 2.0),
    "two_people": (0.9, 0.7, 1.3, 2.5, 2.0),
    # Its elbow's fold is a guess (no depth there) and the start's guess put it 18 cm in front
    # of the body: 20 cm joints max until the other fold was tried too; now 5.2 (the elbow,
    # 5 cm in front, its keypoint 5 px off: short of the 4 cm, docs/body_fit.md; 4.8 since
    # the translation moves in 20 cm units, 4.2 with the surface rounds' curvature history kept;
    # the same code reads 0.1-0.2 cm apart on different CPUs, hence 5.5).
    "elbow_over_hole": (0.9, 0.5, 2.0, 5.5, 2.0),
}


@pytest.fixture(scope="module")
def results(body):
    out = {}
    for name in gt_cases.CASES:
        fit, maps, bodies, seconds = gt_cases.fit_case(body, name)
        out[name] = (fit, maps, bodies, gt_cases.score_case(body, fit, bodies, name))
    return out


@pytest.mark.parametrize("name", sorted(LIMITS))
def test_metric_cases_recover_the_whole_body(results, name):
    hidden, chamfer, jmean, jmax, height = LIMITS[name]
    fit, _maps, bodies, rows = results[name]
    assert len(rows) == len(bodies) and fit["person_ids"].tolist() == list(range(1, len(bodies) + 1))
    for r in rows:
        assert r["hidden_cm"] <= hidden, r
        assert r["chamfer_pct"] <= chamfer, r
        assert r["joint_mean_cm"] <= jmean and r["joint_max_cm"] <= jmax, r
        assert abs(r["height_err_cm"]) <= height, r
        assert r["rest_asym_cm"] <= 1.0, r  # the rest pose is mirror-symmetric
    for report in fit["reports"]:
        rep = json.loads(str(report))
        assert rep["depth"] == "metric" and rep["reprojection_px"] < 4.5


def test_a_missing_wrist_is_estimated_and_flagged(results):
    from inference_server.fit.correspondences import JOINT_NAMES

    fit, _maps, _bodies, rows = results["missing_wrist"]
    estimated = dict(zip(JOINT_NAMES, fit["joints_estimated"][0]))
    assert estimated["left_wrist"] and not estimated["right_wrist"]
    # placed by its forearm's and hand's segmentation and surface (was ~20 cm off)
    assert rows[0]["hidden_cm"] <= 0.5 and rows[0]["joint_max_cm"] <= 3.0, rows[0]
    assert abs(rows[0]["height_err_cm"]) <= 2.0, rows[0]


def test_a_guessed_limb_fold_is_tried_both_ways(results):
    """Over a hole in the depth, two points of the elbow's ray fit its keypoint: the start
    guesses one, the solver tries the other too and keeps the one the surface agrees with."""
    fit, _maps, _bodies, rows = results["elbow_over_hole"]
    folds = json.loads(str(fit["reports"][0]))["limb_folds"]
    assert folds == {"guessed": ["right_elbow"], "flipped": ["right_elbow"]}, folds
    assert "limb_folds" not in json.loads(str(results["clean"][0]["reports"][0]))  # nothing to guess


def test_hand_keypoints_turn_the_forearm_and_place_the_fingers(results):
    """A hand across the belly, its forearm turned 90 degrees: the finger keypoints decide the
    turn (the twist prior is light for a seen hand) and the fingers land on their joints."""
    from inference_server.fit.correspondences import JOINT_NAMES, is_finger
    from sapiens_blender.core.maps.goliath import KEYPOINT_INDEX

    fit, maps, bodies, _rows = results["hands_across"]
    fingers = [n for n in JOINT_NAMES if is_finger(n)]
    assert (maps.keypoints[0, [KEYPOINT_INDEX[n] for n in fingers], 2] > 0.5).sum() >= 30
    err = np.array([np.linalg.norm(fit["joints"][0][JOINT_NAMES.index(n)] - bodies[0].joints[n]) for n in fingers])
    assert err.mean() <= 0.015 and err.max() <= 0.045, (err.mean(), err.max())  # 0.7 / 2.5 cm (was 3.5 / 15)


def test_a_half_body_portrait_gets_neutral_standing_legs(results, body):
    fit, maps, _bodies, rows = results["half_body"]
    assert rows[0]["hidden_cm"] <= 0.5 and rows[0]["joint_mean_cm"] <= 1.0, rows[0]  # the upper body
    assert abs(rows[0]["height_err_cm"]) <= 2.0, rows[0]
    # The legs the photo does not show stand straight under the hips (rest pose), not noise.
    # The crop shows the top of the thighs, and the true left thigh steps 30 degrees forward:
    # the fitted one may turn towards it (6 degrees with the lifted depths at 0.5, 8 at 0.25,
    # its knee 13.6 -> 12.3 cm from the truth), the unseen shins not at all.
    m = fit["bone_matrices"][0]
    rest = fit["rest_bone_matrices"][0]
    for bone, most in (("upperleg01.L", 12.0), ("upperleg01.R", 8.0), ("lowerleg01.L", 8.0), ("lowerleg01.R", 8.0)):
        b = body.bone_index[bone]
        p = body.parents[b]
        local = np.linalg.inv(np.linalg.inv(rest[p]) @ rest[b]) @ np.linalg.inv(m[p]) @ m[b]
        angle = np.degrees(np.arccos(np.clip((np.trace(local[:3, :3]) - 1) / 2, -1, 1)))
        assert angle < most, (bone, angle)
    estimated = dict(zip([str(n) for n in body.template()["joint_names"]], fit["joints_estimated"][0]))
    assert estimated["left_ankle"] and estimated["right_knee"]


def test_a_bust_portrait_stands_upright_under_its_shoulders(results):
    """Only the head, shoulders and raised arms show. A rigid start on all of them tilted the
    body 20-40 degrees towards the camera, which the fit did not come back from (hips 17-35 cm,
    ankles 60-90 cm off); the start now stands it upright on its shoulders."""
    from inference_server.fit.correspondences import JOINT_NAMES

    fit, _maps, bodies, rows = results["portrait"]
    assert rows[0]["hidden_cm"] <= 0.5 and rows[0]["joint_mean_cm"] <= 1.0, rows[0]  # 0.11, 0.30
    truth = bodies[0].joints
    got = dict(zip(JOINT_NAMES, fit["joints"][0]))
    off = {n: 100 * float(np.linalg.norm(got[n] - truth[n])) for n in ("left_hip", "right_hip", "left_ankle", "right_ankle")}
    assert max(off["left_hip"], off["right_hip"]) <= 4.0, off  # 1.3 cm
    assert max(off["left_ankle"], off["right_ankle"]) <= 10.0, off  # 5 cm: the legs, unseen, stand
    # Nothing measures the legs' length: anny's for the upper body's size (1.9 cm short here).
    assert abs(rows[0]["height_err_cm"]) <= 4.0, rows[0]


def test_a_bust_portrait_without_depth_is_placed_by_its_head_and_shoulders(body, results):
    """No depth to put the shoulders at: the distance the head and shoulders imply (the raised
    arms, spread wider than the rest body's, put it 15 cm off; the rigid start on every keypoint
    had the hidden side 9 cm off)."""
    import scene_variants
    from inference_server.fit.correspondences import JOINT_NAMES

    _fit, maps, bodies, _rows = results["portrait"]
    fit, _maps, _bodies, _s = gt_cases.fit_case(body, "portrait", given=(scene_variants.without_depth(maps), bodies))
    row = gt_cases.score_case(body, fit, bodies, "portrait")[0]
    assert row["hidden_cm"] <= 1.5 and row["joint_mean_cm"] <= 5.0, row  # 0.79, 3.25
    got = dict(zip(JOINT_NAMES, fit["joints"][0]))
    assert max(np.linalg.norm(got[n] - bodies[0].joints[n]) for n in ("left_hip", "right_hip")) <= 0.05  # 1.8 cm


@pytest.mark.parametrize("name,hidden,jmean", [("relative_depth", 2.5, 4.0), ("no_depth", 2.0, 5.0)])
def test_without_metric_depth_the_body_is_still_placed(results, name, hidden, jmean):
    fit, _maps, _bodies, rows = results[name]
    rep = json.loads(str(fit["reports"][0]))
    assert rep["depth"].startswith("relative" if name == "relative_depth" else "none")
    if name == "relative_depth":  # the maps' depth was 0.37 x the truth: the fit solves 1/0.37
        assert rep["depth_scale"] == pytest.approx(1 / 0.37, rel=0.1)
    assert rows[0]["hidden_cm"] <= hidden and rows[0]["joint_mean_cm"] <= jmean, rows[0]


def test_the_same_input_gives_the_same_output(body, results):
    first = results["clean"][0]
    again, *_ = gt_cases.fit_case(body, "clean")
    for key in ("vertices", "bone_matrices", "phenotypes", "placement"):
        assert np.array_equal(first[key], again[key]), key
