# SPDX-License-Identifier: GPL-3.0-or-later
"""Per-frame pose sources: what each frame's maps say about each person's pose.

A pose source turns one frame's maps into :class:`tracking.Detection` objects (3D joints in
``MOTION_JOINTS`` order, an image box, and an optional ``payload``). The tracker, the smoother
and the joints file only use the joints, so any source plugs in:

- :class:`ReliefJoints` (here): joints lifted from the maps (``geometry.lift_joints``); the
  animation drives the *relief armature* built from them, or, after smoothing, the fitted body
  posed on them (``body_drive.py``).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np

from ..geometry import lift_joints
from ..maps.goliath import KEYPOINT_INDEX
from ..geometry.types import GeometryError
from ..maps.canonical import Maps
from .rig import MOTION_JOINTS
from .tracking import Detection


class PoseSource(Protocol):
    kind: str  # "relief armature" or "fitted body": says what the animation drives
    joint_names: tuple[str, ...]

    def detect(self, maps: Maps) -> list[Detection]: ...


class ReliefJoints:
    """Joints lifted from the maps, per person of the mask; people who cannot be lifted (no
    depth, too few keypoints) are skipped and counted in ``skipped``."""

    kind = "relief armature"
    joint_names = MOTION_JOINTS

    def __init__(self, min_score: float = 0.3):
        self.min_score = min_score
        self.skipped: list[tuple[int, str]] = []  # (person id, why), over all frames

    def detect(self, maps: Maps) -> list[Detection]:
        out = []
        for pid in maps.person_ids:
            try:
                joints = lift_joints(maps, pid, min_score=self.min_score)
            except GeometryError as exc:
                self.skipped.append((pid, str(exc)))
                continue
            xyz = np.full((len(MOTION_JOINTS), 3), np.nan)
            est = np.ones(len(MOTION_JOINTS), bool)
            conf = np.ones(len(MOTION_JOINTS))
            scores = maps.person_keypoints(pid)[:, 2]
            for i, name in enumerate(MOTION_JOINTS):
                if name in joints:
                    xyz[i] = joints[name].xyz
                    est[i] = joints[name].estimated
                if name in KEYPOINT_INDEX and not est[i]:  # a keypoint's score, for joints lifted from one
                    conf[i] = float(np.clip(scores[KEYPOINT_INDEX[name]], 0.05, 1.0))
            out.append(Detection(xyz, person_box(maps, pid), est, conf, payload={"person_id": pid}))
        return out


def person_box(maps: Maps, person_id: int) -> np.ndarray:
    """x0, y0, x1, y1 of the person's mask pixels."""
    rows = np.flatnonzero((maps.mask == person_id).any(axis=1))
    cols = np.flatnonzero((maps.mask == person_id).any(axis=0))
    if not len(rows):
        return np.zeros(4)
    return np.array([cols[0], rows[0], cols[-1] + 1, rows[-1] + 1], np.float64)
