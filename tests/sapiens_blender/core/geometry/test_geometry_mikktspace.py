# SPDX-License-Identifier: GPL-3.0-or-later
"""Our tangent frames equal Blender's own MikkTSpace tangents on the same mesh.

The core never imports bpy; this test does (skipped without it) so that the tangent-space
normal texture is proven to decode correctly in Blender and in MikkTSpace game engines.
"""

import numpy as np
import pytest
from geometry_fixtures import sphere_maps

from sapiens_blender.core.geometry import normals, surface
from sapiens_blender.core.geometry.types import camera_to_blender


def test_tangent_frames_match_blender_mikktspace():
    bpy = pytest.importorskip("bpy")
    maps = sphere_maps(h=60, w=80)
    mesh = surface.build_surface_mesh(maps, 1)
    me = bpy.data.meshes.new("mikktspace check")
    try:
        me.from_pydata(camera_to_blender(mesh.vertices.astype(np.float64)).tolist(), [], mesh.faces.tolist())
        uv = me.uv_layers.new(name="UV")
        loop_vertex = np.zeros(len(me.loops), np.int64)
        me.loops.foreach_get("vertex_index", loop_vertex)
        uv.data.foreach_set("uv", mesh.uv[loop_vertex].ravel())
        me.shade_smooth()
        me.calc_tangents(uvmap="UV")
        tangent = np.zeros(len(me.loops) * 3)
        me.loops.foreach_get("tangent", tangent)
        normal = np.zeros(len(me.loops) * 3)
        me.loops.foreach_get("normal", normal)
        sign = np.zeros(len(me.loops))
        me.loops.foreach_get("bitangent_sign", sign)
    finally:
        bpy.data.meshes.remove(me)
    n, t, s = normals.tangent_frames(mesh)

    def angle(a, b):
        cos = np.einsum("ij,ij->i", a, b) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        return np.degrees(np.arccos(np.clip(cos, -1, 1)))

    assert angle(tangent.reshape(-1, 3), t[loop_vertex]).max() < 0.1
    assert angle(normal.reshape(-1, 3), n[loop_vertex]).max() < 0.1
    assert (sign == s[loop_vertex]).all()
