# SPDX-License-Identifier: GPL-3.0-or-later
"""Body-part labels per face (majority of the pixels it covers) and per vertex."""

from __future__ import annotations

import numpy as np

from ..maps.canonical import Maps


def _majority(groups: np.ndarray, labels: np.ndarray, weights: np.ndarray, n_groups: int, n_classes: int):
    """Most voted non-background label per group (0 when a group has no vote)."""
    votes = np.bincount(groups * n_classes + labels, weights=weights, minlength=n_groups * n_classes)
    votes = votes.reshape(n_groups, n_classes)
    votes[:, 0] = 0.0  # background never wins over a body part...
    best = votes.argmax(axis=1)
    best[votes.max(axis=1) <= 0] = 0  # ...and is the answer only when nothing else voted
    return best.astype(np.uint8)


def face_parts_from_grid(maps: Maps, person_id: int, rows, cols, quad_of_tri, n_quad_cols: int, stride: int):
    """Per triangle: the majority part over the person's pixels of its grid block (corners
    included; at most 6x6 evenly spread samples for large strides). Ties go to the first."""
    if len(quad_of_tri) == 0:
        return np.zeros(0, np.uint8)
    n_quad_rows = int(quad_of_tri.max()) // n_quad_cols + 1
    h, w = maps.height, maps.width
    offsets = np.unique(np.round(np.linspace(0, stride, min(stride + 1, 6))).astype(np.int64))
    r0 = rows[:n_quad_rows]
    c0 = cols[:n_quad_cols]
    samples = []
    for dr in offsets:
        pr = np.minimum(r0 + dr, h - 1)[:, None]
        for dc in offsets:
            pc = np.minimum(c0 + dc, w - 1)[None, :]
            lab = maps.parts[pr, pc]
            samples.append(np.where(maps.mask[pr, pc] == person_id, lab, 0))
    best = np.zeros(samples[0].shape, np.uint8)
    best_count = np.zeros(samples[0].shape, np.int16)
    for i, li in enumerate(samples):  # pairwise votes: len(samples)^2 grid passes, no bincount
        count = np.zeros(li.shape, np.int16)
        for lj in samples:
            count += li == lj
        count[li == 0] = 0
        better = count > best_count
        best = np.where(better, li, best)
        best_count = np.where(better, count, best_count)
    return best.ravel()[quad_of_tri]


def vertex_parts_from_faces(pixel_labels: np.ndarray, faces: np.ndarray, face_labels: np.ndarray, n_vertices: int):
    """Per vertex: its pixel's label, or (background pixel) the largest label among its faces."""
    out = np.asarray(pixel_labels, np.uint8).copy()
    if len(faces):
        from_faces = np.zeros(n_vertices, np.uint8)
        np.maximum.at(from_faces, faces.ravel(), np.repeat(face_labels, 3))
        out = np.where(out == 0, from_faces, out)
    return out


def face_parts(mesh, maps: Maps) -> np.ndarray:
    """Majority label of each face's vertices that have a pixel (any mesh, e.g. a closed body)."""
    labels = np.zeros(len(mesh.vertices), np.int64)
    has = mesh.pixel[:, 0] >= 0
    labels[has] = maps.parts[mesh.pixel[has, 0], mesh.pixel[has, 1]]
    n_classes = max(len(maps.part_names), int(labels.max(initial=0)) + 1)
    groups = np.repeat(np.arange(len(mesh.faces)), 3)
    vote = has[mesh.faces.ravel()].astype(np.float64)
    return _majority(groups, labels[mesh.faces.ravel()], vote, len(mesh.faces), n_classes)


def vertex_parts(mesh, maps: Maps) -> np.ndarray:
    """Per vertex label: its pixel's part, else the largest label among its faces."""
    labels = np.zeros(len(mesh.vertices), np.uint8)
    has = mesh.pixel[:, 0] >= 0
    labels[has] = maps.parts[mesh.pixel[has, 0], mesh.pixel[has, 1]]
    return vertex_parts_from_faces(labels, mesh.faces, face_parts(mesh, maps), len(mesh.vertices))
