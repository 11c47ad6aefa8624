# SPDX-License-Identifier: GPL-3.0-or-later
"""benchmarks/bench_real.py's scoring on data made here (no photos, no server, no network): the
alignment, the matching of built people to labels, leg flexion and legs out of the frame."""

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
from benchmark_modules import benchmark_module
from repo_paths import REPO


@pytest.fixture(scope="module")
def bench():
    with benchmark_module("bench_real") as module:
        yield module


def _rotation(rng) -> np.ndarray:
    q, r = np.linalg.qr(rng.normal(size=(3, 3)))
    q = q * np.sign(np.diag(r))
    return q if np.linalg.det(q) > 0 else -q


def _standing(bench) -> dict:
    """A person standing straight facing the camera, 3 m away (camera frame: y down)."""
    j = {"left_shoulder": (0.2, -0.5), "right_shoulder": (-0.2, -0.5), "left_elbow": (0.25, -0.2),
         "right_elbow": (-0.25, -0.2), "left_wrist": (0.27, 0.05), "right_wrist": (-0.27, 0.05),
         "left_hip": (0.1, 0.0), "right_hip": (-0.1, 0.0), "left_knee": (0.1, 0.45),
         "right_knee": (-0.1, 0.45), "left_ankle": (0.1, 0.9), "right_ankle": (-0.1, 0.9)}
    return {n: np.array([x, y, 3.0]) for n, (x, y) in j.items()}


def test_pa_mpjpe_is_zero_for_a_similarity_transformed_skeleton(bench):
    rng = np.random.default_rng(0)
    j = _standing(bench)
    truth = np.array([j[n] for n in bench.LIMB_JOINTS])
    moved = 1.37 * truth @ _rotation(rng).T + np.array([0.4, -2.0, 5.0])
    assert bench.pa_mpjpe(moved, truth) == pytest.approx(0.0, abs=1e-9)
    # root-relative MPJPE ignores translation only
    assert bench.root_relative_mpjpe(truth + [1.0, 2.0, 3.0], truth) == pytest.approx(0.0, abs=1e-12)
    assert bench.root_relative_mpjpe(moved, truth) > 0.1
    # noise: PA-MPJPE never exceeds the error before alignment, and is about the noise
    noisy = truth + rng.normal(scale=0.02, size=truth.shape)
    assert 0.005 < bench.pa_mpjpe(noisy, truth) <= np.linalg.norm(noisy - truth, axis=1).mean()
    # a mirror image is not a rotation: it is not aligned away
    cloud = rng.normal(scale=0.3, size=(12, 3))
    assert bench.pa_mpjpe(cloud * [-1.0, 1.0, 1.0], cloud) > 0.05


def test_projection_and_sizes(bench):
    k = np.array([[500.0, 0, 320], [0, 500.0, 240], [0, 0, 1]])
    uv = bench.project(np.array([[0.0, 0.0, 2.0], [0.2, -0.4, 2.0]]), k)
    assert np.allclose(uv, [[320, 240], [370, 140]])
    assert bench.box_size((10, 20, 30, 120)) == pytest.approx(60.0)


def test_matching_recalls_each_label_once_within_ten_percent(bench):
    size = 100.0
    rng = np.random.default_rng(1)
    names = bench.LIMB_JOINTS + bench.FACE_JOINTS
    labels = []
    for cx in (100.0, 400.0, 700.0):
        labels.append({n: (cx + rng.uniform(-40, 40), 200 + rng.uniform(-80, 80)) for n in names})
    shift = lambda lab, d: {n: (x + d, y) for n, (x, y) in lab.items()}  # noqa: E731
    people = [shift(labels[0], 2.0),  # 2 % off label 0
              shift(labels[1], 8.0),  # 8 %: recalled
              shift(labels[2], 30.0),  # 30 %: on label 2 but too far off
              shift(labels[0], 5.0),  # a second body on label 0: matches nothing
              {n: (2000.0, 2000.0) for n in names}]  # on nobody
    cost = bench.error_matrix(people, labels, [size] * 3)
    assert cost[0, 0] == pytest.approx(0.02) and cost[1, 1] == pytest.approx(0.08)
    pairs = bench.match_people(cost)
    assert [(i, j) for i, j, _ in pairs] == [(0, 0), (1, 1)]
    # too few joints in common: not comparable
    few = {n: labels[0][n] for n in names[:bench.MIN_SHARED - 1]}
    assert bench.person_error(few, labels[0], size) == (float("inf"), bench.MIN_SHARED - 1)
    assert bench.match_people(np.zeros((0, 3))) == []


