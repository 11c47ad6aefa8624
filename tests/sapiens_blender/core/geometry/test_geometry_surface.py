# SPDX-License-Identifier: GPL-3.0-or-later
"""Surface mesh from maps: geometry, orientation, discontinuities, islands, parts, errors."""

import numpy as np
import pytest
from geometry_fixtures import intrinsics, make_maps, plane_maps, sphere_maps

from sapiens_blender.core.geometry import surface
from sapiens_blender.core.geometry.types import GeometryError
from sapiens_blender.core.maps.goliath import PART_NAMES_SAPIENS2


def face_normals(mesh):
    v = mesh.vertices.astype(np.float64)
    f = mesh.faces
    return np.cross(v[f[:, 1]] - v[f[:, 0]], v[f[:, 2]] - v[f[:, 0]])


def test_plane_gives_a_full_grid_facing_the_camera():
    maps = plane_maps(z=2.0)
    mesh = surface.build_surface_mesh(maps, 1)
    n_pix = int((maps.mask == 1).sum())
    assert len(mesh.vertices) == n_pix
    assert len(mesh.faces) == 2 * (16 - 1) * (24 - 1)
    assert np.allclose(mesh.vertices[:, 2], 2.0)
    assert (face_normals(mesh)[:, 2] < 0).all()  # towards the camera (OpenCV z forward)
    assert mesh.faces.dtype == np.int32 and mesh.vertices.dtype == np.float32
    assert mesh.uv.min() >= 0 and mesh.uv.max() <= 1
    # v is up: the top image row has the largest v.
    top = mesh.pixel[:, 0] == mesh.pixel[:, 0].min()
    assert mesh.uv[top, 1].min() > mesh.uv[~top, 1].max()


def test_vertices_are_exact_unprojections_of_their_pixels():
    maps = sphere_maps()
    mesh = surface.build_surface_mesh(maps, 1)
    c = np.array([0.0, 0.0, 2.5])
    assert np.abs(np.linalg.norm(mesh.vertices - c, axis=1) - 0.5).max() < 1e-5
    uv = surface.reproject(mesh.vertices, maps.intrinsics)
    assert np.abs(uv - (mesh.pixel[:, ::-1] + 0.5)).max() < 1e-3


def test_stride_subsamples_the_grid():
    maps = sphere_maps(h=64, w=80)
    full = surface.build_surface_mesh(maps, 1)
    half = surface.build_surface_mesh(maps, 1, stride=2)
    assert (half.pixel % 2 == 0).all()
    assert 0.2 * len(full.vertices) < len(half.vertices) < 0.3 * len(full.vertices)
    with pytest.raises(GeometryError):
        surface.build_surface_mesh(maps, 1, stride=0)


def test_no_triangle_bridges_a_depth_discontinuity():
    h, w = 20, 30
    depth = np.full((h, w), 3.0)
    depth[:, 15:] = 2.0  # a step of 1 m between two flat halves
    mask = np.ones((h, w), np.uint8)
    mesh = surface.build_surface_mesh(make_maps(depth, mask), 1, min_island=1)
    z = mesh.vertices[mesh.faces][:, :, 2]
    assert (z.max(axis=1) - z.min(axis=1) < 1e-6).all()
    assert mesh.report["triangles_dropped_at_depth_jumps"] == 2 * (h - 1)
    # A steep but continuous slope (45 deg) is kept whole.
    slope = 2.0 + 0.005 * np.arange(w)[None, :].repeat(h, 0)
    mesh = surface.build_surface_mesh(make_maps(slope, mask), 1)
    assert len(mesh.faces) == 2 * (h - 1) * (w - 1)


def test_small_islands_are_removed_and_reported():
    mask = np.zeros((40, 40), np.uint8)
    mask[5:35, 5:25] = 1
    mask[10:12, 30:32] = 1  # a 4-pixel speck
    mesh = surface.build_surface_mesh(make_maps(np.full((40, 40), 2.0), mask), 1)
    assert mesh.pixel[:, 1].max() < 25
    assert mesh.report["islands_removed"] == 1
    assert mesh.report["island_vertices_removed"] == 4


def test_nan_depth_and_other_people_are_excluded():
    depth = np.full((20, 20), 2.0)
    mask = np.ones((20, 20), np.uint8)
    mask[:, 10:] = 2
    maps = make_maps(depth, mask)
    maps.depth[5, 5] = np.nan
    mesh = surface.build_surface_mesh(maps, 1)
    assert (mesh.pixel[:, 1] < 10).all()
    assert not ((mesh.pixel[:, 0] == 5) & (mesh.pixel[:, 1] == 5)).any()
    assert mesh.report["masked_pixels_without_depth"] == 1


