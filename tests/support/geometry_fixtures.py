# SPDX-License-Identifier: GPL-3.0-or-later
"""Small analytic scenes for the geometry unit tests (no anny): exact depth, normals, masks."""

import numpy as np

from sapiens_blender.core.geometry.types import Joint
from sapiens_blender.core.maps.goliath import PART_NAMES_SAPIENS2
from sapiens_blender.core.maps.canonical import Maps


def intrinsics(h, w, f):
    return np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1]], np.float32)


def rays(h, w, k):
    rr, cc = np.mgrid[0:h, 0:w]
    return np.stack([(cc + 0.5 - k[0, 2]) / k[0, 0], (rr + 0.5 - k[1, 2]) / k[1, 1], np.ones((h, w))], -1)


def make_maps(depth, mask, normal=None, parts=None, k=None, keypoints=None, pointmap=None):
    h, w = depth.shape
    k = intrinsics(h, w, 1.2 * w) if k is None else k
    if normal is None:
        normal = np.where(mask[..., None] > 0, np.array([0, 0, -1.0], np.float32), np.nan)
    if parts is None:
        parts = np.where(mask > 0, PART_NAMES_SAPIENS2.index("Torso"), 0)
    if keypoints is None:
        keypoints = np.zeros((max(int(mask.max()), 1), 308, 3), np.float32)
    return Maps(image=np.zeros((h, w, 3), np.uint8), mask=mask.astype(np.uint8), parts=parts.astype(np.uint8),
                part_names=PART_NAMES_SAPIENS2, normal=np.asarray(normal, np.float32),
                depth=np.where(mask > 0, depth, np.nan).astype(np.float32), intrinsics=k,
                keypoints=keypoints, pointmap=pointmap).validate()


def sphere_maps(h=60, w=80, radius=0.5, centre=(0.0, 0.0, 2.5), f=None):
    k = intrinsics(h, w, f or 1.2 * w)
    d = rays(h, w, k)
    d = d / np.linalg.norm(d, axis=-1, keepdims=True)
    c = np.asarray(centre)
    b = d @ c
    disc = b * b - (c @ c - radius * radius)
    hit = disc > 0
    t = b - np.sqrt(np.where(hit, disc, 0))
    p = d * t[..., None]
    n = np.where(hit[..., None], (p - c) / radius, np.nan)
    return make_maps(p[..., 2], hit.astype(np.uint8), normal=n, k=k)


def plane_maps(h=20, w=30, z=2.0):
    mask = np.zeros((h, w), np.uint8)
    mask[2:-2, 3:-3] = 1
    return make_maps(np.full((h, w), z), mask)


# A person facing the camera 3 m away (camera frame: x right, y down, z forward); the
# person's left is image right (+x).
STANDING = {
    "left_shoulder": (0.18, -0.45, 3.0), "right_shoulder": (-0.18, -0.45, 3.0),
    "left_elbow": (0.22, -0.18, 3.0), "right_elbow": (-0.22, -0.18, 3.0),
    "left_wrist": (0.24, 0.05, 2.95), "right_wrist": (-0.24, 0.05, 2.95),
    "left_hip": (0.1, 0.05, 3.0), "right_hip": (-0.1, 0.05, 3.0),
    "left_knee": (0.11, 0.45, 2.98), "right_knee": (-0.11, 0.45, 2.98),
    "left_ankle": (0.12, 0.85, 3.02), "right_ankle": (-0.12, 0.85, 3.02),
    "left_big_toe": (0.12, 0.9, 2.85), "right_big_toe": (-0.12, 0.9, 2.85),
    "nose": (0.0, -0.65, 2.9), "left_ear": (0.07, -0.63, 3.0), "right_ear": (-0.07, -0.63, 3.0),
    "neck": (0.0, -0.47, 3.0),
}
K = np.array([[500.0, 0, 160], [0, 500.0, 120], [0, 0, 1]])


def standing(drop=()):
    return {n: Joint(n, np.array(p, float)) for n, p in STANDING.items() if n not in drop}
