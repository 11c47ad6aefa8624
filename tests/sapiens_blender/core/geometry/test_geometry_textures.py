# SPDX-License-Identifier: GPL-3.0-or-later
"""Normal textures, connected components, silhouette measures, closed body, part weights."""

import numpy as np
import pytest
from geometry_fixtures import K, make_maps, sphere_maps, standing

from sapiens_blender.core.geometry import normals, surface
from sapiens_blender.core.geometry.closed import close_body
from sapiens_blender.core.geometry.components import connected_components
from sapiens_blender.core.geometry.joints_fill import fill_and_derive
from sapiens_blender.core.geometry.silhouette import distance_transform, widths_across
from sapiens_blender.core.geometry.skeleton import build_skeleton
from sapiens_blender.core.geometry.types import camera_to_blender
from sapiens_blender.core.geometry.weights import part_based_weights
from sapiens_blender.core.maps.goliath import PART_NAMES_SAPIENS2


def angle_deg(a, b):
    return np.degrees(np.arccos(np.clip(np.einsum("ij,ij->i", a, b), -1, 1)))


def test_camera_to_blender_is_a_proper_rotation():
    cam = np.array([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0]])
    # x right -> +X, y down -> -Z (Blender up is +Z), z forward -> +Y
    assert np.allclose(camera_to_blender(cam), [[1, 0, 0], [0, 0, -1], [0, 1, 0]])


