# SPDX-License-Identifier: GPL-3.0-or-later
"""A small valid Maps (6x8 pixels, one person, random normals) for the maps and file-input tests."""

import numpy as np

from sapiens_blender.core.maps import goliath
from sapiens_blender.core.maps.canonical import Maps


def make_maps(h=6, w=8, people=1):
    rng = np.random.default_rng(0)
    normal = rng.normal(size=(h, w, 3)).astype(np.float32)
    normal /= np.linalg.norm(normal, axis=-1, keepdims=True)
    mask = np.zeros((h, w), np.uint8)
    mask[1:5, 2:6] = 1
    kp = np.zeros((people, 308, 3), np.float32)
    kp[..., 2] = 0.5
    return Maps(
        image=rng.integers(0, 255, (h, w, 3), dtype=np.uint8),
        mask=mask,
        parts=(mask * 22).astype(np.uint8),
        part_names=goliath.PART_NAMES_SAPIENS2,
        normal=normal,
        depth=np.full((h, w), 2.0, np.float32),
        intrinsics=np.array([[10, 0, w / 2], [0, 10, h / 2], [0, 0, 1]], np.float32),
        keypoints=kp,
        source="test",
    ).validate()
