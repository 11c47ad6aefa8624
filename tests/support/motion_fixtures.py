# SPDX-License-Identifier: GPL-3.0-or-later
"""Synthetic joint trajectories for the motion tests: the standing fixture person, waving and
stepping sideways, in MOTION_JOINTS order (camera frame)."""

from __future__ import annotations

import numpy as np

from sapiens_blender.core.geometry.joints_fill import fill_and_derive
from sapiens_blender.core.motion.rig import MOTION_JOINTS

from geometry_fixtures import K, standing


def standing_motion_joints() -> np.ndarray:
    joints = fill_and_derive(standing(), {}, K)
    return np.array([joints[n].xyz for n in MOTION_JOINTS])


def moving_person(frames: int = 40, shift=(0.0, 0.0, 0.0), wave: float = 1.0) -> np.ndarray:
    """[T,J,3]: the person walks 0.3 m sideways, the left forearm waves, the body turns a little."""
    base = standing_motion_joints()
    out = np.empty((frames, len(MOTION_JOINTS), 3))
    idx = {n: i for i, n in enumerate(MOTION_JOINTS)}
    for t in range(frames):
        s = np.sin(2 * np.pi * t / frames)
        j = base.copy()
        elbow = j[idx["left_elbow"]]
        for name in ("left_wrist", "left_hand_end"):  # forearm swings up to 60 deg about the view axis
            a = np.radians(60) * wave * (1 - np.cos(2 * np.pi * t / frames)) / 2
            rot = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
            j[idx[name]] = elbow + rot @ (j[idx[name]] - elbow)
        yaw = np.radians(10) * s  # about the vertical (camera y) through the pelvis
        rot = np.array([[np.cos(yaw), 0, np.sin(yaw)], [0, 1, 0], [-np.sin(yaw), 0, np.cos(yaw)]])
        centre = j[idx["pelvis"]].copy()
        j = (j - centre) @ rot.T + centre
        out[t] = j + np.array([0.3 * t / frames, 0.0, 0.0]) + np.asarray(shift)
    return out


def image_box(joints: np.ndarray) -> np.ndarray:
    """A detection's image box for ``joints`` [J,3] (x, y in decimetres as pixels)."""
    return np.array([joints[:, 0].min() * 100, joints[:, 1].min() * 100,
                     joints[:, 0].max() * 100, joints[:, 1].max() * 100])
