# SPDX-License-Identifier: GPL-3.0-or-later
"""What an artist meets in the first hour with a built file: it renders as it is (world and
light), it holds no unused images, and the build settings reach the build."""

from __future__ import annotations

import numpy as np
import pytest

bpy = pytest.importorskip("bpy")

from sapiens_blender import api  # noqa: E402
from sapiens_blender.blender import identity  # noqa: E402

from synthetic_scene import ellipsoid_maps  # noqa: E402


@pytest.fixture()
def empty():
    api.new_scene()


def test_one_build_makes_one_normals_image_and_no_orphans(empty):
    maps = ellipsoid_maps(96, 72, people=2)
    api.build_from_maps(maps, name="a")
    api.build_from_maps(maps, name="b")  # a second API build makes its own set, once
    normals = [im for im in bpy.data.images if im.get(identity.ROLE) == identity.NORMALS]
    assert len(normals) == 4  # two builds x two people
    live_materials = {m for ob in bpy.data.objects if ob.type == "MESH" for m in ob.data.materials}
    used = {n.image for m in live_materials for n in m.node_tree.nodes if n.type == "TEX_IMAGE"}
    assert set(bpy.data.images) <= used, [im.name for im in set(bpy.data.images) - used]
