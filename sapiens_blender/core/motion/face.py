# SPDX-License-Identifier: GPL-3.0-or-later
"""A clip's facial expressions: the photo's expression fit (core/body/expression_fit.py) on every
frame of a track's fitted body, smoothed like the body (docs/expressions.md).

Per frame the face is fitted at that frame's pose (the body's bones from the server's motion) to
that frame's face keypoints; frames where the face is not seen are left to the smoother. The
smoothing has the body's look-ahead (``lag`` frames; None = the whole clip): a constant-velocity
Kalman filter (core/motion/smoothing.py) for every key but the blinks, which a 3-frame median
keeps crisp (a blink held 2 frames stays shut for 2 frames; a 1-frame glitch goes).
"""

from __future__ import annotations

import warnings
from dataclasses import replace

import numpy as np

from ..body.expression_fit import face_rig, fit_expression, weight_noise
from .smoothing import DEFAULT_LAG, SmoothingOptions, smooth

BLINKS = ("eyeBlinkLeft", "eyeBlinkRight")
# How fast a weight may change (a talking jaw opens and shuts in 6 frames at 25 fps); each key's
# measurement std is the fit's own for it (expression_fit.weight_noise), x NOISE_FACTOR. On the
# talking ground truth (tests/sapiens_blender/core/motion/test_face_motion.py) these keep the jaw
# within 0.05 and cut the jitter 6x; blinks jump, so no outlier gate.
EXPRESSION_SMOOTHING = SmoothingOptions(noise=0.1, accel=0.15, gate=1e9)
NOISE_FACTOR = 2.0
NOISE_RANGE = (0.02, 0.3)


def frame_expressions(template, fit, index: int, bone_matrices: np.ndarray, keypoints: np.ndarray,
                      intrinsics: np.ndarray) -> np.ndarray:
    """[T,E] raw weights: a fit per frame at its pose ``bone_matrices`` [T,B,4,4] (model frame of
    the fit's placement) to its keypoints [T,308,3]; NaN rows where the face was not seen."""
    n = len(template.expression_names)
    out = np.full((len(bone_matrices), n), np.nan, np.float32)
    for t in range(len(bone_matrices)):  # one small solve per frame (~2 ms)
        if not np.any(keypoints[t, :, 2] > 0):
            continue
        rig = face_rig(template, fit.rest_vertices[index], fit.rest_bone_matrices[index], bone_matrices[t],
                       fit.placement[index], intrinsics)
        if rig is None:
            return np.zeros((len(bone_matrices), n), np.float32)
        values = fit_expression(rig, keypoints[t], n)
        if values is not None:
            out[t] = values
    return out


def key_noise(template, fit, index: int, bone_matrices: np.ndarray, intrinsics) -> np.ndarray | None:
    """[E] each key's measurement std for the smoother, from the face at ``bone_matrices``."""
    rig = face_rig(template, fit.rest_vertices[index], fit.rest_bone_matrices[index], bone_matrices,
                   fit.placement[index], intrinsics)
    if rig is None:
        return None
    out = np.full(len(template.expression_names), EXPRESSION_SMOOTHING.noise)
    out[rig.driven] = np.clip(NOISE_FACTOR * weight_noise(rig), *NOISE_RANGE)
    return out


def smooth_expressions(names, raw: np.ndarray, lag: int | None = DEFAULT_LAG,
                       noise: np.ndarray | None = None) -> np.ndarray:
    """[T,E] smoothed weights in 0..1 from per-frame ones (NaN = unseen: held by the filter; a
    key never seen is 0); ``noise`` [E] each key's std (key_noise)."""
    raw = np.asarray(raw, np.float64)
    out = smooth(raw, options=replace(EXPRESSION_SMOOTHING, lag=lag), noise=noise)
    blinks = [names.index(n) for n in BLINKS if n in names]
    if blinks:
        out[:, blinks] = _median3(raw[:, blinks], lag)
    return np.clip(np.nan_to_num(out, nan=0.0), 0.0, 1.0).astype(np.float32)


def _median3(values: np.ndarray, lag: int | None) -> np.ndarray:
    """Median of frames t-1, t, t+1 (t-2, t-1, t without look-ahead), unseen frames skipped."""
    t_len, n = values.shape
    ahead = 0 if lag == 0 else 1
    pad = np.full((2, n), np.nan)
    padded = np.concatenate([pad, values, pad])  # row r is frame r - 2
    window = np.stack([padded[ahead + k: ahead + k + t_len] for k in range(3)])
    with warnings.catch_warnings():  # an all-unseen window is NaN, held below
        warnings.simplefilter("ignore", RuntimeWarning)
        return _hold(np.nanmedian(window, axis=0))


def _hold(values: np.ndarray) -> np.ndarray:
    """NaN rows take the last seen value (0 before the first)."""
    out = np.array(values, np.float64)
    for t in range(len(out)):  # T steps over a few columns
        gap = ~np.isfinite(out[t])
        out[t, gap] = out[t - 1, gap] if t else 0.0
    return out


def track_expressions(track, intrinsics: np.ndarray, lag: int | None = DEFAULT_LAG) -> np.ndarray | None:
    """[T,E] smoothed weights for a track with a fitted body and per-frame keypoints; None when
    the track has neither, the face is never seen, or the template has no expressions."""
    body = track.body
    kp = getattr(track, "keypoints", None)
    if body is None or kp is None or not body.template.expression_names:
        return None
    bones = body.bone_matrices
    raw = frame_expressions(body.template, body.fit, body.index, bones, kp, intrinsics)
    if not np.isfinite(raw).any():  # the face never seen: keep the fitted frame's expression
        return None
    noise = key_noise(body.template, body.fit, body.index, bones[body.reference], intrinsics)
    return smooth_expressions(body.template.expression_names, raw, lag, noise)
