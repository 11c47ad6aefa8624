# SPDX-License-Identifier: GPL-3.0-or-later
"""The report's ``guessed``: each fitted joint seen, placed by the 3D pose, or set by the prior
(out of the frame / occluded), and the per-limb words built from them."""

from __future__ import annotations

import numpy as np

from inference_server.fit.correspondences import JOINT_NAMES
from inference_server.fit.guessed import LIMBS, joint_sources, limb_report

K = np.array([[500.0, 0, 160], [0, 500.0, 120], [0, 0, 1]])
HW = (240, 320)
IDX = {n: i for i, n in enumerate(JOINT_NAMES)}


def _joints_in_frame() -> np.ndarray:
    """Every joint 2 m ahead on the optical axis: all project to the photo's centre."""
    j = np.zeros((len(JOINT_NAMES), 3))
    j[:, 2] = 2.0
    return j


def test_each_joint_gets_its_source():
    seen = np.zeros(len(JOINT_NAMES), bool)
    seen[IDX["left_shoulder"]] = True
    world = np.zeros(len(JOINT_NAMES))
    world[IDX["left_elbow"]] = 0.8  # unseen, but MediaPipe's 3D pose has it
    joints = _joints_in_frame()
    joints[IDX["left_ankle"], 1] = 1.5  # 1.5 m below the axis at 2 m: far below the frame
    joints[IDX["right_ankle"], 2] = -0.5  # behind the camera
    src = dict(zip(JOINT_NAMES, joint_sources(seen, world, joints, K, HW)))
    assert src["left_shoulder"] == "seen" and src["left_elbow"] == "3d"
    assert src["left_ankle"] == "out_of_frame" and src["right_ankle"] == "out_of_frame"
    assert src["left_wrist"] == "occluded"  # in the frame, unseen, no 3D cue
    # Without a 3D pose nothing is "3d".
    assert "3d" not in joint_sources(seen, None, joints, K, HW)


def test_only_the_joints_of_bones_the_fit_takes_from_the_3d_pose_are_placed_by_it():
    """The world term follows the limbs' and the torso's bones (bones.WORLD_BONES), not the head
    or the feet (MediaPipe's 3D feet point down): an unseen nose or heel that the 3D pose has is
    set by the prior, and said to be; an unseen knee is placed by it."""
    seen = np.zeros(len(JOINT_NAMES), bool)
    world = np.full(len(JOINT_NAMES), 0.9)  # MediaPipe's 3D pose has all its landmarks
    src = dict(zip(JOINT_NAMES, joint_sources(seen, world, _joints_in_frame(), K, HW)))
    assert src["left_knee"] == "3d" and src["right_wrist"] == "3d" and src["left_hip"] == "3d"
    for name in ("nose", "left_ear", "left_heel", "right_big_toe", "left_thumb4"):
        assert src[name] == "occluded", name
    rep = limb_report(list(src.values()))
    assert rep["left_leg"]["source"] == "3d" and rep["left_foot"]["source"] == "occluded"
    assert rep["head"]["source"] == "occluded"


def test_limb_words():
    src = ["seen"] * len(JOINT_NAMES)
    for n in ("left_knee", "left_ankle"):
        src[IDX[n]] = "out_of_frame"
    for n in LIMBS["right_leg"]:
        src[IDX[n]] = "occluded"
    src[IDX["right_hip"]] = "3d"
    for n in LIMBS["right_arm"]:
        src[IDX[n]] = "out_of_frame"
    rep = limb_report(src)
    assert set(rep) == set(LIMBS)
    assert rep["left_arm"] == {"source": "seen", "seen": list(LIMBS["left_arm"])}
    assert rep["left_leg"]["source"] == "partly seen"
    assert rep["left_leg"]["out_of_frame"] == ["left_knee", "left_ankle"]
    assert rep["right_leg"]["source"] == "3d" and rep["right_leg"]["occluded"] == ["right_knee", "right_ankle"]
    assert rep["right_arm"]["source"] == "out_of_frame"