def test_leg_flexion_of_known_poses(bench):
    j = _standing(bench)
    for side in ("left", "right"):
        hip, knee = bench.leg_flexion(j, side)
        assert hip == pytest.approx(0.0, abs=1e-9) and knee == pytest.approx(0.0, abs=1e-9)
    # left thigh raised forward (towards the camera: -z), shin hanging down: 90 / 90
    j["left_knee"] = j["left_hip"] + [0.0, 0.0, -0.45]
    j["left_ankle"] = j["left_knee"] + [0.0, 0.45, 0.0]
    hip, knee = bench.leg_flexion(j, "left")
    assert hip == pytest.approx(90.0) and knee == pytest.approx(90.0)
    # a thigh stretched backwards is negative; the whole body turned any way changes nothing
    j["right_knee"] = j["right_hip"] + 0.45 * np.array([0.0, np.cos(np.radians(20)), np.sin(np.radians(20))])
    j["right_ankle"] = j["right_knee"] + (j["right_knee"] - j["right_hip"])
    rot = _rotation(np.random.default_rng(2))
    turned = {n: rot @ v + [1.0, 0.0, 4.0] for n, v in j.items()}
    for side, want in (("left", (90.0, 90.0)), ("right", (-20.0, 0.0))):
        assert bench.leg_flexion(turned, side) == pytest.approx(want, abs=1e-6)


def test_legs_out_of_the_frame(bench):
    hw = (400, 600)
    upper = {"left_shoulder": (330.0, 200.0), "right_shoulder": (270.0, 200.0),
             "left_hip": (320.0, 330.0), "right_hip": (280.0, 330.0)}
    legs = bench.legs_out_of_frame(upper, hw)
    assert [leg["side"] for leg in legs] == ["left", "right"]
    assert all(leg["upright"] and not leg["knee_seen"] for leg in legs)
    assert all(leg["standing"] and not leg["seated"] for leg in legs)
    # knees labelled in the picture: a standing leg's lies well below its hip, a seated one's
    # (a thigh towards the camera) just below it: upright, but not standing
    low = {**upper, "left_knee": (320.0, 395.0), "right_knee": (280.0, 395.0)}  # 0.5 torso lengths
    seated = {**upper, "left_knee": (325.0, 360.0), "right_knee": (275.0, 370.0)}  # 0.23, 0.31
    assert [(leg["standing"], leg["seated"]) for leg in bench.legs_out_of_frame(low, hw)] == [(True, False)] * 2
    legs = bench.legs_out_of_frame(seated, hw)
    assert [(leg["upright"], leg["seated"], leg["standing"]) for leg in legs] == [(True, True, False)] * 2
    # the whole person in the picture: nothing cut off
    whole = {"left_shoulder": (330.0, 100.0), "right_shoulder": (270.0, 100.0),
             "left_hip": (320.0, 180.0), "right_hip": (280.0, 180.0), "left_knee": (320.0, 250.0),
             "left_ankle": (320.0, 320.0), "right_knee": (280.0, 250.0), "right_ankle": (280.0, 320.0)}
    assert bench.legs_out_of_frame(whole, hw) == []
    # ankles unlabelled but a straight leg would end inside the picture: hidden, not cut off
    hidden = {n: v for n, v in whole.items() if "ankle" not in n}
    assert bench.legs_out_of_frame(hidden, hw) == []
    # lying across the bottom edge, legs leaving at the side: found, and not upright
    lying = {"left_shoulder": (100.0, 360.0), "right_shoulder": (100.0, 380.0),
             "left_hip": (450.0, 360.0), "right_hip": (450.0, 380.0)}
    legs = bench.legs_out_of_frame(lying, hw)
    assert len(legs) == 2 and not any(leg["upright"] for leg in legs)
    # a portrait cut at the chest: no hip labelled, the hips would be below the picture
    portrait = {"left_shoulder": (380.0, 300.0), "right_shoulder": (220.0, 310.0), "left_elbow": (400.0, 390.0)}
    legs = bench.legs_out_of_frame(portrait, hw)
    assert [(leg["side"], leg["hip_seen"], leg["upright"]) for leg in legs] == [("left", False, True),
                                                                               ("right", False, True)]
    # ... but not when the shoulders are high enough for the hips to be in it
    assert bench.legs_out_of_frame({n: (x, y - 250) for n, (x, y) in portrait.items()}, hw) == []


