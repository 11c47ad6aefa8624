# SPDX-License-Identifier: GPL-3.0-or-later
"""The mesh helpers a fitted body's clothing and texture walk, on anny's own mesh."""

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

from sapiens_blender.core.body import surface as bs

pytestmark = [pytest.mark.anny]


def test_mesh_edges_are_each_undirected_edge_once_in_order(body_scene):
    """The edges the clothing's diffusions and the fill's blend walk: every triangle side once,
    as (low, high) rows sorted, on anny's mesh and on a mesh with unused vertex numbers."""
    faces = body_scene("standing").template.faces
    sides = {tuple(sorted(map(int, pair))) for tri in faces for pair in ((tri[0], tri[1]), (tri[1], tri[2]), (tri[2], tri[0]))}
    edges = bs.mesh_edges(faces)
    assert edges.tolist() == [list(side) for side in sorted(sides)]
    assert bs.mesh_edges(np.array([[7, 2, 9], [9, 2, 4]])).tolist() == [[2, 4], [2, 7], [2, 9], [4, 9], [7, 9]]
    assert bs.mesh_edges(np.zeros((0, 3), np.int64)).shape == (0, 2)
