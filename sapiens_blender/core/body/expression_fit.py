# SPDX-License-Identifier: GPL-3.0-or-later
"""The photo's facial expression from its face keypoints: ARKit weights for the fitted body.

The evidence is the Goliath face keypoints the analysis gives (Sapiens' own, or the offline
backend's face mesh mapped onto them): the 31 the template names an anny vertex for
(``face_landmark_names``, inference_server/fit/face_landmarks.py). With the body's pose fixed,
each landmark's camera position is linear in the weights (the offsets are skinned by the
vertex's blended bone transform); projected, it is linearised at the neutral face (offsets are
centimetres at metres: the error is far below a pixel). Then:
1. a 2D similarity aligns the model's neutral stable points (eye corners, nose) with the
   observed ones: it absorbs the face's size and place and most of the head's pose error;
2. the driven weights solve a ridge least squares with 0 <= w <= 1 (an active set on the
   normal equations: 19 + 7 unknowns, a few small solves), together with what is not an
   expression (HEAD_POSE): a correction of the head's pose (a 3D turn about the head's centre, a
   2D shift and scale; the body fit's head can be 10 degrees off a real head, and the similarity
   alone leaves the far side of the face displaced, read as brows and smiles) and the mouth's
   height on the face (a person's philtrum, not a smile);
3. the turn is linear (right for a few degrees): when it comes out over ~3 degrees, the
   landmarks and their offsets are turned by it and 2 is solved again there (up to TURN_STEPS
   times; a three-quarter face on a body fit looking ahead needs ~60 degrees).
Calibrated landmark vertices (face_landmarks.CALIBRATED) and a ridge that grows for small faces
(NOISE_PX) keep real neutral faces near 0 (docs/expressions.md, benchmarks/bench_real_faces.py).
Residuals are in units of the face's height (nasion to chin), so one ridge fits every photo size.
Keys no landmark can tell apart (tongue, cheek puff, depth-only motions) are not driven: 0.
numpy only: it runs in Blender (build, animate) and in benchmarks.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..maps.goliath import KEYPOINT_INDEX

# The keys the 31 landmarks measure, each moving them in its own way (docs/expressions.md).
DRIVEN = (
    "jawOpen", "eyeBlinkLeft", "eyeBlinkRight", "eyeWideLeft", "eyeWideRight", "browInnerUp",
    "browDownLeft", "browDownRight", "browOuterUpLeft", "browOuterUpRight", "mouthSmileLeft",
    "mouthSmileRight", "mouthFrownLeft", "mouthFrownRight", "mouthPucker", "mouthStretchLeft",
    "mouthStretchRight", "jawLeft", "jawRight",
)
# Points no expression of DRIVEN moves much: they place and size the face.
STABLE = ("l_inner_end_of_upper_lash_line", "r_inner_end_of_upper_lash_line",
          "l_outer_end_of_upper_lash_line", "r_outer_end_of_upper_lash_line",
          "center_of_nose_root", "tip_of_nose", "bottom_center_of_nose")
MIN_SCORE = 0.3  # keypoint score below which a face point is not used
# In (face heights)^2, tuned on the ground truth (tests/sapiens_blender/core/body/test_expression_fit.py):
# at 1 % landmark noise the mean error is 0.082 at 1e-3, 0.075 at 2e-3, 0.073 at 4e-3 (but the
# largest values shrink more).
RIDGE = 2e-3
# What is not an expression, solved after the keys: a turn of the head about the camera's x, y, z
# axes (radians) about its centre, a shift (face heights) and a scale, all unbounded with a small
# ridge (the stable points pin them down), and the mouth's height on the face (face heights).
HEAD_POSE = ("turn_x", "turn_y", "turn_z", "shift_x", "shift_y", "scale", "mouth_y")
POSE_RIDGE = 1e-4
# The mouth's height on the face varies between people by a few % of the face's height: its ridge
# is a prior of that size (std ~ 1 % landmark noise / sqrt(ridge)).
MOUTH_RIDGE = 0.1
# A detector's landmark noise in pixels, whatever the face's size (~1 % of a 140 px face, what
# RIDGE was tuned for): a smaller face's points are noisier in face heights, so its ridge grows
# as (noise / 1 %)^2 and its weights shrink towards neutral instead of reading the noise.
NOISE_PX = 1.4
HEAD_DEPTH_M = 0.09  # the head's centre behind its face points (rotation pivot)
# The head's turn is linear in the solve (right for a few degrees): a larger one is applied to the
# landmarks and the solve repeated there, up to TURN_STEPS times.
TURN_STEPS = 3
TURN_TOLERANCE = 0.05  # radians (~3 degrees)


@dataclass
class FaceRig:
    """One person's face at one pose: what the solver needs, built once per frame."""

    names: tuple[str, ...]  # landmark names (Goliath)
    neutral: np.ndarray  # [L,2] pixels: the neutral face's landmarks
    jacobian: np.ndarray  # [L,2,D] pixels per unit weight of each DRIVEN key
    driven: np.ndarray  # [D] index of each DRIVEN key in the template's names
    pose_jacobian: np.ndarray | None = None  # [L,2,7] pixels per unit of each HEAD_POSE unknown
    camera: tuple | None = None  # (cam [L,3], d_cam [L,D,3], centre [3], intrinsics): to turn the head