def test_pointmap_depth_is_used_and_its_disagreement_reported():
    maps = plane_maps(z=2.0)
    pm = np.full(maps.depth.shape + (3,), np.nan, np.float32)
    pm[..., 2] = 2.5
    maps.pointmap = pm  # XY unknown: vertices still come from the pixel rays
    mesh = surface.build_surface_mesh(maps, 1)
    assert np.allclose(mesh.vertices[:, 2], 2.5)
    assert np.isnan(mesh.report["pointmap_reprojection_px_max"])


def test_unknown_person_and_empty_depth_raise_clear_errors():
    maps = plane_maps()
    with pytest.raises(GeometryError, match="person 3"):
        surface.build_surface_mesh(maps, 3)
    maps.depth[:] = np.nan
    with pytest.raises(GeometryError, match="no usable depth"):
        surface.build_surface_mesh(maps, 1)


def test_face_parts_take_the_majority_and_vertex_parts_their_pixel():
    h, w = 10, 12
    parts = np.full((h, w), PART_NAMES_SAPIENS2.index("Torso"), np.uint8)
    parts[:, 6:] = PART_NAMES_SAPIENS2.index("Left_Hand")
    parts[0, 0] = 0  # a background label inside the mask never wins
    maps = make_maps(np.full((h, w), 2.0), np.ones((h, w), np.uint8), parts=parts)
    mesh = surface.build_surface_mesh(maps, 1)
    hand = PART_NAMES_SAPIENS2.index("Left_Hand")
    centre_col = mesh.pixel[mesh.faces].mean(axis=1)[:, 1]
    assert (mesh.face_parts[centre_col > 6.5] == hand).all()
    assert (mesh.face_parts[centre_col < 4.5] == PART_NAMES_SAPIENS2.index("Torso")).all()
    assert (mesh.face_parts > 0).all()
    assert (mesh.vertex_parts == np.where(maps.parts[mesh.pixel[:, 0], mesh.pixel[:, 1]] == 0,
                                          mesh.vertex_parts, maps.parts[mesh.pixel[:, 0], mesh.pixel[:, 1]])).all()
    assert mesh.vertex_parts[(mesh.pixel[:, 0] == 0) & (mesh.pixel[:, 1] == 0)][0] > 0


def test_stride_parts_vote_over_the_block():
    h, w = 9, 9
    parts = np.full((h, w), PART_NAMES_SAPIENS2.index("Torso"), np.uint8)
    parts[0:4, 0:4] = PART_NAMES_SAPIENS2.index("Hair")
    parts[0, 0] = PART_NAMES_SAPIENS2.index("Torso")  # the corner alone disagrees with its block
    maps = make_maps(np.full((h, w), 2.0), np.ones((h, w), np.uint8), parts=parts, k=intrinsics(h, w, 20))
    mesh = surface.build_surface_mesh(maps, 1, stride=4, min_island=1)
    first_quad = (mesh.pixel[mesh.faces].max(axis=1) <= 4).all(axis=1)
    assert (mesh.face_parts[first_quad] == PART_NAMES_SAPIENS2.index("Hair")).all()


def test_erosion_drops_the_silhouette_rim():
    maps = plane_maps()
    full = surface.build_surface_mesh(maps, 1)
    thin = surface.build_surface_mesh(maps, 1, erode_px=1)
    assert len(thin.vertices) == (16 - 2) * (24 - 2) and len(full.vertices) == 16 * 24
    assert thin.report["eroded_px"] == 1
    with pytest.raises(GeometryError):
        surface.build_surface_mesh(maps, 1, erode_px=-1)


def test_a_person_too_thin_for_triangles_is_a_clear_error():
    mask = np.zeros((20, 20), np.uint8)
    mask[5:15, 10] = 1  # a one-pixel-wide line: no 2x2 block
    with pytest.raises(GeometryError, match="no surface left"):
        surface.build_surface_mesh(make_maps(np.full((20, 20), 2.0), mask), 1)


def test_unproject_takes_a_point_list_or_a_whole_depth_map():
    """One depth -> 3D for both: pixel centres (u + 0.5, v + 0.5), the same numbers either way."""
    k = np.array([[100, 0, 2.0], [0, 100, 1.0], [0, 0, 1]], np.float32)
    depth = np.arange(8, dtype=np.float32).reshape(2, 4) + 1.0
    grid = surface.unproject(np.arange(2)[:, None], np.arange(4)[None, :], depth, k)
    assert grid.shape == (2, 4, 3)
    # pixel (row 0, col 1) has centre u=1.5, v=0.5
    np.testing.assert_allclose(grid[0, 1], [(1.5 - 2) * 2 / 100, (0.5 - 1) * 2 / 100, 2.0])
    rows, cols = np.nonzero(depth > 0)
    np.testing.assert_array_equal(surface.unproject(rows, cols, depth[rows, cols], k), grid.reshape(-1, 3))
