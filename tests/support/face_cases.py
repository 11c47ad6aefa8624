# SPDX-License-Identifier: GPL-3.0-or-later
"""Ground-truth faces for the expression fit: a fitted body (body_scenes "standing") given known
ARKit weights, its 31 face landmarks skinned, placed and projected exactly (anny's own model:
rest + offsets, then linear blend skinning) into Goliath keypoints, with Gaussian landmark noise
in units of the face's height (nasion to chin); a camera that sees the face ~140 px high (a
half-body 1080p frame). Used by tests/sapiens_blender/core/body/test_expression_fit.py and
benchmarks/bench_expressions.py.
"""

from __future__ import annotations

import numpy as np

from sapiens_blender.core.body.pose import skin_vertices
from sapiens_blender.core.maps.goliath import KEYPOINT_INDEX, KEYPOINT_NAMES

INTRINSICS = np.array([[4000.0, 0.0, 960.0], [0.0, 4000.0, 540.0], [0.0, 0.0, 1.0]])
NOISE = 0.01  # landmark std per coordinate, face heights (~1.4 px here; ~2 % of the eyes' distance)
SCORE = 0.9

# Named expressions (ARKit weights): what the issue asks to recover.
CASES = {
    "neutral": {},
    "jaw_open": {"jawOpen": 0.8},
    "shout": {"jawOpen": 1.0, "browInnerUp": 0.6, "eyeWideLeft": 0.5, "eyeWideRight": 0.5},
    "smile": {"mouthSmileLeft": 0.8, "mouthSmileRight": 0.8},
    "smirk": {"mouthSmileLeft": 0.7, "jawLeft": 0.3},
    "blink": {"eyeBlinkLeft": 1.0, "eyeBlinkRight": 1.0},
    "wink": {"eyeBlinkRight": 1.0, "mouthSmileRight": 0.4},
    "brows_up": {"browInnerUp": 0.8, "browOuterUpLeft": 0.7, "browOuterUpRight": 0.7},
    "frown": {"browDownLeft": 0.7, "browDownRight": 0.7, "mouthFrownLeft": 0.6, "mouthFrownRight": 0.6},
    "pucker": {"mouthPucker": 0.9},
    "stretch": {"mouthStretchLeft": 0.6, "mouthStretchRight": 0.6, "jawOpen": 0.3},
    "asymmetric": {"browOuterUpRight": 0.8, "eyeBlinkLeft": 0.6, "mouthFrownLeft": 0.5, "jawRight": 0.4},
}


def values_of(template, case: dict) -> np.ndarray:
    out = np.zeros(len(template.expression_names))
    for name, v in case.items():
        out[template.expression_names.index(name)] = v
    return out


def landmark_pixels(template, fit, index: int, values: np.ndarray, bone_matrices=None,
                    intrinsics: np.ndarray = INTRINSICS) -> np.ndarray:
    """[L,2] exact pixels of the template's face landmarks for weights ``values`` [E]."""
    rest = fit.rest_vertices[index].astype(np.float64).copy()
    rest[template.expression_vertices] += np.tensordot(values, template.expression_deltas.astype(np.float64), 1)
    v = template.face_landmark_vertices
    bones = fit.bone_matrices[index] if bone_matrices is None else bone_matrices
    posed = skin_vertices(rest[v], fit.rest_bone_matrices[index], bones, template.weight_bones[v],
                          template.weight_values[v])
    cam = posed @ fit.placement[index, :3, :3].T.astype(np.float64) + fit.placement[index, :3, 3]
    return cam[:, :2] / cam[:, 2:] * intrinsics[[0, 1], [0, 1]] + intrinsics[:2, 2]


def face_height(template, pixels: np.ndarray) -> float:
    names = template.face_landmark_names
    return float(np.linalg.norm(pixels[names.index("center_of_nose_root")] - pixels[names.index("tip_of_chin")]))


def keypoints(template, fit, index: int, values: np.ndarray, rng, noise: float = NOISE, **kw) -> np.ndarray:
    """Goliath keypoints [308,3]: the face landmarks (noisy), every other point unseen."""
    px = landmark_pixels(template, fit, index, values, **kw)
    neutral = landmark_pixels(template, fit, index, np.zeros_like(values), **kw)
    px = px + rng.normal(0.0, noise * face_height(template, neutral), px.shape)
    kp = np.zeros((len(KEYPOINT_NAMES), 3), np.float32)
    rows = [KEYPOINT_INDEX[n] for n in template.face_landmark_names]
    kp[rows, :2] = px
    kp[rows, 2] = SCORE
    return kp


def talking(template, frames: int = 40) -> np.ndarray:
    """[T,E] a talking face: the jaw opening and closing on syllables, a smile building up, a
    blink held 2 frames (13-14) and one held 3 (30-32), the brows raised mid-sentence."""
    t = np.arange(frames, dtype=np.float64)
    out = np.zeros((frames, len(template.expression_names)))
    names = template.expression_names
    out[:, names.index("jawOpen")] = 0.35 * (1 - np.cos(2 * np.pi * t / 6.0)) * (t > 2)
    out[:, names.index("mouthSmileLeft")] = out[:, names.index("mouthSmileRight")] = np.clip((t - 10) / 20, 0, 0.6)
    out[:, names.index("browInnerUp")] = 0.5 * np.exp(-0.5 * ((t - 22) / 4.0) ** 2)
    for blink in ((13, 15), (30, 33)):
        out[blink[0]:blink[1], names.index("eyeBlinkLeft")] = 1.0
        out[blink[0]:blink[1], names.index("eyeBlinkRight")] = 1.0
    return out


def talking_track(scene, seed: int = 0, lag: int | None = 2):
    """(a track-like object with a fitted body held still and per-frame keypoints of the talking
    face, its truth [T,E]) for core/motion/face.track_expressions."""
    from types import SimpleNamespace

    from sapiens_blender.core.motion.body_drive import BodyMotion, TrackBody

    t, f = scene.template, scene.fit
    truth = talking(t)
    rng = np.random.default_rng(seed)
    kp = np.stack([keypoints(t, f, 0, v, rng) for v in truth])
    bones = np.repeat(f.bone_matrices[:1], len(truth), axis=0)
    motion = BodyMotion(bones, np.zeros((len(truth), len(t.joint_names), 3)), np.zeros(len(truth)))
    body = TrackBody(t, f, int(f.person_ids[0]), 0, motion, lag)
    return SimpleNamespace(id=1, body=body, keypoints=kp), truth