def test_object_space_map_rotates_and_masks_the_normals():
    maps = sphere_maps()
    obj = normals.object_space_normal_map(maps, 1)
    on = maps.mask == 1
    assert np.isnan(obj[~on]).all() and np.isfinite(obj[on]).all()
    assert np.allclose(np.linalg.norm(obj[on], axis=1), 1, atol=1e-5)
    centre = obj[maps.height // 2, maps.width // 2]
    assert np.allclose(centre, [0, -1, 0], atol=0.05)  # facing the lens: Blender -Y
    top = obj[np.nonzero(on.any(axis=1))[0][0] + 1, maps.width // 2]
    assert top[2] > 0.5  # the top of the sphere faces up (+Z)
    tex = normals.encode_normal_texture(obj)
    assert tex.min() >= 0 and tex.max() <= 1
    assert np.allclose(tex[0, 0], [0.5, 0.0, 0.5])  # no normal: encoded as facing the camera


def test_mesh_normals_agree_with_the_normal_map():
    maps = sphere_maps(h=120, w=160)
    mesh = surface.build_surface_mesh(maps, 1)
    n, t, sign = normals.tangent_frames(mesh)
    obj = normals.object_space_normal_map(maps, 1)[mesh.pixel[:, 0], mesh.pixel[:, 1]]
    err = angle_deg(n, obj.astype(np.float64))
    assert np.median(err) < 1.0
    assert np.allclose(np.einsum("ij,ij->i", n, t), 0, atol=1e-9)
    assert (sign == 1).all()  # UV v up, u right: a right-handed frame


def test_tangent_space_map_decodes_back_to_object_space():
    maps = sphere_maps()
    for stride in (1, 2):
        mesh = surface.build_surface_mesh(maps, 1, stride=stride)
        tmap = normals.tangent_space_normal_map(mesh, maps)
        obj = normals.object_space_normal_map(maps, 1)
        n, t, sign = normals.tangent_frames(mesh)
        r, c = mesh.pixel[:, 0], mesh.pixel[:, 1]
        decoded = normals.decode_tangent_normals(tmap[r, c], n, t, sign)
        assert angle_deg(decoded, obj[r, c].astype(np.float64)).max() < 0.05  # float32 map storage
        # Where the map agrees with the geometry, the tangent-space normal is close to +Z.
        assert np.median(tmap[r, c][:, 2]) > 0.99
    # Pixels between stride-2 vertices use their block's vertex frame: covered too.
    assert np.isfinite(tmap[maps.mask == 1]).mean() > 0.9


def test_tangent_sign_flips_with_mirrored_uvs():
    maps = sphere_maps()
    mesh = surface.build_surface_mesh(maps, 1)
    mesh.uv[:, 0] = 1 - mesh.uv[:, 0]
    _, _, sign = normals.tangent_frames(mesh)
    assert (sign == -1).all()


def test_connected_components_match_a_reference_labelling():
    scipy_graph = pytest.importorskip("scipy.sparse.csgraph")
    from scipy.sparse import coo_matrix

    rng = np.random.default_rng(0)
    n = 3000
    edges = rng.integers(0, n, size=(2200, 2))
    labels = connected_components(n, edges)
    count, ref = scipy_graph.connected_components(coo_matrix((np.ones(len(edges)), edges.T), shape=(n, n)),
                                                  directed=False)
    assert len(np.unique(labels)) == count
    # Same partition: labels map one-to-one onto the reference's.
    pairs = np.unique(np.stack([labels, ref], 1), axis=0)
    assert len(pairs) == count
    assert (labels <= np.arange(n)).all()  # label = smallest node index of the component
    assert connected_components(5, np.zeros((0, 2))).tolist() == [0, 1, 2, 3, 4]


def test_distance_transform_is_exact():
    ndimage = pytest.importorskip("scipy.ndimage")
    rng = np.random.default_rng(1)
    inside = np.zeros((50, 70), bool)
    inside[5:45, 8:60] = True
    inside &= rng.random(inside.shape) > 0.02
    ours = distance_transform(inside)
    ref = ndimage.distance_transform_edt(np.pad(inside, 1))[1:-1, 1:-1]  # border = outside
    assert np.allclose(ours, ref)


def test_width_across_a_bar():
    inside = np.zeros((40, 60), bool)
    inside[10:20, :] = True  # a horizontal bar 10 px thick
    w = widths_across(inside, np.array([[30.0, 15.0], [30.0, 30.0]]), np.array([[1.0, 0.0], [1.0, 0.0]]), 40)
    assert abs(w[0] - 10) <= 1.0 and w[1] == 0


def test_closed_sphere_cap_is_watertight_with_outward_normals():
    maps = sphere_maps(h=60, w=80)
    mesh = surface.build_surface_mesh(maps, 1)
    closed = close_body(mesh, maps)
    f = closed.faces.astype(np.int64)
    n = len(closed.vertices)
    a, b = f.ravel(), f[:, [1, 2, 0]].ravel()
    key = a * n + b
    assert len(np.unique(key)) == len(key) and np.isin(b * n + a, key).all()
    v = closed.vertices.astype(np.float64)
    volume = np.einsum("ij,ij->i", v[f[:, 0]], np.cross(v[f[:, 1]], v[f[:, 2]])).sum() / 6
    # A sphere's silhouette inflated with round sections: close to the true 4/3 pi r^3.
    assert 0.7 < volume / (4 / 3 * np.pi * 0.5 ** 3) < 1.3
    half = len(closed.vertices) // 2
    assert (closed.pixel[half:] == -1).all() and (closed.pixel[:half] >= 0).all()
    assert len(closed.face_parts) == len(closed.faces) and closed.report["closed"]


def test_part_weights_cover_every_vertex_and_respect_parts():
    h, w = 40, 30
    parts = np.full((h, w), PART_NAMES_SAPIENS2.index("Torso"), np.uint8)
    parts[:, :8] = PART_NAMES_SAPIENS2.index("Right_Hand")
    maps = make_maps(np.full((h, w), 3.0), np.ones((h, w), np.uint8), parts=parts)
    mesh = surface.build_surface_mesh(maps, 1)
    sk = build_skeleton(fill_and_derive(standing(), {}, K))
    vw = part_based_weights(mesh, sk, maps.part_names)
    assert vw.weights.shape == (len(mesh.vertices), 4)
    assert np.allclose(vw.weights.sum(axis=1), 1, atol=1e-5)
    hand = mesh.vertex_parts == PART_NAMES_SAPIENS2.index("Right_Hand")
    used = {vw.bone_names[i] for i in np.unique(vw.indices[hand][vw.weights[hand] > 0])}
    assert used <= {"hand.R", "forearm.R"}
    rows, weights = vw.group("hand.R")
    assert len(rows) > 0 and (weights > 0).all()


def test_tangent_map_of_a_closed_body_uses_front_vertices_only():
    maps = sphere_maps()
    closed = close_body(surface.build_surface_mesh(maps, 1), maps)
    tmap = normals.tangent_space_normal_map(closed, maps)
    assert np.isnan(tmap[-1, -1]).all()  # a background corner stays empty
    on = maps.mask == 1
    assert np.isfinite(tmap[on]).mean() > 0.95


def test_unknown_normals_come_from_the_depth_surface():
    maps = sphere_maps(h=120, w=160)
    truth = normals.object_space_normal_map(maps, 1)
    maps.normal[:, :80] = np.nan  # the normal model failed on the left half
    filled = normals.object_space_normal_map(maps, 1)
    left = (maps.mask == 1) & (np.arange(160)[None, :] < 80)
    assert np.isfinite(filled[left]).all()
    err = angle_deg(filled[left].astype(np.float64), truth[left].astype(np.float64))
    assert np.median(err) < 1.0 and np.percentile(err, 95) < 10.0
    assert np.isnan(normals.object_space_normal_map(maps, 1, fill_from_depth=False)[left]).all()
