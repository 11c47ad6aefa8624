# SPDX-License-Identifier: GPL-3.0-or-later
"""Pieces of the offline backend (keypoint slots, pseudo-depth, parts), its guarantees (no
network, no torch) and the `auto` model's choice."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from inference_server.backends import auto, mediapipe_cpu
from inference_server.dataplane import base
from inference_server.dataplane.base import AnalyzeOptions, BackendError
from inference_server.backends.mediapipe_landmarks import POSE, to_goliath
from inference_server.backends.mediapipe_parts import PART_ID, parts_and_depth
from inference_server.processing.goliath import KEYPOINT_INDEX
from inference_server.processing.pseudo_depth import (
    CROSS_SECTION_ASPECT,
    distance_from_landmarks,
    inflate,
    normals_from_depth,
)
from sapiens_blender.core.maps.canonical import Maps
from repo_paths import REPO



# --- keypoint slots --------------------------------------------------------------------------
def test_landmarks_land_in_their_goliath_slots():
    pose = np.zeros((33, 3), np.float32)
    pose[:, 0] = np.arange(33)  # x = landmark index, to see which landmark went where
    pose[:, 2] = 0.7
    hand = np.stack([np.arange(21) + 100.0, np.zeros(21)], 1)
    face = np.stack([np.arange(468) + 1000.0, np.zeros(468)], 1)
    kp = to_goliath(pose, left_hand=hand, right_hand=None, face=face)
    x = {n: kp[i, 0] for n, i in KEYPOINT_INDEX.items()}
    s = {n: kp[i, 2] for n, i in KEYPOINT_INDEX.items()}
    assert x["left_shoulder"] == POSE["left_shoulder"] and x["right_hip"] == POSE["right_hip"]
    assert x["left_big_toe"] == POSE["left_foot_index"] and x["right_heel"] == POSE["right_heel"]
    assert x["neck"] == (POSE["left_shoulder"] + POSE["right_shoulder"]) / 2
    # Hands: tip-first Goliath names; the thumb's third joint is the CMC (landmark 1).
    assert x["left_thumb4"] == 104 and x["left_thumb_third_joint"] == 101
    assert x["left_forefinger_third_joint"] == 105 and x["left_pinky_finger4"] == 120
    assert x["left_wrist"] == 100  # the hand model's wrist replaces the pose one
    assert x["right_wrist"] == POSE["right_wrist"] and s["right_thumb4"] == 0  # no right hand
    assert x["r_outer_corner_of_mouth"] == 1061 and x["l_outer_corner_of_mouth"] == 1291
    assert x["tip_of_chin"] == 1152 and x["r_outer_end_of_lower_lash_line"] == 1033
    # body (21), neck, one hand (20 more: its wrist is a body slot), the face subset (31)
    assert (kp[:, 2] > 0).sum() == 21 + 1 + 20 + 31
    assert s["left_olecranon"] == 0 and s["l_center_of_iris"] == 0


# --- pseudo-depth ----------------------------------------------------------------------------
def _intrinsics(f=100.0, w=64, h=48):
    return np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1]], np.float32)


def test_normals_of_a_plane_facing_the_camera():
    n = normals_from_depth(np.full((48, 64), 2.0, np.float32), _intrinsics())
    assert np.allclose(n[2:-2, 2:-2], [0, 0, -1], atol=1e-5)


def test_normals_of_a_tilted_plane():
    k = _intrinsics()
    a = np.radians(30)
    normal = np.array([np.sin(a), 0.0, -np.cos(a)])  # faces the camera, turned to the right
    v, u = np.mgrid[0:48, 0:64] + 0.5
    rays = np.stack([(u - k[0, 2]) / k[0, 0], (v - k[1, 2]) / k[1, 1], np.ones_like(u)], -1)
    depth = (normal @ np.array([0, 0, 2.0])) / (rays @ normal)  # plane through (0, 0, 2)
    n = normals_from_depth(depth.astype(np.float32), k)
    assert np.allclose(n[2:-2, 2:-2], normal, atol=1e-3)


def test_distance_from_landmarks_recovers_the_camera_distance():
    rng = np.random.default_rng(0)
    world = rng.uniform(-0.4, 0.4, (33, 3)) * [1, 2, 0.3]
    f, z0 = 800.0, 3.0
    pixels = f * world[:, :2] / z0 + [320, 240]  # weak perspective at distance z0
    vis = np.ones(33)
    assert distance_from_landmarks(pixels, world, vis, f) == pytest.approx(z0, rel=1e-6)
    vis[:30] = 0.1  # too few seen landmarks: no estimate
    assert distance_from_landmarks(pixels, world, vis, f) is None


def test_inflation_is_a_rounded_dome():
    yy, xx = np.mgrid[0:101, 0:101]
    r = np.hypot(xx - 50, yy - 50)
    disk = r <= 40
    bulge = inflate(disk, metres_per_pixel=0.01)
    assert (bulge[~disk] == 0).all() and (bulge >= 0).all()
    assert bulge[50, 50] == pytest.approx(CROSS_SECTION_ASPECT * 0.40, rel=0.15)
    profile = bulge[50, 50:91]
    assert (np.diff(profile) <= 1e-6).all(), "falls off monotonically towards the edge"
    assert profile[-1] < 0.3 * profile[0]


# --- parts -----------------------------------------------------------------------------------
def _t_pose(z_left_elbow=0.0):
    pose = np.zeros((33, 4))
    pose[:, 3] = 0.95
    at = {"nose": (100, 30), "left_eye": (105, 25), "right_eye": (95, 25), "left_ear": (112, 28),
          "right_ear": (88, 28), "left_shoulder": (130, 60), "right_shoulder": (70, 60),
          "left_elbow": (170, 60), "right_elbow": (30, 60), "left_wrist": (190, 60),
          "right_wrist": (10, 60), "left_hip": (120, 140), "right_hip": (80, 140),
          "left_knee": (120, 180), "right_knee": (80, 180)}
    for name, xy in at.items():
        pose[POSE[name], :2] = xy
    for name in ("left_index", "left_pinky", "right_index", "right_pinky", "left_ankle",
                 "right_ankle", "left_heel", "right_heel", "left_foot_index", "right_foot_index",
                 "mouth_left", "mouth_right", "left_eye_inner", "left_eye_outer",
                 "right_eye_inner", "right_eye_outer", "left_thumb", "right_thumb"):
        pose[POSE[name], 3] = 0.0  # not seen: their segments are skipped
    pose[POSE["left_elbow"], 2] = z_left_elbow
    return pose


def test_parts_follow_the_nearest_limb():
    labels, _ = parts_and_depth((200, 200), _t_pose())
    name = {v: k for k, v in PART_ID.items()}
    assert name[labels[60, 150]] == "Left_Upper_Arm"  # the person's left is the image's right
    assert name[labels[60, 50]] == "Right_Upper_Arm"
    assert name[labels[61, 182]] == "Left_Lower_Arm"
    assert name[labels[100, 100]] == "Torso"
    assert name[labels[30, 100]] == "Face_Neck"
    assert name[labels[150, 120]] == "Left_Upper_Leg"  # at the hip joint: the thigh starts


def test_landmark_depth_is_interpolated_along_the_limb():
    _, depth = parts_and_depth((200, 200), _t_pose(z_left_elbow=-0.2))
    assert depth[60, 130] == pytest.approx(0.0, abs=0.01)  # shoulder
    assert depth[60, 150] == pytest.approx(-0.1, abs=0.01)  # half-way to the elbow
    assert depth[60, 170] == pytest.approx(-0.2, abs=0.01)  # elbow


# --- the backend -----------------------------------------------------------------------------
def test_a_photo_without_people_gives_empty_valid_maps():
    backend = mediapipe_cpu.MediaPipeBackend()
    maps = backend.analyze(np.full((120, 160, 3), 200, np.uint8), AnalyzeOptions())
    assert maps["keypoints"].shape == (0, 308, 3) and not maps["mask"].any()
    m = Maps.from_arrays(dict(maps)).validate()
    assert m.person_ids == [] and np.isnan(m.depth).all()
    backend.unload()
    assert not backend.loaded


def test_bad_input_is_a_clear_error():
    backend = mediapipe_cpu.MediaPipeBackend()
    with pytest.raises(BackendError, match="RGB uint8"):
        backend.analyze(np.zeros((10, 10), np.float32), AnalyzeOptions())


def test_large_photos_are_analysed_at_max_side():
    backend = mediapipe_cpu.MediaPipeBackend()
    maps = backend.analyze(np.full((900, 600, 3), 90, np.uint8), AnalyzeOptions(max_side=300))
    assert maps["image"].shape == (300, 200, 3) and maps["mask"].shape == (300, 200)


def test_offline_path_needs_no_network_and_no_torch(tmp_path):
    """In a fresh interpreter with every socket refused, analyse the real photo."""
    script = textwrap.dedent("""
        import socket, sys
        def refuse(*a, **k):
            raise OSError("network access attempted")
        socket.socket.connect = refuse
        socket.socket.connect_ex = refuse
        socket.create_connection = refuse
        socket.getaddrinfo = refuse
        from inference_server.backends.mediapipe_cpu import MediaPipeBackend
        from inference_server.dataplane.base import AnalyzeOptions
        from inference_server.processing.image_io import decode_image
        from sapiens_blender.data import sample_photo_path
        maps = MediaPipeBackend().analyze(decode_image(sample_photo_path().read_bytes()),
                                          AnalyzeOptions())
        assert maps["mask"].any() and maps["keypoints"].shape[0] == 1
        print("torch imported:", "torch" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "torch imported: False" in out.stdout


# --- auto ------------------------------------------------------------------------------------
def test_auto_falls_back_when_sapiens2_is_not_installed():
    name, reason = auto.choose("no_such_package.sapiens2")
    assert name == "mediapipe" and "not installed" in reason


def test_auto_without_a_gpu_chooses_mediapipe(monkeypatch):
    monkeypatch.delenv("SAPIENS_AUTO_MODEL", raising=False)
    name, reason = auto.choose()  # the real Sapiens2 backend, on this GPU-less machine
    assert name == "mediapipe"
    assert "no GPU" in reason or "not installed" in reason


def test_auto_asks_torch_when_a_driver_exists_and_honours_a_forced_model(monkeypatch):
    monkeypatch.setattr(auto, "may_have_accelerator", lambda: True)
    monkeypatch.delenv("SAPIENS_AUTO_MODEL", raising=False)
    name, reason = auto.choose()  # torch itself now says whether CUDA/MPS works (here: no)
    assert name == "mediapipe" and ("no GPU/accelerator" in reason or "not installed" in reason)
    monkeypatch.setenv("SAPIENS_AUTO_MODEL", "mediapipe")
    assert auto.choose() == ("mediapipe", "SAPIENS_AUTO_MODEL=mediapipe is set")


def test_auto_chooses_sapiens2_with_a_gpu_and_weights(tmp_path, monkeypatch):
    """The decision rule, with a stand-in for hardware this machine lacks (a GPU)."""
    (tmp_path / "fake_sapiens2_gpu.py").write_text(
        "def accelerator_available():\n    return 'cuda'\n"
        "def weights_available(size, task=None, weights_dir=None):\n    return size == '0.4b'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delenv("SAPIENS_AUTO_MODEL", raising=False)
    monkeypatch.setattr(auto, "may_have_accelerator", lambda: True)  # a GPU driver is present
    assert auto.choose("fake_sapiens2_gpu") == ("sapiens2-0.4b", "cuda available and Sapiens2 0.4b weights available")
    monkeypatch.setenv("SAPIENS_AUTO_SIZE", "1b")  # no weights for this size
    name, reason = auto.choose("fake_sapiens2_gpu")
    assert name == "mediapipe" and "1b weights are not cached" in reason


class _FailsToLoad(base.Backend):
    name = "fails-to-load"

    def load(self, progress=base.no_progress, cancel=None):
        raise BackendError("weights are corrupt", 500)

    def unload(self):
        pass

    @property
    def loaded(self):
        return False

    def analyze(self, image, options, progress=base.no_progress, cancel=None):
        raise AssertionError("never called")


def test_auto_reports_its_choice_and_falls_back_when_loading_fails(monkeypatch):
    monkeypatch.setitem(base._REGISTRY, "fails-to-load", _FailsToLoad)
    monkeypatch.setitem(base._REGISTRY, "mediapipe", mediapipe_cpu.MediaPipeBackend)
    backend = auto.AutoBackend(chooser=lambda: ("fails-to-load", "it was asked for"))
    assert backend.describe()["resolved"] is None and "not decided" in backend.describe()["reason"]
    maps = backend.analyze(np.full((64, 64, 3), 128, np.uint8), AnalyzeOptions())
    facts = backend.describe()
    assert facts["resolved"] == "mediapipe"
    assert "fails-to-load failed to load" in facts["reason"] and "corrupt" in facts["reason"]
    assert maps["source"].startswith("mediapipe-0.10.21 (auto: fails-to-load failed to load")
    backend.unload()


def test_server_catalog_works_without_mediapipe_and_the_model_says_why():
    """A server environment without mediapipe/OpenCV still registers every model; `mediapipe`
    answers its load with a 503 that names the missing package and the fix."""
    script = textwrap.dedent("""
        import sys
        sys.modules["mediapipe"] = None  # not installed
        sys.modules["cv2"] = None
        from inference_server.backends import catalog
        from inference_server.dataplane import base
        catalog.register_builtin()
        assert "mediapipe" in base.registered_names() and "auto" in base.registered_names()
        backend = base.create("mediapipe")
        try:
            backend.load()
        except base.BackendError as exc:
            print("status", exc.status, "message", exc)
    """)
    out = subprocess.run([sys.executable, "-c", script], cwd=REPO, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr[-3000:]
    assert "status 503" in out.stdout and "mediapipe" in out.stdout and "pip install" in out.stdout


def test_a_cancelled_request_stops_with_cancelled():
    backend = mediapipe_cpu.MediaPipeBackend()
    token = base.CancelToken()
    stages = []

    def progress(stage, fraction, message=""):
        stages.append(stage)
        if stage == "detect":
            token.cancel()  # the user cancels while people are being searched

    with pytest.raises(base.Cancelled):
        backend.analyze(np.full((96, 96, 3), 128, np.uint8), AnalyzeOptions(), progress, token)
    assert "detect" in stages and "geometry" not in stages


def test_a_wheel_without_the_bundled_models_is_refused_not_downloaded(monkeypatch):
    assert mediapipe_cpu.check_bundled_models().is_dir()  # the pinned wheel has them all
    monkeypatch.setattr(mediapipe_cpu, "BUNDLED_MODELS",
                        mediapipe_cpu.BUNDLED_MODELS + ("modules/pose_landmark/pose_landmark_heavy.tflite",))
    with pytest.raises(BackendError, match="pose_landmark_heavy.tflite") as err:
        mediapipe_cpu.MediaPipeBackend().load()
    assert err.value.status == 503 and "nothing is downloaded" in str(err.value)
