# SPDX-License-Identifier: GPL-3.0-or-later
"""Variants of a ground-truth scene (scenes.py): clothing labels, a dressed body, and maps made
worse on purpose (noisy keypoints and depth, holes, dropped joints, a crop, relative or no
depth), as the fit and geometry tests and benchmarks/bench_fit.py meet them."""

from __future__ import annotations

import numpy as np
from scenes import Body

from sapiens_blender.core.maps.canonical import Maps
from sapiens_blender.core.maps.goliath import KEYPOINT_INDEX, PART_NAMES_SAPIENS2


def with_clothing(maps: Maps) -> Maps:
    """A copy whose part labels look like a clothed person's: torso and arms -> Upper_Clothing,
    legs -> Lower_Clothing (what Sapiens labels on a T-shirt and trousers)."""
    import copy

    out = copy.deepcopy(maps)
    names = PART_NAMES_SAPIENS2
    upper = [names.index(n) for n in ("Torso", "Left_Upper_Arm", "Right_Upper_Arm",
                                       "Left_Lower_Arm", "Right_Lower_Arm")]
    lower = [names.index(n) for n in ("Left_Upper_Leg", "Right_Upper_Leg", "Left_Lower_Leg", "Right_Lower_Leg")]
    out.parts[np.isin(maps.parts, upper)] = names.index("Upper_Clothing")
    out.parts[np.isin(maps.parts, lower)] = names.index("Lower_Clothing")
    return out


def dress(body: Body, upper: float = 0.015, lower: float = 0.02) -> Body:
    """A copy of ``body`` wearing clothes: torso and arms pushed out along the surface normal by
    ``upper`` metres, legs by ``lower`` (hands, feet, head bare), as a T-shirt and trousers."""
    import trimesh

    from sapiens_blender.core.maps.goliath import PART_NAMES_SAPIENS2 as names

    mesh = trimesh.Trimesh(body.vertices, body.faces, process=False)
    normals = np.asarray(mesh.vertex_normals)
    vclass = np.zeros(len(body.vertices), int)
    vclass[body.faces[:, 0]] = body.face_class
    vclass[body.faces[:, 1]] = body.face_class
    vclass[body.faces[:, 2]] = body.face_class
    up = [names.index(n) for n in ("Torso", "Left_Upper_Arm", "Right_Upper_Arm", "Left_Lower_Arm", "Right_Lower_Arm")]
    lo = [names.index(n) for n in ("Left_Upper_Leg", "Right_Upper_Leg", "Left_Lower_Leg", "Right_Lower_Leg")]
    offset = np.where(np.isin(vclass, up), upper, np.where(np.isin(vclass, lo), lower, 0.0))
    return Body(body.vertices + normals * offset[:, None], body.faces, body.face_class, body.joints, body.height)


def degrade(maps: Maps, *, keypoint_px: float = 0.0, depth_m: float = 0.0, holes: int = 0,
            drop: tuple = (), seed: int = 0) -> Maps:
    """A copy with what a real analysis has: keypoint noise (px), depth noise (m, along the
    ray), rectangular holes in depth, and keypoints that were not found (score 0)."""
    import copy

    rng = np.random.default_rng(seed)
    out = copy.deepcopy(maps)
    kp = out.keypoints
    seen = kp[..., 2] > 0
    kp[..., :2] += np.where(seen[..., None], rng.normal(0, keypoint_px, kp[..., :2].shape), 0).astype(np.float32)
    for name in drop:
        kp[:, KEYPOINT_INDEX[name], 2] = 0.0
    if depth_m:
        noise = rng.normal(0, depth_m, out.depth.shape)
        scale = (out.depth + noise) / out.depth
        out.depth = (out.depth * scale).astype(np.float32)
        if out.pointmap is not None:
            out.pointmap = (out.pointmap * scale[..., None]).astype(np.float32)
    h, w = out.depth.shape
    for _ in range(holes):
        r, c = rng.integers(0, h - h // 8), rng.integers(0, w - w // 8)
        out.depth[r:r + h // 8, c:c + w // 8] = np.nan
        if out.pointmap is not None:
            out.pointmap[r:r + h // 8, c:c + w // 8] = np.nan
    return out


def crop_top(maps: Maps, fraction: float = 0.55) -> Maps:
    """The upper ``fraction`` of the photo only (a half-body portrait): keypoints below are gone."""
    h = int(round(maps.height * fraction))
    kp = maps.keypoints.copy()
    kp[kp[..., 1] >= h] = 0.0
    cut = lambda a: None if a is None else np.ascontiguousarray(a[:h])  # noqa: E731
    return Maps(image=cut(maps.image), mask=cut(maps.mask), parts=cut(maps.parts), part_names=maps.part_names,
                normal=cut(maps.normal), depth=cut(maps.depth), intrinsics=maps.intrinsics.copy(),
                keypoints=kp, metric=maps.metric, source=maps.source, pointmap=cut(maps.pointmap)).validate()


def relative_depth(maps: Maps, scale: float = 0.37) -> Maps:
    """What Sapiens v1 gives: depth known only up to scale, no pointmap."""
    import copy

    out = copy.deepcopy(maps)
    out.depth = (out.depth * scale).astype(np.float32)
    out.pointmap = None
    out.metric = False
    return out


def without_depth(maps: Maps) -> Maps:
    import copy

    out = copy.deepcopy(maps)
    out.depth = np.full_like(out.depth, np.nan)
    out.pointmap = None
    out.metric = False
    return out
