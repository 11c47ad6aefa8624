# SPDX-License-Identifier: GPL-3.0-or-later
"""The alignment kernels on transforms known by construction."""

import numpy as np

from inference_server.fit.alignment import kabsch, rotation_between, similarity_onto


def _turn(axis, degrees):
    axis = np.asarray(axis, np.float64) / np.linalg.norm(axis)
    k = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    a = np.radians(degrees)
    return np.eye(3) + np.sin(a) * k + (1 - np.cos(a)) * k @ k


def test_kabsch_and_the_similarity_recover_a_known_motion():
    pts = np.random.default_rng(0).normal(size=(12, 3))
    r = _turn([1.0, 2.0, -0.5], 70.0)
    moved = pts @ r.T + [0.3, -1.0, 2.0]
    got_r, got_t = kabsch(pts, moved)
    np.testing.assert_allclose(got_r, r, atol=1e-12)
    np.testing.assert_allclose(got_t, [0.3, -1.0, 2.0], atol=1e-12)
    np.testing.assert_allclose(similarity_onto(pts, 2.5 * moved), 2.5 * moved, atol=1e-12)
    # A mirror image is not reached by a rotation: the similarity stays a proper one.
    mirrored = pts * [-1.0, 1.0, 1.0]
    assert np.abs(similarity_onto(pts, mirrored) - mirrored).max() > 0.1


def test_the_smallest_turn_between_two_directions():
    u, v = np.array([0.2, -0.4, 1.0]), np.array([0.0, 0.0, 3.0])
    r = rotation_between(u, v)
    np.testing.assert_allclose(r @ r.T, np.eye(3), atol=1e-12)
    np.testing.assert_allclose(r @ (u / np.linalg.norm(u)), [0.0, 0.0, 1.0], atol=1e-12)
    axis = np.cross(u, v)
    np.testing.assert_allclose(r @ axis, axis, atol=1e-12)  # no twist: the axis stays
    np.testing.assert_allclose(rotation_between(v, 2 * v), np.eye(3))