def face_rig(template, rest_vertices, rest_bones, pose_bones, placement, intrinsics) -> FaceRig | None:
    """The face's landmarks and their derivatives for a fitted body (model-frame rest vertices
    [V,3], rest/pose bone matrices [B,4,4], placement [4,4], intrinsics [3,3]); None when the
    template has no expressions or landmarks."""
    if not template.expression_names or not template.face_landmark_names:
        return None
    names = template.face_landmark_names
    verts = template.face_landmark_vertices
    driven = np.array([template.expression_names.index(n) for n in DRIVEN])
    # Each landmark's offsets [L,D,3] (zero where the key does not move it).
    pos = np.searchsorted(template.expression_vertices, verts)
    pos = np.minimum(pos, len(template.expression_vertices) - 1)
    hit = template.expression_vertices[pos] == verts
    offsets = np.where(hit[:, None, None], template.expression_deltas[driven][:, pos].transpose(1, 0, 2), 0.0)
    # Linear blend skinning of these few vertices, then the placement: x_cam = A (r + d) + b.
    bones, slot = np.unique(template.weight_bones[verts], return_inverse=True)  # only their bones
    transforms = np.asarray(pose_bones, np.float64)[bones] @ np.linalg.inv(np.asarray(rest_bones, np.float64)[bones])
    w = template.weight_values[verts].astype(np.float64)
    blended = np.einsum("lk,lkij->lij", w, transforms[slot.reshape(len(verts), -1)])
    full = np.asarray(placement, np.float64) @ blended  # [L,4,4]
    rest = np.asarray(rest_vertices, np.float64)[verts]
    cam = np.einsum("lij,lj->li", full[:, :3, :3], rest) + full[:, :3, 3]
    d_cam = np.einsum("lij,ldj->ldi", full[:, :3, :3], offsets.astype(np.float64))  # [L,D,3]
    k = np.asarray(intrinsics, np.float64)
    centre = cam.mean(0)
    centre = centre + HEAD_DEPTH_M * centre / max(np.linalg.norm(centre), 1e-9)
    return _project(tuple(names), cam, d_cam, centre, k, driven)


def _project(names, cam, d_cam, centre, k, driven) -> FaceRig:
    """The rig of landmarks at camera positions ``cam`` [L,3] moved by ``d_cam`` [L,D,3] per unit
    weight, the head turning about ``centre``."""
    z = np.maximum(cam[:, 2], 1e-6)
    neutral = np.stack([k[0, 0] * cam[:, 0] / z + k[0, 2], k[1, 1] * cam[:, 1] / z + k[1, 2]], 1)
    # d(u,v)/d(x_cam) at the neutral face, then through the offsets
    jx = np.stack([np.stack([k[0, 0] / z, np.zeros_like(z), -k[0, 0] * cam[:, 0] / z ** 2], 1),
                   np.stack([np.zeros_like(z), k[1, 1] / z, -k[1, 1] * cam[:, 1] / z ** 2], 1)], 1)  # [L,2,3]
    jacobian = np.einsum("lci,ldi->lcd", jx, d_cam)
    # The head's pose: a turn about its centre (behind the face points along the line of sight)
    arm = cam - centre
    turns = np.stack([np.cross(np.eye(3)[k], arm) for k in range(3)], 2)  # [L,3,3]: dP/dturn_k
    at = list(names).index
    size = np.linalg.norm(neutral[at("center_of_nose_root")] - neutral[at("tip_of_chin")])
    shift = np.broadcast_to(np.eye(2) * size, (len(names), 2, 2))
    scale = (neutral - neutral.mean(0))[:, :, None]
    # mouth_y: the whole mouth higher or lower on the face (the philtrum's length is a person's own,
    # not an expression; a smile lifts the corners above the lips' centres, a jaw opens the lips)
    mouth = np.array([("lip" in n or "mouth" in n or "cupid" in n) for n in names], np.float64)
    mouth_y = (mouth[:, None] * np.array([0.0, size]))[:, :, None]
    pose = np.concatenate([np.einsum("lci,lik->lck", jx, turns), shift, scale, mouth_y], 2)
    return FaceRig(tuple(names), neutral, jacobian, driven, pose, (cam, d_cam, centre, k))


