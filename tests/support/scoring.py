# SPDX-License-Identifier: GPL-3.0-or-later
"""Scores of a fitted body against the ground-truth body of a scene (test-only: trimesh)."""

from __future__ import annotations

import numpy as np

LIMB_JOINTS = ("left_shoulder", "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist",
               "left_hip", "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle")


def _mesh(v, f):
    import trimesh

    return trimesh.Trimesh(np.asarray(v, np.float64), np.asarray(f), process=False)


def hidden_and_visible(truth_vertices, truth_faces, samples: np.ndarray):
    """Split surface samples of the truth into those the camera (at the origin) sees and not."""
    from trimesh.ray.ray_pyembree import RayMeshIntersector

    mesh = _mesh(truth_vertices, truth_faces)
    dirs = samples / np.linalg.norm(samples, axis=1, keepdims=True)
    _tri, ray, loc = RayMeshIntersector(mesh).intersects_id(np.zeros_like(dirs), dirs, multiple_hits=False,
                                                            return_locations=True)
    first = np.full(len(samples), np.inf)
    first[ray] = np.linalg.norm(loc, axis=1)
    visible = first >= np.linalg.norm(samples, axis=1) - 2e-3
    return visible


def surface_distance(points, vertices, faces) -> np.ndarray:
    """Distance of each point to the triangle surface (not to its vertices)."""
    import trimesh

    _c, dist, _t = trimesh.proximity.closest_point(_mesh(vertices, faces), np.asarray(points, np.float64))
    return dist


def score_body(fit_vertices, faces, truth, seed: int = 0, n: int = 4000) -> dict:
    """Hidden-side and whole-body distances (m) and Chamfer (% of height) of one fitted body."""
    from scenes import sample_surface

    pts = sample_surface(truth.vertices, truth.faces, points_per_m2=n / 1.8, seed=seed)
    visible = hidden_and_visible(truth.vertices, truth.faces, pts)
    d_truth_to_fit = surface_distance(pts, fit_vertices, faces)
    fit_pts = sample_surface(fit_vertices, faces, points_per_m2=n / 1.8, seed=seed + 1)
    d_fit_to_truth = surface_distance(fit_pts, truth.vertices, truth.faces)
    chamfer = 0.5 * (d_truth_to_fit.mean() + d_fit_to_truth.mean())
    return {"hidden_mean": float(d_truth_to_fit[~visible].mean()),
            "visible_mean": float(d_truth_to_fit[visible].mean()),
            "chamfer_pct": float(100 * chamfer / truth.height)}


def joint_errors(fit_joints: dict, truth_joints: dict, names=LIMB_JOINTS) -> np.ndarray:
    return np.array([np.linalg.norm(np.asarray(fit_joints[n]) - truth_joints[n]) for n in names])
