# SPDX-License-Identifier: GPL-3.0-or-later
"""Foot planting: a foot that stands still stays exactly still.

Per side, the foot's speed is the largest speed of its joints (ankle, ball, toe tip). Runs of at
least ``min_frames`` frames slower than ``speed`` (m/s) are contacts; during a contact every
foot joint holds its mean position over the run, and over ``blend`` frames on each side the
correction fades in and out so the foot never pops. The legs are then solved to reach the
planted ankle (``rig.two_bone_ik``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

FOOT_JOINTS = {side: (f"{side}_ankle", f"{side}_ball", f"{side}_toe_tip") for side in ("left", "right")}


@dataclass(frozen=True)
class PlantingOptions:
    speed: float = 0.15  # m/s: slower than this the foot is standing
    min_frames: int = 3
    blend: int = 3


def plant_feet(joints: np.ndarray, names, fps: float, options: PlantingOptions = PlantingOptions()
               ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Planted copy of joints [T,J,3] and, per side, the contact mask [T] (bool)."""
    joints = np.array(joints, np.float64)
    index = {n: i for i, n in enumerate(names)}
    contacts = {}
    for side, foot in FOOT_JOINTS.items():
        cols = [index[n] for n in foot if n in index]
        if not cols or len(joints) < options.min_frames:
            contacts[side] = np.zeros(len(joints), bool)
            continue
        pts = joints[:, cols]
        speed = np.zeros(len(joints))
        step = np.linalg.norm(np.diff(pts, axis=0), axis=-1).max(axis=-1) * fps
        speed[1:] = step
        speed[0] = step[0] if len(step) else 0.0
        still = speed < options.speed
        runs = _runs(still, options.min_frames)
        contact = np.zeros(len(joints), bool)
        offset = np.zeros_like(pts)
        weight = np.zeros(len(joints))
        for a, b in runs:
            contact[a:b] = True
            anchor = pts[a:b].mean(axis=0)
            offset[a:b] = anchor - pts[a:b]
            weight[a:b] = 1.0
            for k in range(1, options.blend + 1):  # fade the run's end corrections out
                w = 1.0 - k / (options.blend + 1)
                for t, edge in ((a - k, a), (b - 1 + k, b - 1)):
                    if 0 <= t < len(joints) and w > weight[t]:
                        weight[t] = w
                        offset[t] = anchor - pts[edge]
        joints[:, cols] = pts + weight[:, None, None] * offset
        contacts[side] = contact
    return joints, contacts


def _runs(mask: np.ndarray, min_len: int) -> list[tuple[int, int]]:
    edges = np.diff(np.concatenate([[0], mask.astype(np.int8), [0]]))
    starts, ends = np.flatnonzero(edges == 1), np.flatnonzero(edges == -1)
    return [(int(a), int(b)) for a, b in zip(starts, ends) if b - a >= min_len]
