# SPDX-License-Identifier: GPL-3.0-or-later
"""Small synthetic inputs for the Blender-layer tests: an ellipsoid 'person' seen by a pinhole.

Not geometry-core code: just enough exact data (a front surface with known pixels, parts and a
short bone chain inside it) to check what the builders write into Blender.
"""

from __future__ import annotations

import numpy as np

from sapiens_blender.core.geometry.types import Skeleton, SurfaceMesh
from sapiens_blender.core.maps.goliath import KEYPOINT_NAMES
from sapiens_blender.core.maps.canonical import Maps

PART_NAMES = ("Background", "Face_Neck", "Torso", "Left_Upper_Leg", "Right_Upper_Leg", "Left_Lower_Leg",
              "Right_Lower_Leg", "Left_Upper_Arm", "Right_Upper_Arm", "Left_Lower_Arm", "Right_Lower_Arm")
# Each part is the region nearest to its segment between two keypoints.
PART_SEGMENTS = {
    1: ("neck", "nose"), 2: ("neck", "pelvis"), 3: ("left_hip", "left_knee"), 4: ("right_hip", "right_knee"),
    5: ("left_knee", "left_ankle"), 6: ("right_knee", "right_ankle"), 7: ("left_shoulder", "left_elbow"),
    8: ("right_shoulder", "right_elbow"), 9: ("left_elbow", "left_wrist"), 10: ("right_elbow", "right_wrist"),
}
# A frontal person's body keypoints (camera frame x, y in metres from the body centre; the
# person's left is the image's right).
BODY_KEYPOINTS = {
    "nose": (0.0, -0.65), "left_eye": (0.03, -0.68), "right_eye": (-0.03, -0.68),
    "left_ear": (0.07, -0.66), "right_ear": (-0.07, -0.66), "neck": (0.0, -0.5),
    "left_shoulder": (0.17, -0.45), "right_shoulder": (-0.17, -0.45),
    "left_elbow": (0.2, -0.15), "right_elbow": (-0.2, -0.15),
    "left_wrist": (0.2, 0.1), "right_wrist": (-0.2, 0.1),
    "left_hip": (0.1, 0.05), "right_hip": (-0.1, 0.05), "left_knee": (0.1, 0.4), "right_knee": (-0.1, 0.4),
    "left_ankle": (0.08, 0.7), "right_ankle": (-0.08, 0.7),
    "left_big_toe": (0.09, 0.76), "right_big_toe": (-0.09, 0.76), "left_small_toe": (0.11, 0.75),
    "right_small_toe": (-0.11, 0.75), "left_heel": (0.08, 0.74), "right_heel": (-0.08, 0.74),
}


def intrinsics(w: int, h: int, fx: float = 150.0, fy: float | None = None, cx=None, cy=None) -> np.ndarray:
    fy = fx if fy is None else fy
    return np.array(
        [[fx, 0, w / 2.0 if cx is None else cx], [0, fy, h / 2.0 if cy is None else cy], [0, 0, 1]], np.float32
    )


def ellipsoid_maps(w: int = 128, h: int = 96, k: np.ndarray | None = None, people: int = 1) -> Maps:
    """Front surface of upright ellipsoids 4 m away (one per person), exact depth and normals."""
    k = intrinsics(w, h) if k is None else k
    fx, fy, cx, cy = k[0, 0], k[1, 1], k[0, 2], k[1, 2]
    u = (np.arange(w) + 0.5 - cx) / fx
    v = (np.arange(h) + 0.5 - cy) / fy
    uu, vv = np.meshgrid(u, v)
    rays = np.stack([uu, vv, np.ones_like(uu)], -1)
    depth = np.full((h, w), np.nan, np.float32)
    normal = np.full((h, w, 3), np.nan, np.float32)
    mask = np.zeros((h, w), np.uint8)
    parts = np.zeros((h, w), np.uint8)
    radii = np.array([0.25, 0.8, 0.15])
    keypoints = np.zeros((people, len(KEYPOINT_NAMES), 3), np.float32)
    for p in range(people):
        centre = np.array([(p - (people - 1) / 2) * 0.6, 0.0, 4.0])
        # Ray-ellipsoid intersection: |(t*d - c) / r|^2 = 1, nearest t.
        d, c = rays / radii, centre / radii
        a = (d * d).sum(-1)
        b = -2 * (d * c).sum(-1)
        cc = (c * c).sum() - 1
        disc = b * b - 4 * a * cc
        hit = disc > 0
        t = (-b - np.sqrt(np.where(hit, disc, 0))) / (2 * a)
        pts = rays * t[..., None]
        n = (pts - centre) / radii**2
        n /= np.linalg.norm(n, axis=-1, keepdims=True)
        depth[hit] = pts[hit, 2]
        normal[hit] = n[hit]
        mask[hit] = p + 1
        xy = np.stack([pts[..., 0] - centre[0], pts[..., 1] - centre[1]], -1)
        parts[hit] = _nearest_segment(xy[hit])
        for name, (x, y) in BODY_KEYPOINTS.items():
            j = KEYPOINT_NAMES.index(name)
            keypoints[p, j] = [fx * (centre[0] + x) / centre[2] + cx, fy * y / centre[2] + cy, 0.9]
    image = np.zeros((h, w, 3), np.uint8)
    image[..., 0] = np.linspace(0, 255, w, dtype=np.uint8)[None, :]
    image[..., 1] = np.linspace(0, 255, h, dtype=np.uint8)[:, None]
    image[..., 2] = 128
    return Maps(image=image, mask=mask, parts=parts, part_names=PART_NAMES, normal=normal, depth=depth,
                intrinsics=k, keypoints=keypoints, metric=True, source="synthetic-ellipsoid").validate()


