# SPDX-License-Identifier: GPL-3.0-or-later
"""A body prior applied to each frame's lifted joints before temporal smoothing.

Each frame's joints are measured independently, with a few centimetres of noise each; but they
belong to one body whose bones keep their lengths and whose torso is nearly rigid. Two cheap
projections use that, frame by frame (no look-ahead beyond the smoother's own):

- torso: the measured torso points (shoulders, hips, neck) are fitted by one rigid motion of the
  person's torso shape (the median of the frames so far, in the torso's own frame); each point
  moves ``torso_weight`` of the way to the fit. Many points share six degrees of freedom, so the
  fit carries less noise than any one point.
- limbs: each arm and leg bone is brought to the person's median length (of the frames so far)
  by moving both of its ends along the bone (the less certain end more), a few rounds: the noise along the bone
  goes, and no end inherits another's error (as a chain built outwards from the root would).

``window`` frames give the medians (up to the current frame plus ``lag``; offline, centred on
the frame): a long clip costs O(frames x window), and the shape adapts if a track's scale drifts.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np

TORSO = ("left_shoulder", "right_shoulder", "left_hip", "right_hip", "neck")
LIMB_BONES = tuple((f"{s}_{a}", f"{s}_{b}") for s in ("left", "right")
                   for a, b in (("shoulder", "elbow"), ("elbow", "wrist"), ("hip", "knee"), ("knee", "ankle")))


@dataclass(frozen=True)
class BodyPriorOptions:
    torso_weight: float = 1.0  # 0 = torso points as measured, 1 = on the rigid fit
    limb_weight: float = 1.0  # 0 = bones as measured, 1 = at the median length
    rounds: int = 3
    window: int = 150  # frames of the medians (6 s at 25 fps)


def apply_body_prior(joints: np.ndarray, estimated: np.ndarray, names, lag: int | None,
                     options: BodyPriorOptions = BodyPriorOptions(),
                     confidence: np.ndarray | None = None) -> np.ndarray:
    """``joints`` [T,J,3] (metric, NaN = unknown), ``estimated`` [T,J] -> a corrected copy.
    Only measured joints are moved or used; ``confidence`` [T,J] in (0, 1] (keypoint scores)
    weights them: a doubtful end of a bone takes more of its correction, a doubtful torso point
    counts less in the fit."""
    out = np.array(joints, np.float64)
    conf = np.ones(out.shape[:2]) if confidence is None else np.clip(np.asarray(confidence, np.float64), 0.05, 1.0)
    var = 1.0 / conf ** 2
    names = list(names)
    measured = np.isfinite(out).all(-1) & ~np.asarray(estimated, bool)
    t_len = len(out)
    if options.torso_weight > 0 and all(n in names for n in TORSO):
        idx = [names.index(n) for n in TORSO]
        shapes = _torso_shapes(out[:, idx], measured[:, idx])
        for t in range(t_len):
            ok = measured[t, idx]
            if ok.sum() < 3:
                continue
            lo, hi = evidence_window(t, t_len, lag, options.window)
            template = _median(shapes[lo:hi])
            use = ok & np.isfinite(template).all(-1)
            if use.sum() < 3:
                continue
            fit = _rigid_fit(template[use], out[t, idx][use], conf[t, idx][use] ** 2)
            moved = out[t, idx]
            moved[use] += options.torso_weight * (fit - moved[use])
            out[t, idx] = moved
    pairs = [(names.index(a), names.index(b)) for a, b in LIMB_BONES if a in names and b in names]
    if options.limb_weight > 0 and pairs:
        a, b = np.array(pairs).T
        both = measured[:, a] & measured[:, b]
        lengths = np.where(both, np.linalg.norm(out[:, b] - out[:, a], axis=-1), np.nan)
        for t in range(t_len):
            lo, hi = evidence_window(t, t_len, lag, options.window)
            target = _median(lengths[lo:hi])
            use = both[t] & np.isfinite(target)
            share_a = var[t, a] / (var[t, a] + var[t, b])  # of each correction, per end
            for _ in range(options.rounds):
                d = out[t, b] - out[t, a]
                n = np.linalg.norm(d, axis=-1)
                step = np.where(use & (n > 1e-6), options.limb_weight * (n - target) / np.maximum(n, 1e-6), 0.0)
                np.add.at(out[t], a, (share_a * step)[:, None] * d)
                np.add.at(out[t], b, -((1 - share_a) * step)[:, None] * d)
    return out


def evidence_window(t: int, t_len: int, lag: int | None, width: int) -> tuple[int, int]:
    """Frames [lo, hi) that frame ``t`` may use: ``width`` frames ending at t + lag, or offline
    (``lag`` None) centred on t."""
    if lag is None:
        lo = max(0, min(t - width // 2, t_len - width))
        return lo, min(t_len, lo + width)
    hi = min(t_len, t + lag + 1)
    return max(0, hi - width), hi


def _torso_shapes(points: np.ndarray, ok: np.ndarray) -> np.ndarray:
    """Each frame's torso points [T,P,3] in the torso's own frame (NaN where unknown)."""
    shapes = np.full(points.shape, np.nan)
    for t in range(len(points)):
        if not ok[t, :4].all():  # shoulders and hips define the frame
            continue
        p = points[t]
        across = (p[1] - p[0]) + (p[3] - p[2])
        up = (p[0] + p[1]) / 2 - (p[2] + p[3]) / 2
        x = across / (np.linalg.norm(across) + 1e-12)
        y = up - x * (up @ x)
        y /= np.linalg.norm(y) + 1e-12
        basis = np.stack([x, y, np.cross(x, y)])
        centre = p[:4].mean(0)
        shapes[t] = np.where(ok[t][:, None], (p - centre) @ basis.T, np.nan)
    return shapes


def _rigid_fit(template: np.ndarray, target: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """``template`` moved by the rotation and translation that best fit ``target`` (weighted Kabsch)."""
    w = weights / weights.sum()
    ct, cg = w @ template, w @ target
    u, _, vt = np.linalg.svd((template - ct).T @ ((target - cg) * w[:, None]))
    d = np.sign(np.linalg.det(u @ vt))
    r = u @ np.diag([1.0, 1.0, d]) @ vt
    return (template - ct) @ r + cg


def _median(values: np.ndarray) -> np.ndarray:
    """Median over the first axis, NaN where nothing was measured (quietly)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return np.nanmedian(values, axis=0)
