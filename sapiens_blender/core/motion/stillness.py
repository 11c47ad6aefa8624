# SPDX-License-Identifier: GPL-3.0-or-later
"""Tying a still body's joints to one global motion; every joint tracked relative to it.

A pose backend's keypoints drift slowly as a person moves through the image (a shoulder may
wander several pixels while the person stands still), and often jitter together (the whole
upper body jumps a few pixels in one frame while the face stays put): a per-joint filter can
tell neither from real motion. But the joints carry the person's global motion, and some carry
it well. Per axis (image x, image y, depth: a backend's noise is not isotropic), the global
motion is the mean of the joints with the weights that make it least noisy, given their noise
covariance (measured from their second differences along time, so that joints that jitter
together do not count as independent evidence) and each joint's wander (the slow spread of its
offset from that mean, found by a few rounds of reweighting). It is smoothed with its own noise,
measured the same way: much less than any one joint's, so it follows fast motion with little lag.

Every joint's own track is then smoothed relative to the global motion (its offset from it, with
the smoother's noise model): a pan or a walk is not in it, only the joint's motion on the body.
A joint whose offset barely wanders over a window is, on the evidence, still on the body, and
is set to the global motion plus its mean offset over the window. A joint that moves relative
to the body (a raised arm) keeps its own track; between the two thresholds the result blends,
so nothing switches abruptly. This is decided per axis too: a body that turns moves its
shoulders in depth much more than in the image, and a shoulder still in the image keeps
following the global motion there.

Units: the caller's (the smoother works in a body with a 0.5 m torso), so ``still`` is a
distance on a standard body. With a lag, each frame's stillness evidence ends at t + lag; the
joints' weights and noise levels are, like the smoother's depth and torso scale, per-track
statistics (a caller streaming live would take them from the frames so far).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

from .body_prior import evidence_window
from .smoothing import SmoothingOptions, smooth


# The median |second difference| of white noise with std s: 0.674 x sqrt(6) x s.
JITTER_PER_STD = 0.6745 * np.sqrt(6.0)


@dataclass(frozen=True)
class StillnessOptions:
    # Per axis: the std of a joint's offset along it below ``still`` (metres, standard body):
    # still on that axis; above ``moving``: its own track. (1 cm and 4 cm over three axes.)
    still: float = 0.006
    moving: float = 0.023
    window: int = 35  # frames of the offset statistics (up to the current frame plus the lag)
    rounds: int = 4  # of reweighting the joints that carry the global motion
    # A joint seen in fewer frames of the window is never tied: the 5-frame average shows no
    # wander in fewer (a fast arm in a track's first two frames would look still).
    min_frames: int = 5


def tie_still_joints(raw: np.ndarray, smoothed: np.ndarray, smoothing: SmoothingOptions,
                     options: StillnessOptions = StillnessOptions(), estimated: np.ndarray | None = None,
                     confidence: np.ndarray | None = None) -> np.ndarray:
    """``raw`` [T,J,3] measured (NaN = missing), ``smoothed`` [T,J,3] the per-joint smoothed
    tracks -> every joint's track relative to the global motion, still joints tied to it.

    ``estimated`` and ``confidence`` [T,J] are the smoother's (filled-in joints, keypoint
    scores). Without enough well-measured joints for a global motion, ``smoothed`` is returned.
    """
    t_len = len(smoothed)
    finite = np.isfinite(raw).all(axis=-1)
    # The joints that carry the global motion: measured in most frames. Where one is missing,
    # its smoothed track stands in (so that the mean does not jump); where most of the weight
    # is missing, the frame has no global measurement (the smoother predicts through it).
    ok = (finite.mean(axis=0) >= 0.8) & np.isfinite(smoothed).all(axis=(0, 2))
    # The statistics below are the track's own (noise from second differences, wander from
    # 5-frame averages): over a few frames they measure the motion, not the noise. On a real
    # 5-frame clip of a sliding footballer the global motion's "noise" was its deceleration, and
    # his last frame ended 8.7 % of his size from his keypoints (3.3 without this pass).
    if t_len < 2 * options.min_frames or ok.sum() < 3 or finite[:, ok].all(axis=1).sum() < 3:
        return smoothed
    carriers = np.where(finite[:, ok, None], raw[:, ok], smoothed[:, ok])
    noise_cov = _noise_covariance(raw[:, ok])
    spread = np.zeros(carriers.shape[1:])
    for _ in range(options.rounds):  # a joint that wanders from the consensus counts less
        weights = _least_noisy_weights(noise_cov, spread ** 2)
        glob_raw = np.einsum("jc,tjc->tc", weights, carriers)
        glob_raw[(finite[:, ok].astype(float) @ weights) < 0.5] = np.nan
        spread = _wander(raw[:, ok] - glob_raw[:, None])
    # The global motion is an average of many joints: it is smoothed with its own measured
    # noise, far below one joint's (so it follows fast motion with little lag). Noise that the
    # joints share (they jitter together) is in that measure, as it should be.
    glob_noise = _jitter(glob_raw[:, None])[0] / JITTER_PER_STD
    glob_noise = np.where(np.isfinite(glob_noise), np.maximum(glob_noise, 1e-4), smoothing.noise)
    glob = smooth(glob_raw, options=smoothing, noise=glob_noise)
    raw_offset = raw - glob_raw[:, None]
    # Every joint's own track is smoothed relative to the body: the global motion (a pan, a
    # walk) is not in it, only the joint's motion on the body and its own noise.
    own = glob[:, None] + smooth(raw_offset, estimated, smoothing, confidence)
    out = np.where(np.isfinite(own), own, smoothed)
    lag = smoothing.lag
    for t in range(t_len):
        lo, hi = evidence_window(t, t_len, lag, options.window)
        # The wander of each joint's measured offset over the window (a 5-frame average, read
        # only inside the window: nothing past t + lag).
        spread = _wander(raw_offset[lo:hi])  # [J,3]
        tie = np.clip((options.moving - spread) / (options.moving - options.still), 0.0, 1.0)
        seen = finite[lo:hi]
        # Too short a record is no evidence of stillness (the first frames with a lag).
        tie[~ok | (seen.sum(axis=0) < options.min_frames)] = 0.0
        if not tie.any():
            continue
        mean_offset = np.where(seen[..., None], raw_offset[lo:hi], 0.0).sum(0) / np.maximum(seen.sum(0), 1)[:, None]
        tied = glob[t] + mean_offset
        out[t] = tie * tied + (1 - tie) * out[t]
    return out


def _noise_covariance(raw: np.ndarray, shrink: float = 0.5) -> np.ndarray:
    """[3,J,J]: per axis, the covariance of the joints' measurement noise, from their second
    differences along time (frames where all are measured), shrunk halfway to its diagonal:
    a few dozen frames give a rough estimate of the correlations, a good one of the variances."""
    d2 = np.diff(raw, 2, axis=0)
    d2 = d2[np.isfinite(d2).all(axis=(1, 2))]  # [N,J,3]
    cov = np.einsum("nic,njc->cij", d2, d2) / (6.0 * max(len(d2), 1))  # white noise: var(d2) = 6 var
    diag = np.einsum("cii->ci", cov)
    return (1 - shrink) * cov + shrink * diag[:, :, None] * np.eye(cov.shape[1])


def _least_noisy_weights(noise_cov: np.ndarray, wander: np.ndarray) -> np.ndarray:
    """[J,3] weights (each axis sums to 1, none negative) of the joints' mean with the least
    variance, given the noise covariance [3,J,J] and each joint's wander [J,3] (variance)."""
    n_j = noise_cov.shape[1]
    weights = np.empty((n_j, 3))
    for c in range(3):
        cov = noise_cov[c] + np.diag(wander[:, c])
        cov += np.eye(n_j) * max(1e-12, 1e-9 * np.trace(cov) / n_j)
        w = np.maximum(np.linalg.solve(cov, np.ones(n_j)), 0.0)
        weights[:, c] = w / w.sum() if w.sum() > 0 else 1.0 / n_j
    return weights


