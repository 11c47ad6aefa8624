# SPDX-License-Identifier: GPL-3.0-or-later
"""The values contract.json allows (issue 37): finiteness, ranges (one per last-axis entry too),
the pinhole and rigid forms, each refused in one line naming the tensor; and reports written as
strict JSON."""

import json

import numpy as np

from inference_server.protocol import contract


def test_ranges_let_unknown_values_through_but_never_infinities():
    depth = contract.MAPS["depth"]
    assert contract.problem("depth", np.array([[np.nan, 2.5]], np.float32), depth) is None
    assert contract.problem("depth", np.array([[np.inf, 2.5]], np.float32), depth) == "'depth' holds inf, outside [0, 10000]"
    assert contract.problem("depth", np.array([[-0.5]], np.float32), depth) == "'depth' holds -0.5, outside [0, 10000]"
    kp = np.zeros((1, 308, 3), np.float32)
    assert contract.problem("keypoints", kp, contract.MAPS["keypoints"]) is None
    kp[0, 5, 2] = 1e9
    assert contract.problem("keypoints", kp, contract.MAPS["keypoints"]) == \
        "'keypoints'[..., 2] holds 1e+09, outside [-10, 10]"
    frame = contract.MOTION["reference_frame"]
    assert contract.problem("reference_frame", np.array([-3], np.int32), frame).startswith("'reference_frame' holds -3")


def test_pinhole_and_rigid_forms():
    k = np.array([[500, 0, 80], [0, 500, 60], [0, 0, 1]], np.float32)
    spec = contract.MAPS["intrinsics"]
    assert contract.problem("intrinsics", k, spec) is None
    for bad in (np.zeros((3, 3), np.float32), k * np.float32(2), np.diag([-500, 500, 1]).astype(np.float32)):
        assert "is not a pinhole K" in contract.problem("intrinsics", bad, spec)
    turn = np.eye(4, dtype=np.float32)
    turn[:3, :3] = [[0, -1, 0], [1, 0, 0], [0, 0, 1]]
    turn[:3, 3] = [0.1, 0.2, 3.0]
    bones = np.stack([np.eye(4, dtype=np.float32), turn])
    spec = contract.MOTION["reference_bone_matrices"]
    assert contract.problem("bones", bones, spec) is None
    mirrored = bones.copy()
    mirrored[1, 0, :3] *= -1  # a reflection is orthonormal but not a rotation
    assert contract.problem("bones", mirrored, spec) == \
        "'bones' (matrix 1) is not a rigid transform (a rotation and a translation, bottom row 0 0 0 1)"
    assert "not a rigid" in contract.problem("placement", np.diag([2, 2, 2, 1]).astype(np.float32),
                                             contract.MOTION["reference_placement"])


def test_reports_are_strict_json():
    report = {"a": float("nan"), "b": [np.float32(np.inf), 1.5], "c": np.int64(3), "d": {"e": -np.inf},
              "f": np.array([np.nan, 2.0]), "g": np.bool_(True), "h": "text"}
    text = contract.report_json(report)
    assert json.loads(text, parse_constant=lambda c: 1 / 0) == \
        {"a": None, "b": [None, 1.5], "c": 3, "d": {"e": None}, "f": [None, 2.0], "g": True, "h": "text"}
