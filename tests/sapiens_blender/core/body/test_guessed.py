# SPDX-License-Identifier: GPL-3.0-or-later
"""The fit report's ``guessed`` on the add-on side: vertices by source, and the CLI's line."""

from __future__ import annotations

import numpy as np

from sapiens_blender.core.body.guessed import joint_sources, summary, vertex_sources
from sapiens_blender.core.build.report import BodyReport, PersonReport

PARTS = ["Background", "Torso", "Left_Upper_Arm", "Left_Lower_Arm", "Left_Hand", "Left_Upper_Leg",
         "Left_Lower_Leg", "Face_Neck"]
GUESSED = {
    "left_arm": {"source": "seen", "seen": ["left_shoulder", "left_elbow", "left_wrist"]},
    "left_leg": {"source": "partly seen", "seen": ["left_hip"], "out_of_frame": ["left_knee", "left_ankle"]},
    "left_hand": {"source": "occluded", "occluded": ["left_thumb4", "left_forefinger4"]},
    "head": {"source": "3d", "seen": [], "3d": ["nose"]},
}


def test_joint_sources_read_every_limb():
    src = joint_sources(GUESSED)
    assert src["left_elbow"] == "seen" and src["left_knee"] == "out_of_frame"
    assert src["left_thumb4"] == "occluded" and src["nose"] == "3d"
    assert joint_sources({}) == {}


def test_each_vertex_takes_its_parts_least_certain_joint():
    parts = np.array([1, 2, 3, 4, 5, 6, 7, 3], np.uint8)  # vertex i on PARTS[parts[i]]
    got = vertex_sources(GUESSED, parts, PARTS)
    assert sorted(np.concatenate(list(got.values())).tolist()) == list(range(len(parts)))  # each once
    assert got["seen"].tolist() == [0, 1, 2, 7]  # torso (shoulder/hip seen), upper and lower arm
    assert got["occluded"].tolist() == [3]  # the hand: its fingers
    assert got["out_of_frame"].tolist() == [4, 5]  # thigh (hip seen, knee not) and shin
    assert got["3d"].tolist() == [6]  # the head
    assert vertex_sources({}, parts, PARTS) == {}


def test_the_cli_line_names_what_was_guessed():
    line = summary(GUESSED)
    assert "left leg partly seen (left knee out of the frame, left ankle out of the frame)" in line
    assert "left hand occluded" in line and "head from the 3D pose" in line and "left arm" not in line
    assert summary({"left_arm": GUESSED["left_arm"]}) == ""
    report = PersonReport(body=BodyReport(mode="minimal", vertices=8, faces=4, fit={"guessed": GUESSED}))
    lines = report.lines(1, has_mesh=False)
    assert any(ln.startswith("    guessed: ") and "left knee out of the frame" in ln for ln in lines)