def test_score_2d_and_the_tables_on_a_made_up_photo(bench):
    j = _standing(bench)
    k = np.array([[500.0, 0, 320], [0, 500.0, 240], [0, 0, 1]])
    names = list(j)
    uv = dict(zip(names, map(tuple, bench.project(np.array([j[n] for n in names]), k))))
    label = bench.Label("a", uv, (240.0, 140.0, 160.0, 260.0), bench.box_size((0, 0, 160, 260)))
    # a second labelled person nobody built, and an annotated box without keypoints
    other = bench.Label("b", {n: (x + 300, y) for n, (x, y) in uv.items()}, (540.0, 140.0, 160.0, 260.0),
                        bench.box_size((0, 0, 160, 260)))
    photo = bench.Photo("made-up", Path("none.jpg"), "made-up__one", (480, 640), [label, other],
                        other_boxes=[(0.0, 0.0, 50.0, 50.0)])
    body = {"id": 1, "joints": j, "estimated": [], "points": uv}
    stray = {"id": 2, "joints": j, "estimated": [], "points": {n: (x - 300, y) for n, (x, y) in uv.items()}}
    out = {"bodies": [body, stray], "backend": [{"id": 1, "points": uv}], "image": None}
    rec = bench.score_2d(photo, out)
    assert rec["bodies_recalled"] == 1 and rec["backend_recalled"] == 1
    assert rec["bodies_matches"] == [{"person": 1, "label": "a", "err_pct": 0.0}]
    assert [u["person"] for u in rec["bodies_unmatched"]] == [2]
    assert rec["legs_out_of_frame"] == []
    table, agg = bench.tables([{"dataset": "made-up", "key": photo.key, "photo": "none.jpg",
                                "build": {"seconds": 1.0}, "score": rec}])
    a = agg["2d"]["all real photos"]
    assert (a["labelled"], a["bodies"], a["bodies_recalled"], a["bodies_unmatched"]) == (2, 2, 1, 1)
    assert "| made-up | one | 2 | 1 | 2 | 1 | 1 |" in table


