# SPDX-License-Identifier: GPL-3.0-or-later
"""Knees and elbows do not bend backwards: where each hinge is straight, measured on anny.

A hinge's rotation about its own X axis bends it (positive: flexed, for all four). anny's rest
pose is not straight at either hinge: the knees are bent ~8 degrees, the elbows ~38 (its arms
hang forward). The limit is the straight angle less a little hyperextension, so it must be
measured per hinge: one shared number (once -0.15 rad, the knees' straight angle) held every
straight arm bent by 30 degrees (elbows and wrists 2 cm off on a straight arm, 5 cm raised).
"""

from __future__ import annotations

import weakref

import numpy as np
import torch

from .bones import BODY_BONES, HINGES
from .correspondences import JOINT_NAMES

# The joints that make each hinge's angle, by bone stem; and how far past straight it may go
# (degrees): a few, as many people's do. The floors are the average body's: a knee's straight
# turn moves with the shape (-12 degrees on a child, -5 on a heavy body, -8 average), an elbow's
# by about 2 (tests/fit/test_fit_limits.py).
_HINGE_JOINTS = {"lowerleg01": ("hip", "knee", "ankle"), "lowerarm01": ("shoulder", "elbow", "wrist")}
_SLACK_DEG = {"lowerleg01": 3.0, "lowerarm01": 5.0}
_COARSE_DEG, _FINE_DEG = np.arange(-80.0, 20.01, 2.0), np.arange(-2.0, 2.01, 0.1)
_FLOORS: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()  # body model -> its floors


def hinge_rows() -> list[int]:
    """Rows of the hinges among the fit's free bones (BODY_BONES)."""
    return [BODY_BONES.index(b) for b in HINGES]


def hinge_floors(body) -> torch.Tensor:
    """[len(HINGES)] the least X rotation (rad) of each hinge (body.dtype, on its device): its
    straight turn on anny's average body less the slack; measured once per body model. The turn
    at which a hinge's three joints line up best is straight: a coarse sweep, then a fine one
    around its best, each one batched skeleton pass for the four hinges at once."""
    cached = _FLOORS.get(body)
    if cached is None:
        best = np.zeros(len(HINGES))
        for sweep in (_COARSE_DEG, _FINE_DEG):
            turns = best[None] + np.radians(sweep)[:, None]  # [N, hinges]
            best = turns[np.argmin(_hinge_cosines(body, turns), 0), np.arange(len(HINGES))]
        slack = np.radians([_SLACK_DEG[b.split(".")[0]] for b in HINGES])
        cached = _FLOORS[body] = torch.as_tensor(best - slack, dtype=body.dtype, device=body.device)
    return cached


def _hinge_cosines(body, turns: np.ndarray) -> np.ndarray:
    """[N, hinges] cosine of each hinge's angle (-1: straight) when turned by ``turns`` (rad)."""
    n = len(turns)
    rot = torch.zeros((n, len(body.bone_names), 3), dtype=body.dtype, device=body.device)
    rot[:, [body.bone_index[b] for b in HINGES], 0] = torch.as_tensor(turns, dtype=body.dtype, device=body.device)
    phen = torch.full((n, 6), 0.5, dtype=body.dtype, device=body.device)
    with torch.no_grad():
        return hinge_cosines(body.skeleton(phen, rot).joints.double().cpu().numpy())


def hinge_cosines(joints: np.ndarray) -> np.ndarray:
    """[N, hinges] cosine of each hinge's angle (-1: straight) of joints [N, J, 3] (JOINT_NAMES
    order)."""
    out = []
    for bone in HINGES:
        stem, side = bone.split(".")
        prefix = "left_" if side == "L" else "right_"
        a, b, c = (joints[:, JOINT_NAMES.index(prefix + j)] for j in _HINGE_JOINTS[stem])
        u, v = a - b, c - b
        out.append((u * v).sum(-1) / (np.linalg.norm(u, axis=-1) * np.linalg.norm(v, axis=-1)))
    return np.stack(out, -1)


def hinge_penalty(free: torch.Tensor, rows: torch.Tensor, floors: torch.Tensor) -> torch.Tensor:
    """[...]: a hinge bent backwards past its floor costs 20 per rad^2 (``free`` [..., F, 3] the
    free bones' rotations)."""
    return 20.0 * (torch.relu(floors - free[..., rows, 0]) ** 2).sum(-1)