def _nearest_segment(xy: np.ndarray) -> np.ndarray:
    points = dict(BODY_KEYPOINTS, pelvis=(0.0, 0.05))
    dist = []
    for a, b in PART_SEGMENTS.values():
        pa, pb = np.array(points[a]), np.array(points[b])
        t = np.clip(((xy - pa) @ (pb - pa)) / ((pb - pa) @ (pb - pa)), 0, 1)
        dist.append(np.linalg.norm(xy - (pa + t[:, None] * (pb - pa)), axis=1))
    return np.array(list(PART_SEGMENTS))[np.argmin(dist, axis=0)]


def grid_surface(maps: Maps, person_id: int = 1) -> SurfaceMesh:
    """A vertex per masked pixel, two triangles per fully masked 2x2 block (CCW from the camera)."""
    h, w = maps.depth.shape
    inside = (maps.mask == person_id) & np.isfinite(maps.depth)
    idx = np.full((h, w), -1, np.int64)
    rows, cols = np.nonzero(inside)
    idx[rows, cols] = np.arange(len(rows))
    a, b, c, d = idx[:-1, :-1], idx[:-1, 1:], idx[1:, :-1], idx[1:, 1:]
    full = (a >= 0) & (b >= 0) & (c >= 0) & (d >= 0)
    # Image x right, y down: (a, c, b) is counter-clockwise seen from the camera.
    tri = np.concatenate([np.stack([a[full], c[full], b[full]], 1), np.stack([b[full], c[full], d[full]], 1)])
    k = maps.intrinsics
    z = maps.depth[rows, cols]
    verts = np.stack([(cols + 0.5 - k[0, 2]) * z / k[0, 0], (rows + 0.5 - k[1, 2]) * z / k[1, 1], z], 1)
    uv = np.stack([(cols + 0.5) / w, 1 - (rows + 0.5) / h], 1)
    fparts = maps.parts[rows[tri[:, 0]], cols[tri[:, 0]]]
    return SurfaceMesh(
        vertices=verts.astype(np.float32), faces=tri.astype(np.int32), uv=uv.astype(np.float32),
        pixel=np.stack([rows, cols], 1).astype(np.int32), face_parts=fparts.astype(np.uint8),
        vertex_parts=maps.parts[rows, cols].astype(np.uint8), person_id=person_id,
    )


def chain_skeleton(centre_x: float = 0.0, z: float = 4.1) -> Skeleton:
    """Three bones down the ellipsoid's axis, inside it (camera frame, y down)."""
    joints = np.array([[centre_x, 0.1, z], [centre_x, -0.3, z], [centre_x, -0.6, z], [centre_x, 0.6, z]])
    heads = joints[[0, 1, 0]]
    tails = joints[[1, 2, 3]]
    return Skeleton(names=["pelvis", "spine", "thigh.L"], heads=heads, tails=tails,
                    parents=np.array([-1, 0, 0], np.int32), rolls=np.zeros(3),
                    estimated=np.array([False, False, True]))


def part_weights(surface: SurfaceMesh) -> np.ndarray:
    """Stand-in part-based weights for the chain skeleton: Face_Neck->spine, Torso->pelvis, leg->thigh."""
    table = np.zeros((len(PART_NAMES), 3))
    table[:, 0] = 1.0
    table[[1, 3], 0] = 0.0
    table[1, 1] = 1.0
    table[3, 2] = 1.0
    return table[surface.vertex_parts]
