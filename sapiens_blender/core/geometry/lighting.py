# SPDX-License-Identifier: GPL-3.0-or-later
"""The photo's lighting, roughly: where the key light comes from and the backdrop's colour.

A Lambertian fit on the person's pixels: luminance ~ ambient + l·n over the camera-frame
normals, so `l` points towards the light (its length is the key light's share). The backdrop
colour is the median of the pixels outside every person. numpy only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# From the camera's side, a little above and to the left: the studio default when the photo
# says nothing (flat light, too few pixels). Camera frame: x right, y down, z forward.
DEFAULT_DIRECTION = np.array([-0.35, -0.6, -0.72])
MIN_FRONT = 0.3  # the key light stays at least this far on the camera's side (-z)


@dataclass(frozen=True)
class Lighting:
    direction: np.ndarray  # unit vector towards the key light, camera frame
    key_share: float  # 0..1: how much of the brightness the key light explains
    background: tuple[float, float, float]  # linear RGB of the backdrop
    fitted: bool  # False: the default direction was used


def srgb_to_linear(rgb: np.ndarray) -> np.ndarray:
    c = np.asarray(rgb, np.float32)
    return np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)


def estimate_lighting(image: np.ndarray, normal: np.ndarray, mask: np.ndarray, max_samples: int = 20000) -> Lighting:
    """`image` uint8 [H,W,3] (sRGB), `normal` [H,W,3] camera frame, `mask` [H,W] (0 = background)."""
    linear = srgb_to_linear(np.asarray(image)[..., :3] / 255.0)
    outside = mask == 0
    background = tuple(float(v) for v in np.median(linear[outside], axis=0)) if outside.any() else (0.2, 0.2, 0.2)
    person = (mask > 0) & np.isfinite(normal).all(axis=2)
    direction, share, fitted = DEFAULT_DIRECTION / np.linalg.norm(DEFAULT_DIRECTION), 0.5, False
    if person.sum() >= 50:
        rows = np.flatnonzero(person.ravel())
        if rows.size > max_samples:  # a regular subsample: the fit needs no more
            rows = rows[:: rows.size // max_samples]
        n = normal.reshape(-1, 3)[rows].astype(np.float64)
        lum = linear.reshape(-1, 3)[rows] @ np.array([0.2126, 0.7152, 0.0722])
        design = np.column_stack([np.ones(len(n)), n])
        coef, *_ = np.linalg.lstsq(design, lum, rcond=None)
        ambient, light = coef[0], coef[1:]
        strength = float(np.linalg.norm(light))
        if np.isfinite(strength) and strength > 1e-3:
            candidate = light / strength
            if candidate[2] > -MIN_FRONT:  # behind the person: keep the side, move it to the front
                candidate[2] = -MIN_FRONT
                candidate[:2] *= np.sqrt(max(0.0, 1 - MIN_FRONT**2)) / max(np.linalg.norm(candidate[:2]), 1e-9)
            direction = candidate / np.linalg.norm(candidate)
            share = float(np.clip(strength / (abs(ambient) + strength), 0.1, 0.9))
            fitted = True
    return Lighting(direction=direction, key_share=share, background=background, fitted=fitted)
