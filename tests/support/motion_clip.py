# SPDX-License-Identifier: GPL-3.0-or-later
"""Ground-truth clips: an anny body moving smoothly, ray-cast per frame into maps, then spoiled
with the independent per-frame noise a per-frame analysis has (keypoints ~2 px, depth ~5 mm
per pixel plus a per-frame depth offset of ~5 mm). Test-only code (anny, trimesh)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from scenes import pose_body, render

# The 12 limb joints anny regresses at joint centres, scored against the animation.
SCORED = ("left_shoulder", "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist",
          "left_hip", "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle")


@dataclass
class MotionClip:
    maps: list  # noisy Maps per frame
    truth: list  # per frame {joint name: xyz} (camera frame)
    fps: float


def motion_pose(t: float) -> tuple[dict, float, tuple]:
    """Bone rotations, yaw and position at time ``t`` in [0, 1] (smooth in t)."""
    s, c = np.sin(2 * np.pi * t), np.cos(2 * np.pi * t)
    pose = {
        "upperarm01.L": ([0, 1, 0], -30 - 35 * (1 - c) / 2),
        "lowerarm01.L": ([1, 0, 0], -20 - 50 * (1 + s) / 2),
        "upperarm01.R": ([1, 0, 0], -25 * (1 - c) / 2),
        "lowerarm01.R": ([1, 0, 0], -30),
        "upperleg01.L": ([1, 0, 0], -15 * (1 - c) / 2),
        "lowerleg01.L": ([1, 0, 0], 30 * (1 - c) / 2),
        "lowerleg01.R": ([1, 0, 0], 10 + 10 * s),
    }
    yaw = 15.0 * s
    position = (-0.2 + 0.4 * t, 0.02 * s, 3.5 + 0.15 * c)
    return pose, yaw, position


def make_clip(frames: int = 48, size=(160, 120), focal: float = 220.0, fps: float = 25.0,
              keypoint_px: float = 2.0, depth_m: float = 0.005, seed: int = 0) -> MotionClip:
    rng = np.random.default_rng(seed)
    maps, truth = [], []
    for i in range(frames):
        pose, yaw, position = motion_pose(i / frames)
        body = pose_body(pose, "average", yaw, position)
        scene = render([body], size, focal=focal)
        m = scene.maps
        kp = m.keypoints.copy()
        seen = kp[..., 2] > 0
        kp[..., :2] += np.where(seen[..., None], rng.normal(0.0, keypoint_px, kp[..., :2].shape), 0.0)
        depth = m.depth + rng.normal(0.0, depth_m, m.depth.shape).astype(np.float32) \
            + np.float32(rng.normal(0.0, depth_m))
        m.keypoints, m.depth = kp.astype(np.float32), depth.astype(np.float32)
        m.pointmap = None
        maps.append(m.validate())
        truth.append(dict(body.joints))
    return MotionClip(maps, truth, fps)


def score(joints: np.ndarray, names, truth: list) -> dict:
    """MPJPE (mm) and acceleration error (mm/frame^2) over the SCORED joints.

    ``joints`` [T,J,3] in ``names`` order, one row per clip frame."""
    idx = [list(names).index(n) for n in SCORED]
    pred = joints[:, idx]
    gt = np.array([[f[n] for n in SCORED] for f in truth])
    err = np.linalg.norm(pred - gt, axis=-1)
    acc = np.linalg.norm(np.diff(pred, 2, axis=0) - np.diff(gt, 2, axis=0), axis=-1)
    return {"mpjpe_mm": 1000 * float(err.mean()), "accel_mm": 1000 * float(acc.mean())}
