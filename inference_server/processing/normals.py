# SPDX-License-Identifier: GPL-3.0-or-later
"""Normals into the canonical camera frame, with a self-calibration of their axis signs.

Neither Sapiens family documents the signs of its normal axes (sapiens.md 2.5, 2.8). The geometry
does: normals derived from the predicted pointmap/depth by finite differences are in the canonical
frame by construction (x right, y down, z forward, pointing towards the camera). Comparing the two
inside the person tells which predicted axes are flipped; the agreement left after flipping is a
quality figure that is reported with the maps.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

# The Sapiens normal axes -> canonical camera frame (x right, y down, z forward, normals towards
# the camera), the ONE place this convention lives (both families; the runners refer to it).
# Evidence, as far as it goes (shared reference sapiens.md 2.5/2.8): the maintainers say "camera
# coordinates, XYZ"; the training code's horizontal-flip augmentation negates channel 0, so x is
# the image-horizontal axis (kept); no source states the y/z signs, and the only statement (an
# unverified user comment on facebookresearch/sapiens issue #50) says they are reversed against
# Metric3D, whose normals are in the canonical frame -> y and z flipped. Because this is not
# proven, every photo with depth is checked against the depth-derived normals (an axis flips only
# on clear geometric evidence, and the flip is reported); without depth the notes say the normals
# are NOT calibrated.
SAPIENS_NORMAL_SIGNS = (1.0, -1.0, -1.0)
MIN_CALIBRATION_PIXELS = 64
# A sign change must raise the mean cosine by this much: protects against flipping on noise.
MIN_COSINE_GAIN = 0.05


def normalize(vectors: np.ndarray) -> np.ndarray:
    """Unit vectors along the last axis; zero or non-finite vectors become NaN."""
    v = np.asarray(vectors, np.float32)
    norm = np.linalg.norm(v, axis=-1, keepdims=True)
    with np.errstate(invalid="ignore", divide="ignore"):
        out = v / norm
    out[~np.isfinite(norm[..., 0]) | (norm[..., 0] < 1e-12)] = np.nan
    return out


def normals_from_points(points: np.ndarray, valid: np.ndarray | None = None) -> np.ndarray:
    """Camera-facing unit normals [H,W,3] of a camera-frame point grid by central differences;
    NaN where a neighbour is missing. With x right and y down, dP/du x dP/dv points away from
    the camera, so the normal is its negation. (Per coordinate plane, float32: the arithmetic of
    ``-np.cross`` and :func:`normalize`, without their [H,W,3] temporaries.)"""
    p = np.asarray(points, np.float32)
    h, w = p.shape[:2]
    out = np.full((h, w, 3), np.nan, np.float32)
    if h < 3 or w < 3:
        return out
    px, py, pz = (np.ascontiguousarray(p[..., i]) for i in range(3))
    ok = _finite_vectors(p)
    if valid is not None:
        ok &= np.asarray(valid, bool)
    inner = ok[1:-1, 1:-1] & ok[1:-1, 2:] & ok[1:-1, :-2] & ok[2:, 1:-1] & ok[:-2, 1:-1]
    du = [c[1:-1, 2:] - c[1:-1, :-2] for c in (px, py, pz)]
    dv = [c[2:, 1:-1] - c[:-2, 1:-1] for c in (px, py, pz)]
    n = [dv[1] * du[2] - dv[2] * du[1], dv[2] * du[0] - dv[0] * du[2], dv[0] * du[1] - dv[1] * du[0]]
    norm = np.sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2])
    keep = inner & np.isfinite(norm) & (norm >= 1e-12)
    with np.errstate(invalid="ignore", divide="ignore"):
        for i in range(3):
            out[1:-1, 1:-1, i] = np.where(keep, n[i] / norm, np.nan)
    return out


@dataclass
class NormalCalibration:
    signs: tuple[float, float, float]  # multiply predicted axes by these
    agreement_deg: float  # mean angle to the geometric normals after the signs (NaN: not checked)
    before_deg: float  # the same before
    pixels: int  # pixels compared

    @property
    def flipped_axes(self) -> str:
        return "".join(a for a, s in zip("xyz", self.signs) if s < 0) or "none"

    def describe(self) -> str:
        if self.pixels < MIN_CALIBRATION_PIXELS:
            return f"normal self-calibration skipped ({self.pixels} comparable pixels)"
        return (f"normal self-calibration: flipped axes {self.flipped_axes}; mean angle to the "
                f"depth-derived normals {self.before_deg:.1f} -> {self.agreement_deg:.1f} deg "
                f"over {self.pixels} px")


def describe_signs(signs) -> str:
    """(1, -1, -1) -> "(x, -y, -z)"."""
    return "(" + ", ".join(("-" if v < 0 else "") + a for a, v in zip("xyz", signs)) + ")"


def _finite_vectors(v: np.ndarray) -> np.ndarray:
    return np.isfinite(v[..., 0]) & np.isfinite(v[..., 1]) & np.isfinite(v[..., 2])


def _mean_angle(dots: np.ndarray) -> float:
    return float(np.degrees(np.arccos(np.clip(dots, -1.0, 1.0))).mean())


def calibrate_normal_signs(predicted: np.ndarray, reference: np.ndarray,
                           valid: np.ndarray | None = None) -> NormalCalibration:
    """Choose the axis sign flips (of 8) that best align ``predicted`` with ``reference`` normals."""
    pred = np.asarray(predicted, np.float32)
    ref = np.asarray(reference, np.float32)
    ok = _finite_vectors(pred) & _finite_vectors(ref)
    if valid is not None:
        ok &= np.asarray(valid, bool)
    count = int(np.count_nonzero(ok))
    if count < MIN_CALIBRATION_PIXELS:
        return NormalCalibration((1.0, 1.0, 1.0), float("nan"), float("nan"), count)
    products = pred[ok].astype(np.float64)
    products *= ref[ok]  # a_i * b_i per pixel and axis
    # E[a_i b_i] (a matrix product: numpy's reductions over a length-3 axis are slow); the mean
    # dot for signs s is sum_i s_i * per_axis_i
    per_axis = np.full(count, 1.0 / count) @ products
    identity = float(per_axis.sum())
    best = max(itertools.product((1.0, -1.0), repeat=3), key=lambda s: float(np.dot(s, per_axis)))
    if float(np.dot(best, per_axis)) - identity < MIN_COSINE_GAIN:
        best = (1.0, 1.0, 1.0)
    before = _mean_angle(products @ np.ones(3))
    after = before if best == (1.0, 1.0, 1.0) else _mean_angle(products @ np.asarray(best))
    return NormalCalibration(tuple(best), after, before, count)
