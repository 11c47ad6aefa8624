# SPDX-License-Identifier: GPL-3.0-or-later
"""Temporal smoothing of joint trajectories: a constant-velocity Kalman filter per coordinate
with a Rauch-Tung-Striebel smoother, fixed-lag (``lag`` frames of look-ahead) or whole-clip.

Every coordinate of every joint is an independent 1D track [position, velocity] driven by white
acceleration noise of std ``accel`` (metres / frame^2). Measurements have std ``noise`` (metres),
``estimated_factor`` x that for joints that were filled in rather than measured; NaN = missing
(the filter predicts through gaps). A measurement further than ``gate`` sigmas from the
prediction is treated as an outlier, unless ``max_rejects`` in a row were (then the person really
moved: the filter re-locks). All coordinates run at once as arrays: [T, N] with N = joints x 3.

With lag L, the pose of frame t uses measurements up to t + L: an interactive or streaming
caller waits L frames; ``lag=None`` uses the whole clip (offline).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

DEFAULT_LAG = 2


@dataclass(frozen=True)
class SmoothingOptions:
    lag: int | None = DEFAULT_LAG  # frames of look-ahead; None = the whole clip (offline)
    noise: float = 0.025  # metres: per-frame measurement noise of a lifted joint
    accel: float = 0.002  # metres / frame^2: how fast motion may change
    estimated_factor: float = 3.0
    # Depth (camera z, the last coordinate) is measured less precisely than the image position.
    depth_factor: float = 1.0
    model: str = "velocity"  # "velocity" (white acceleration) or "acceleration" (white jerk)
    jerk: float = 0.0005  # metres / frame^3, for the "acceleration" model
    gate: float = 5.0
    max_rejects: int = 3


def smooth(values: np.ndarray, estimated: np.ndarray | None = None,
           options: SmoothingOptions = SmoothingOptions(), confidence: np.ndarray | None = None,
           noise: np.ndarray | None = None) -> np.ndarray:
    """Smoothed copy of ``values`` [T, ...] (NaN = missing), same shape.

    ``estimated`` (bool, ``values.shape[:-1]`` or same shape) marks filled-in measurements;
    ``confidence`` (same shapes, in (0, 1]) divides a measurement's std (a keypoint score);
    ``noise`` (``values.shape[1:]``), when given, is each coordinate's measurement std in place
    of ``options.noise``. Coordinates never measured stay NaN.
    """
    values = np.asarray(values, np.float64)
    shape = values.shape
    t_len = shape[0]
    z = values.reshape(t_len, -1)
    std = options.noise if noise is None else np.broadcast_to(np.asarray(noise, np.float64), shape[1:]).reshape(-1)
    r = np.broadcast_to(np.square(std), z.shape).copy()
    if estimated is not None:
        est = np.asarray(estimated, bool)
        if est.shape != shape:
            est = np.broadcast_to(est[..., None], shape)
        r = np.where(est.reshape(t_len, -1), r * options.estimated_factor ** 2, r)
    if confidence is not None:
        c = np.asarray(confidence, np.float64)
        if c.shape != shape:
            c = np.broadcast_to(c[..., None], shape)
        r = r / np.clip(c.reshape(t_len, -1), 0.05, 1.0) ** 2
    if shape[-1] == 3 and options.depth_factor != 1.0:
        r = r.reshape(shape).copy()
        r[..., 2] *= options.depth_factor ** 2
        r = r.reshape(t_len, -1)
    xf, pf, xp, pp = _forward(z, r, options)
    f = _model(options)[0]
    if options.lag is None:
        out = _rts(f, xf, pf, xp, pp, 0, t_len - 1)
    else:
        out = _fixed_lag(f, xf, pf, xp, pp, max(0, int(options.lag)))
    seen = np.isfinite(z).any(axis=0)
    out[:, ~seen] = np.nan
    return out.reshape(shape)


def _model(o: SmoothingOptions) -> tuple[np.ndarray, np.ndarray]:
    """Transition F and process noise Q of one coordinate (per frame)."""
    if o.model == "velocity":
        return np.array([[1.0, 1.0], [0.0, 1.0]]), o.accel ** 2 * np.array([[0.25, 0.5], [0.5, 1.0]])
    if o.model == "acceleration":
        f = np.array([[1.0, 1.0, 0.5], [0.0, 1.0, 1.0], [0.0, 0.0, 1.0]])
        q = o.jerk ** 2 * np.array([[1 / 20, 1 / 8, 1 / 6], [1 / 8, 1 / 3, 1 / 2], [1 / 6, 1 / 2, 1.0]])
        return f, q
    raise ValueError(f"unknown motion model {o.model!r}: 'velocity' or 'acceleration'")


def _forward(z, r, o: SmoothingOptions):
    """Filtered and predicted states [T,N,2] and covariances [T,N,2,2]."""
    t_len, n = z.shape
    f, q = _model(o)
    d = len(f)
    xf = np.zeros((t_len, n, d))
    pf = np.zeros((t_len, n, d, d))
    xp = np.zeros((t_len, n, d))
    pp = np.zeros((t_len, n, d, d))
    first = np.where(np.isfinite(z).any(0), np.argmax(np.isfinite(z), axis=0), 0)
    x = np.zeros((n, d))
    x[:, 0] = z[first, np.arange(n)]
    x[~np.isfinite(x)] = 0.0
    p = np.zeros((n, d, d))
    p[:, 0, 0] = r[first, np.arange(n)]
    p[:, 1, 1] = 0.05 ** 2  # an unknown initial velocity, about 5 cm/frame
    if d == 3:
        p[:, 2, 2] = 0.01 ** 2
    rejects = np.zeros(n, np.int64)
    started = np.zeros(n, bool)
    for t in range(t_len):
        if t > 0:
            x = x @ f.T
            p = f @ p @ f.T + q
        before = started.copy()
        started |= t >= first
        xp[t], pp[t] = x, p
        zt = z[t]
        have = np.isfinite(zt) & started
        innov = np.where(have, zt - x[:, 0], 0.0)
        s = p[:, 0, 0] + r[t]
        outlier = have & before & (innov ** 2 > o.gate ** 2 * s) & (rejects < o.max_rejects)
        rejects = np.where(outlier, rejects + 1, np.where(have, 0, rejects))
        use = have & ~outlier
        k = p[:, :, 0] / s[:, None]  # gain [N,d]
        x = np.where(use[:, None], x + k * innov[:, None], x)
        kp = k[:, :, None] * p[:, None, 0, :]  # K H P
        p = np.where(use[:, None, None], p - kp, p)
        xf[t], pf[t] = x, p
    return xf, pf, xp, pp


def _fixed_lag(f, xf, pf, xp, pp, lag: int) -> np.ndarray:
    """Positions [T, N]: frame t smoothed by a backward pass from t + lag (fewer at the end).

    A backward step's gain depends only on the forward pass, so every frame's pass runs at once:
    ``lag`` vectorised steps instead of a Python loop over the frames."""
    t_len = len(xf)
    if lag == 0 or t_len < 2:
        return xf[:, :, 0].copy()
    gains = pf[:-1] @ f.T @ np.linalg.inv(pp[1:])  # [T-1,N,d,d]
    t = np.arange(t_len)
    end = np.minimum(t + lag, t_len - 1)
    xs = xf[end]
    for step in range(lag - 1, -1, -1):  # frame k = t + step, from the window's end back to t
        k = np.minimum(t + step, t_len - 2)
        moved = xf[k] + np.einsum("tnij,tnj->tni", gains[k], xs - xp[k + 1])
        xs = np.where((t + step < end)[:, None, None], moved, xs)
    return xs[:, :, 0]


def _rts(f, xf, pf, xp, pp, start: int, end: int) -> np.ndarray:
    """RTS-smoothed positions [end-start+1, N] using the forward pass up to ``end``."""
    xs = xf[end].copy()
    ps = pf[end].copy()
    out = np.empty((end - start + 1, xf.shape[1]))
    out[-1] = xs[:, 0]
    for t in range(end - 1, start - 1, -1):
        c = pf[t] @ f.T @ np.linalg.inv(pp[t + 1])
        xs = xf[t] + np.einsum("nij,nj->ni", c, xs - xp[t + 1])
        ps = pf[t] + c @ (ps - pp[t + 1]) @ np.swapaxes(c, 1, 2)
        out[t - start] = xs[:, 0]
    return out