def _wander(offsets: np.ndarray) -> np.ndarray:
    """[J,3] std of each joint's slowly varying offset (NaN where seen in fewer than 2 frames)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.sqrt(np.nanvar(_smooth_offsets(offsets), axis=0))


def _smooth_offsets(offsets: np.ndarray, width: int = 5) -> np.ndarray:
    """A moving average along time, NaN = missing (the spread of an offset is its slow wander,
    not its jitter). Edges use the frames there are: nothing beyond the slice is read."""
    seen = np.isfinite(offsets)
    values = np.where(seen, offsets, 0.0)
    total = np.concatenate([np.zeros((1,) + offsets.shape[1:]), np.cumsum(values, axis=0)])
    count = np.concatenate([np.zeros((1,) + offsets.shape[1:]), np.cumsum(seen, axis=0)])
    t = np.arange(len(offsets))
    lo, hi = np.maximum(t - width // 2, 0), np.minimum(t + width // 2 + 1, len(offsets))
    n = count[hi] - count[lo]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, (total[hi] - total[lo]) / n, np.nan)


def _jitter(raw: np.ndarray) -> np.ndarray:
    """Per joint and axis [J,3], the median absolute second difference along time: a robust
    measure of the measurement noise (``JITTER_PER_STD`` x its std for white noise)."""
    acc = np.abs(np.diff(raw, 2, axis=0)).reshape(max(len(raw) - 2, 0), -1)  # [T-2, J*3]
    acc = np.where(np.isfinite(acc), acc, np.nan)
    with warnings.catch_warnings():  # a coordinate never measured twice in a row: no jitter
        warnings.simplefilter("ignore", RuntimeWarning)
        med = np.nanmedian(acc, axis=0) if len(acc) else np.full(acc.shape[1], np.nan)
    return np.where(np.isfinite(med), med, np.inf).reshape(raw.shape[1:])