def _turned(rig: FaceRig, turn: np.ndarray) -> FaceRig:
    """``rig`` with the head turned by the rotation vector ``turn`` (camera axes, radians) about its
    centre: the landmarks and their offsets, then linearised again there."""
    cam, d_cam, centre, k = rig.camera
    angle = float(np.linalg.norm(turn))
    axis = turn / max(angle, 1e-12)
    cross = np.array([[0, -axis[2], axis[1]], [axis[2], 0, -axis[0]], [-axis[1], axis[0], 0]])
    rot = np.eye(3) + np.sin(angle) * cross + (1 - np.cos(angle)) * cross @ cross
    return _project(rig.names, centre + (cam - centre) @ rot.T, d_cam @ rot.T, centre, k, rig.driven)


def _similarity(src: np.ndarray, dst: np.ndarray, w: np.ndarray):
    """(s, R, t) minimising sum w |s R src + t - dst|^2 (2D, Umeyama)."""
    w = w / w.sum()
    ms, md = w @ src, w @ dst
    a, b = src - ms, dst - md
    cov = (b * w[:, None]).T @ a
    u, sv, vt = np.linalg.svd(cov)
    d = np.diag([1.0, np.sign(np.linalg.det(u @ vt))])
    rot = u @ d @ vt
    var = float((w * (a * a).sum(1)).sum())
    s = float((sv * np.diag(d)).sum() / max(var, 1e-12))
    return s, rot, md - s * rot @ ms


def _box_least_squares(h: np.ndarray, g: np.ndarray, low=0.0, high=1.0) -> np.ndarray:
    """argmin 1/2 e'He - g'e over low <= e <= high (H positive definite; bounds scalars or
    arrays, +-inf for a free unknown): an active set. Unknowns that leave the box are held at
    their bound and the rest solved again; a held one whose gradient points back inside is
    freed. A few 26x26 solves."""
    d = len(g)
    low, high = np.broadcast_to(np.asarray(low, np.float64), (d,)), np.broadcast_to(np.asarray(high, np.float64), (d,))
    lo, hi = np.zeros(d, bool), np.zeros(d, bool)
    e = np.zeros(d)
    for _ in range(3 * d):
        free = ~(lo | hi)
        e = np.where(hi, high, np.where(lo, low, 0.0))
        if free.any():
            rhs = g[free] - h[np.ix_(free, ~free)] @ e[~free]
            e[free] = np.linalg.solve(h[np.ix_(free, free)], rhs)
        below, above = free & (e < low), free & (e > high)
        if below.any() or above.any():
            lo |= below
            hi |= above
            continue
        grad = h @ e - g
        wrong = (lo & (grad < -1e-12)) | (hi & (grad > 1e-12))
        if not wrong.any():
            return e
        k = int(np.argmax(np.where(wrong, np.abs(grad), -1.0)))
        lo[k] = hi[k] = False
    return np.clip(e, low, high)


def _design(rig: FaceRig, size: float, ridge: float):
    """(jacobian [L,2,D+P] in face heights, ridge diagonal, low, high): the keys and, when the rig
    has it, the head pose correction."""
    j = rig.jacobian / size
    d = j.shape[2]
    if rig.pose_jacobian is None:
        return j, np.full(d, ridge), np.zeros(d), np.ones(d)
    p = rig.pose_jacobian.shape[2]
    diag = np.r_[np.full(d, ridge), np.full(p - 1, POSE_RIDGE), MOUTH_RIDGE]
    return (np.concatenate([j, rig.pose_jacobian / size], 2), diag,
            np.r_[np.zeros(d), np.full(p, -np.inf)], np.r_[np.ones(d), np.full(p, np.inf)])


