# SPDX-License-Identifier: GPL-3.0-or-later
"""Metric pseudo-depth for the offline backend: silhouette inflation + landmark depths.

No depth network ships in the MediaPipe wheel, so depth is built from three cues:
1. the person's distance from body proportions: MediaPipe's world landmarks are metric
   (an average-sized body); fitting them to the 2D landmarks gives the weak-perspective
   scale s = f / Z0;
2. the landmarks' relative depths (world z), interpolated along the limbs;
3. a rounded cross-section: each pixel bulges towards the camera by a circular profile of
   its distance to the silhouette edge, relative to the local half-width of the body.
Pure numpy + OpenCV.
"""

from __future__ import annotations

import cv2
import numpy as np

# Human cross-sections are flatter than circles (a torso ~0.33 m wide is ~0.22 m deep).
CROSS_SECTION_ASPECT = 0.7
# Sanity range for a person's distance from the camera, metres.
MIN_DISTANCE, MAX_DISTANCE = 0.3, 50.0
SHOULDER_WIDTH_M = 0.38  # fallback when the landmark fit is not possible


def distance_from_landmarks(
    pixels: np.ndarray, world: np.ndarray, visibility: np.ndarray, focal: float,
    min_visibility: float = 0.5,
) -> float | None:
    """Camera distance (m) of the visible landmarks' centroid by a weak-perspective fit, or None.

    ``pixels`` [N,2] image positions, ``world`` [N,3] metric landmarks (x right, y down),
    ``visibility`` [N]. Solves pixels ~ s * world_xy + t in least squares; Z0 = f / s.
    """
    ok = np.asarray(visibility) >= min_visibility
    if ok.sum() < 4:
        return None
    p = np.asarray(pixels, np.float64)[ok]
    w = np.asarray(world, np.float64)[ok, :2]
    p = p - p.mean(0)
    w = w - w.mean(0)
    denom = float((w * w).sum())
    if denom < 1e-6:
        return None
    scale = float((p * w).sum()) / denom
    if scale <= 0:
        return None
    return float(np.clip(focal / scale, MIN_DISTANCE, MAX_DISTANCE))


def distance_from_shoulders(shoulder_px: float, focal: float) -> float:
    """Fallback distance from the shoulders' pixel span and an average shoulder width."""
    return float(np.clip(focal * SHOULDER_WIDTH_M / max(shoulder_px, 1.0), MIN_DISTANCE, MAX_DISTANCE))


def inflate(mask: np.ndarray, metres_per_pixel: float) -> np.ndarray:
    """Bulge towards the camera (metres, >= 0; 0 outside) of a silhouette, float32 [H,W].

    With d the distance to the edge and r the local half-width (the largest d nearby), the
    front of an elliptic cross-section sits sqrt(2rd - d^2) * aspect in front of its axis.
    """
    m = mask.astype(np.uint8)
    if not m.any():
        return np.zeros(mask.shape, np.float32)
    dist = cv2.distanceTransform(m, cv2.DIST_L2, 3)
    # Local half-width: spread the ridge (medial axis) values over a neighbourhood about
    # as wide as the widest part, so limbs keep their own radius and the torso its own.
    k = max(3, int(dist.max()) | 1)
    radius = cv2.dilate(dist, np.ones((k, k), np.uint8))  # square: separable, fast
    radius = np.maximum(radius, dist)
    bulge = np.sqrt(np.maximum(2.0 * radius * dist - dist * dist, 0.0))
    bulge = cv2.GaussianBlur(bulge, (0, 0), sigmaX=max(1.0, k / 8.0))
    bulge[m == 0] = 0.0
    return (bulge * (CROSS_SECTION_ASPECT * metres_per_pixel)).astype(np.float32)


def smooth_inside(values: np.ndarray, mask: np.ndarray, sigma: float) -> np.ndarray:
    """Gaussian blur of ``values`` using only pixels inside ``mask`` (normalised convolution).

    Also extends the field a little beyond the mask, so derivatives at the edge stay finite.
    """
    m = mask.astype(np.float32)
    num = cv2.GaussianBlur(values.astype(np.float32) * m, (0, 0), sigmaX=sigma)
    den = cv2.GaussianBlur(m, (0, 0), sigmaX=sigma)
    return np.where(den > 1e-4, num / np.maximum(den, 1e-4), values).astype(np.float32)


def normals_from_depth(depth: np.ndarray, intrinsics: np.ndarray) -> np.ndarray:
    """Unit camera-frame normals [H,W,3] of a depth map, oriented towards the camera.

    Tangents are the pixel-wise derivatives of the back-projected points; NaN depth gives
    NaN normals. Depth should be finite a pixel beyond where normals are wanted.
    """
    h, w = depth.shape
    fx, fy = float(intrinsics[0, 0]), float(intrinsics[1, 1])
    cx, cy = float(intrinsics[0, 2]), float(intrinsics[1, 2])
    z = depth.astype(np.float32)
    u = (np.arange(w, dtype=np.float32) + 0.5 - cx)[None, :]
    v = (np.arange(h, dtype=np.float32) + 0.5 - cy)[:, None]
    zv, zu = np.gradient(z)
    # dP/du and dP/dv for P = ((u-cx) Z/fx, (v-cy) Z/fy, Z)
    du = np.stack([(z + u * zu) / fx, v * zu / fy, zu], -1)
    dv = np.stack([u * zv / fx, (z + v * zv) / fy, zv], -1)
    n = np.cross(dv, du)  # fronto-parallel plane -> (0, 0, -1): towards the camera
    norm = np.linalg.norm(n, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        n = n / norm
    return n.astype(np.float32)