def test_landmark_focal_recovers_a_perspective_camera(bench):
    """real_focal.landmark_focal: metric points seen through a known focal give it back; the
    same points seen without perspective (every depth the mean's) prefer the grid's longest focal."""
    sys.modules["bench_real"] = bench  # real_focal imports it by name (run from benchmarks/)
    try:
        spec = importlib.util.spec_from_file_location("real_focal_under_test", REPO / "benchmarks" / "real_focal.py")
        focal = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(focal)
    finally:
        sys.modules.pop("bench_real", None)
    rng = np.random.default_rng(3)
    world = rng.uniform(-0.5, 0.5, (308, 3)) * [0.6, 1.8, 0.5]
    f, centre, t = 0.8 * 1000, np.array([500.0, 400.0]), np.array([0.3, -0.1, 2.5])
    cam = world + t
    keypoints = np.c_[f * cam[:, :2] / cam[:, 2:3] + centre, np.ones(308)]
    est, rms = focal.landmark_focal(keypoints, np.c_[world, np.ones(308)], centre, 1000)
    assert est == pytest.approx(0.8, abs=0.011) and rms < 1.0
    keypoints = np.c_[f * (world[:, :2] + t[:2]) / t[2] + centre, np.ones(308)]
    assert focal.landmark_focal(keypoints, np.c_[world, np.ones(308)], centre, 1000)[0] == \
        pytest.approx(focal.FOCAL_GRID[-1])


def test_3d_loaders_read_humanm3_and_zju_mocap_files_made_here(bench, tmp_path):
    """load_humanm3 (one photo, a camera-frame pose3d per person, built once) and load_zju_mocap
    (SMPL joints in the body frame + body-to-camera transform) give the 12 limb joints in the
    camera frame, in LIMB_JOINTS order, and labels projected with the dataset's camera."""
    import pickle

    cv2 = pytest.importorskip("cv2")
    rng = np.random.default_rng(5)
    d = tmp_path / "humanm3_demo"
    d.mkdir()
    cv2.imwrite(str(d / "frame.jpeg"), np.zeros((48, 64, 3), np.uint8))
    poses = [rng.uniform(-0.8, 0.8, (15, 3)) + [0.0, 0.0, 8.0 + i] for i in range(2)]
    items = [{"sequence": "basketball1", "time": "7", "tracking_id": str(10 + i), "pose3d": p,
              "img_file": "frame.jpeg"} for i, p in enumerate(poses)]
    (d / "data.pkl").write_bytes(pickle.dumps(items))
    photos = bench.load_humanm3(tmp_path)
    assert [p.key for p in photos] == ["humanm3__basketball1_7_person10", "humanm3__basketball1_7_person11"]
    assert {bench.built_name(p) for p in photos} == {"humanm3__basketball1_7"}  # one build for both
    k = bench.HUMANM3_INTRINSICS["basketball1"]
    for p, pose in zip(photos, poses):
        assert p.hw == (48, 64) and p.focal == pytest.approx((k[0][0] + k[1][1]) / 2)
        # Human-M3's right shoulder is its joint 10, left hip 1, left ankle 5
        names = dict(zip(bench.LIMB_JOINTS, p.truth3d))
        np.testing.assert_allclose([names["right_shoulder"], names["left_hip"], names["left_ankle"]],
                                   pose[[10, 1, 5]])
        uv = bench.project(p.truth3d, k)
        np.testing.assert_allclose([p.labels[0].points[n] for n in bench.LIMB_JOINTS], uv)
        all_uv = bench.project(pose, k)
        assert p.labels[0].box[:2] == pytest.approx(tuple(all_uv.min(0)))

    z = tmp_path / "zju_mocap"
    z.mkdir()
    joints = rng.uniform(-0.5, 0.5, (45, 3))
    rot = _rotation(rng)
    t_c_b = np.eye(4)
    t_c_b[:3, :3], t_c_b[:3, 3] = rot, (0.1, -0.2, 3.0)
    kz = np.array([[1000.0, 0, 500], [0, 1010.0, 400], [0, 0, 1]])
    np.savez(z / "sample.npz", joints_3d_wo_translation=joints, T_C_B=t_c_b, intrinsics=kz,
             distortion=np.zeros((1, 5)))
    cv2.imwrite(str(z / "sample.jpg"), np.zeros((40, 30, 3), np.uint8))
    (photo,) = bench.load_zju_mocap(tmp_path)  # sample_31 is absent: skipped
    cam = joints[:24] @ rot.T + t_c_b[:3, 3]
    names = dict(zip(bench.LIMB_JOINTS, photo.truth3d))
    # SMPL: left shoulder 16, right wrist 21, right knee 5
    np.testing.assert_allclose([names["left_shoulder"], names["right_wrist"], names["right_knee"]],
                               cam[[16, 21, 5]])
    np.testing.assert_allclose([photo.labels[0].points[n] for n in bench.LIMB_JOINTS],
                               bench.project(photo.truth3d, kz), atol=1e-6)
    assert photo.key == "zju_mocap__sample" and photo.hw == (40, 30) and photo.focal == pytest.approx(1005.0)