def _solve(rig: FaceRig, obs, score, ok, stable, ridge) -> np.ndarray:
    """The keys and HEAD_POSE unknowns [D+P] for observations ``obs`` [L,2] at ``rig``."""
    s, rot, t = _similarity(rig.neutral[stable], obs[stable], score[stable])
    back = ((obs - t) @ rot) / s  # the observations in the neutral face's frame
    size = np.linalg.norm(rig.neutral[rig.names.index("center_of_nose_root")]
                          - rig.neutral[rig.names.index("tip_of_chin")])
    r = ((back - rig.neutral)[ok] / size).reshape(-1)
    ridge = ridge * max(1.0, (NOISE_PX / (0.01 * s * size)) ** 2)  # s * size: the face's height in the photo
    design, diag, low, high = _design(rig, size, ridge)
    j = design[ok].reshape(-1, design.shape[2])
    wts = np.repeat(score[ok], 2)
    h = j.T @ (j * wts[:, None]) + np.diag(diag)
    g = j.T @ (r * wts)
    return _box_least_squares(h, g, low, high)


def fit_expression(rig: FaceRig, keypoints: np.ndarray, n_expressions: int, ridge: float = RIDGE) -> np.ndarray | None:
    """float32 [E] weights (template order; undriven keys 0) from Goliath keypoints [308,3]
    (x, y, score in pixels), or None when the face is not seen well enough (fewer than 4 stable
    points or 12 landmarks)."""
    kp = np.asarray(keypoints, np.float64)
    rows = np.array([KEYPOINT_INDEX[n] for n in rig.names])
    obs, score = kp[rows, :2], kp[rows, 2]
    ok = (score >= MIN_SCORE) & np.isfinite(obs).all(1)
    stable = ok & np.isin(np.array(rig.names), STABLE)
    if stable.sum() < 4 or ok.sum() < 12:
        return None
    e = _solve(rig, obs, score, ok, stable, ridge)
    d = len(rig.driven)
    for _ in range(TURN_STEPS if rig.camera is not None and rig.pose_jacobian is not None else 0):
        turn = e[d:d + 3]
        if np.linalg.norm(turn) < TURN_TOLERANCE:
            break
        rig = _turned(rig, turn)
        e = _solve(rig, obs, score, ok, stable, ridge)
    out = np.zeros(n_expressions, np.float32)
    out[rig.driven] = e[:len(rig.driven)]
    return out


def weight_noise(rig: FaceRig, noise: float = 0.01, ridge: float = RIDGE) -> np.ndarray:
    """[D] the std of each driven weight the fit gives for landmark noise of ``noise`` face
    heights (the ridge estimator's covariance, every landmark seen): how much a clip's smoother
    may trust each key (the jaw ~0.02, a lid's widening ~0.1)."""
    size = np.linalg.norm(rig.neutral[rig.names.index("center_of_nose_root")]
                          - rig.neutral[rig.names.index("tip_of_chin")])
    design, diag, _low, _high = _design(rig, size, ridge)
    j = design.reshape(-1, design.shape[2])
    jtj = j.T @ j
    inv = np.linalg.inv(jtj + np.diag(diag))
    return noise * np.sqrt(np.diag(inv @ jtj @ inv))[:len(rig.driven)]


def person_expression(template, fit, index: int, keypoints, intrinsics) -> np.ndarray | None:
    """The expression of person ``index`` of a body fit, from that person's keypoints [308,3]."""
    rig = face_rig(template, fit.rest_vertices[index], fit.rest_bone_matrices[index], fit.bone_matrices[index],
                   fit.placement[index], intrinsics)
    return None if rig is None else fit_expression(rig, keypoints, len(template.expression_names))


def photo_expression(template, fit, index: int, maps, person_id: int) -> tuple[np.ndarray, str]:
    """(weights [E], where they come from) for a body built from ``maps``: the fit's own values
    when it carries them (another ARKit source, a ground truth), else fitted to the photo's face
    keypoints, else neutral."""
    n = len(template.expression_names)
    if fit.expressions is not None and fit.expressions.shape[1] == n:
        return np.clip(fit.expressions[index], 0.0, 1.0).astype(np.float32), "the fit's expression values"
    try:
        kp = maps.person_keypoints(person_id)
    except (IndexError, ValueError, KeyError):
        kp = None
    values = None if kp is None else person_expression(template, fit, index, kp, maps.intrinsics)
    if values is None:
        return np.zeros(n, np.float32), "neutral: the face keypoints were not seen"
    return values, "fitted to the photo's face keypoints"
