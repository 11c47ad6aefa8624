# SPDX-License-Identifier: GPL-3.0-or-later
"""The built body carries what was guessed: vertex groups the artist can select."""

from __future__ import annotations

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from sapiens_blender.blender.body import write_guessed_groups  # noqa: E402
from sapiens_blender.core.body.guessed import GROUP_NAMES  # noqa: E402

pytestmark = pytest.mark.bpy

PARTS = ["Background", "Torso", "Left_Upper_Leg", "Left_Lower_Leg"]


def _members(obj, name) -> list[int]:
    g = obj.vertex_groups[name].index
    return [v.index for v in obj.data.vertices if any(e.group == g for e in v.groups)]


def test_guessed_vertex_groups():
    me = bpy.data.meshes.new("guessed")
    me.from_pydata([(0, 0, 0), (1, 0, 0), (0, 1, 0), (1, 1, 0)], [], [(0, 1, 3, 2)])
    obj = bpy.data.objects.new("guessed", me)
    guessed = {"left_leg": {"source": "partly seen", "seen": ["left_hip"],
                            "out_of_frame": ["left_knee", "left_ankle"]},
               "left_arm": {"source": "seen", "seen": ["left_shoulder"]}}
    made = write_guessed_groups(obj, guessed, np.array([1, 1, 2, 3]), PARTS)
    assert sorted(made) == sorted([GROUP_NAMES["seen"], GROUP_NAMES["out_of_frame"]])
    assert _members(obj, GROUP_NAMES["seen"]) == [0, 1]
    assert _members(obj, GROUP_NAMES["out_of_frame"]) == [2, 3]
    assert list(obj["sapiens_guessed_groups"]) == made
    bpy.data.objects.remove(obj)
    # A report without ``guessed`` (an older server) adds nothing.
    obj = bpy.data.objects.new("plain", bpy.data.meshes.new("plain"))
    assert write_guessed_groups(obj, {}, np.array([1, 1, 2, 3]), PARTS) == [] and len(obj.vertex_groups) == 0