def test_tables_average_3d_frames_per_set(bench):
    def rec(key, ds, fit, inp):
        return {"dataset": ds, "key": key, "photo": "x.jpg", "build": {"seconds": 1.0},
                "score": {"bodies": 1, "fit_pa_mm": fit, "input_pa_mm": inp}}

    table, agg = bench.tables([rec("mpi_inf_3dhp__TS1", "mpi_inf_3dhp", 80.0, 90.0),
                               rec("humanm3__b_1_person3", "humanm3", 100.0, 95.0),
                               rec("humanm3__b_1_person4", "humanm3", 120.0, 125.0)])
    assert agg["3d"]["frames"] == 3 and agg["3d"]["fit_pa_mean_mm"] == 100.0
    assert agg["3d_by_set"]["humanm3"]["fit_pa_mean_mm"] == 110.0
    assert agg["3d_by_set"]["mpi_inf_3dhp"]["input_pa_mean_mm"] == 90.0
    assert "| b_1_person3 | 1 | 100.0 | 95.0 |" in table and "2d" not in agg


def test_refit_summary_counts_each_person_once_and_the_fits_own_loss_of_2d():
    """benchmarks/refit_real.py's summary: 3D frames by their fit / input, 2D sets by recall and
    error (artworks apart), and the bodies' error minus the backend's on the people both recall."""
    sys.path.insert(0, str(REPO / "benchmarks"))
    try:
        spec = importlib.util.spec_from_file_location("refit_real_under_test", REPO / "benchmarks" / "refit_real.py")
        refit = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(refit)
    finally:
        sys.path.remove(str(REPO / "benchmarks"))
    leg = {"upright": True, "seated": False, "standing": True, "hip_flexion_deg": 50.0, "knee_flexion_deg": 10.0}
    rows = [
        {"key": "mpi_inf_3dhp__TS1", "dataset": "mpi_inf_3dhp", "score": {"fit_pa_mm": 70.0, "input_pa_mm": 72.0, "fit_2d_pct": 4.0}},
        {"key": "mpi_inf_3dhp__S4", "dataset": "mpi_inf_3dhp", "score": {"input_pa_mm": 180.0, "fit_miss": "x"}},
        {"key": "coco__1", "dataset": "coco", "score": {
            "labelled": 3, "bodies_recalled": 2, "backend_recalled": 2,
            "bodies_matches": [{"label": "a", "err_pct": 5.0}, {"label": "b", "err_pct": 7.0}],
            "backend_matches": [{"label": "a", "err_pct": 4.0}, {"label": "c", "err_pct": 2.0}],
            "bodies_unmatched": [{"person": 3}], "legs_out_of_frame": [leg, {**leg, "upright": False, "standing": False},
                                                                    {**leg, "seated": True, "standing": False}]}},
        {"key": "humanart-art__x", "dataset": "humanart-art", "score": {
            "labelled": 1, "bodies_recalled": 0, "backend_recalled": 0, "bodies_matches": [], "backend_matches": [],
            "bodies_unmatched": [{"person": 1}], "legs_out_of_frame": []}},
    ]
    s = refit.summarize(rows)
    assert s["3d"] == {"TS1": (70.0, 72.0, 4.0), "S4": (None, 180.0, None)} and s["fit_pa_mean"] == 70.0
    two = s["2d"]
    assert (two["labelled"], two["bodies_recalled"], two["bodies_unmatched"]) == (3, 2, 1)  # the artwork apart
    assert two["bodies_err_pct"] == 6.0 and two["backend_err_pct"] == 3.0
    assert two["both_recalled"] == 1 and two["bodies_minus_backend_pct"] == 1.0  # label "a" only
    assert (two["standing_legs"], two["standing_legs_over_45"]) == (1, 1)


def test_body_shapes_count_each_build_once_and_leave_the_artworks_apart(bench):
    heavy, average = [0.5, 0.5, 0.1, 0.95, 0.5, 0.5], [0.5, 0.5, 0.5, 0.5, 0.5, 0.5]
    results = [
        # two labelled people of one photo share its build: its bodies count once
        {"dataset": "humanm3", "build_name": "court", "bodies_phenotypes": {1: heavy, 2: average}},
        {"dataset": "humanm3", "build_name": "court", "bodies_phenotypes": {1: heavy, 2: average}},
        {"dataset": "coco", "build_name": "street", "bodies_phenotypes": {1: average}},
        {"dataset": "humanart-art", "build_name": "painting", "bodies_phenotypes": {1: heavy}},
        {"dataset": "coco", "build_name": "failed", "bodies_phenotypes": {}},
    ]
    shapes = bench.body_shapes(results)
    assert shapes["bodies"] == 3 and shapes["weight_over_0.8"] == 1 and shapes["weight_under_0.2"] == 0
    assert shapes["weight_mean"] == round((0.95 + 0.5 + 0.5) / 3, 3)
    assert shapes["muscle_mean"] == round((0.1 + 0.5 + 0.5) / 3, 3)
    assert bench.body_shapes([{"dataset": "coco", "build_name": "x", "bodies_phenotypes": {}}]) is None


def test_a_turned_photo_carries_its_labels_and_truth_with_it(bench, tmp_path):
    """--turned: the photo written a quarter turned clockwise, each labelled point on the same
    pixel of the turned photo, the 3D truth turned about the optical axis so that it still
    projects onto its labels (the turned camera: focal lengths swapped, principal point moved)."""
    import cv2

    h, w = 30, 50
    image = np.zeros((h, w, 3), np.uint8)
    image[7, 41] = (255, 255, 255)  # row 7, column 41: x = 41, y = 7
    path = tmp_path / "p.png"
    cv2.imwrite(str(path), image)
    k = np.array([[60.0, 0, 24.5], [0, 70.0, 14.5], [0, 0, 1]])
    truth = np.array([[0.1, -0.2, 2.0], [-0.3, 0.25, 3.0]])
    uv = bench.project(truth, k)
    label = bench.Label("1", {"left_wrist": (41.0, 7.0), "left_knee": tuple(uv[1])}, (40.0, 5.0, 4.0, 6.0), 5.0)
    photo = bench.Photo("mpi_inf_3dhp", path, "p", (h, w), [label], [(1.0, 2.0, 3.0, 4.0)],
                        truth3d=truth, truth2d=uv)
    t = bench.turned(photo, tmp_path / "turned")
    turned = cv2.imread(str(t.path))
    assert turned.shape[:2] == (w, h) and t.hw == (w, h) and t.key == "p__turned"
    x, y = t.labels[0].points["left_wrist"]
    assert turned[int(y), int(x)].max() == 255 and turned.sum() == 3 * 255  # the marked pixel moved with it
    bx, by, bw, bh = t.labels[0].box
    assert (bw, bh) == (6.0, 4.0) and bx <= x <= bx + bw and by <= y <= by + bh
    k_turned = np.array([[70.0, 0, h - 1 - 14.5], [0, 60.0, 24.5], [0, 0, 1]])
    assert np.allclose(bench.project(t.truth3d, k_turned), t.truth2d)
    assert np.allclose(t.truth2d[1], t.labels[0].points["left_knee"])
    assert bench.pa_mpjpe(t.truth3d, truth) < 1e-9  # the same body, turned
