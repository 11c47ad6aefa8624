# SPDX-License-Identifier: GPL-3.0-or-later
"""A second opinion on a person's 3D pose: the 12 limb joints lifted from their 2D keypoints
by a small network learned from real human motion.

The offline backend's 3D pose (MediaPipe's world landmarks) comes from the same image features
as its 2D keypoints, and on real photos it is the fit's weakest cue (docs/body_fit.md "A
learned lifting"). This network sees only where the 12 joints lie in the picture and answers
with the pose that real people most often strike to look like that. Its errors are not
MediaPipe's, so the two averaged beat either alone; observations.py blends them into the pose
the fit's world term follows.

Learned by benchmarks/learn_lifting.py from the CMU Graphics Lab Motion Capture Database
(mocap.cs.cmu.edu, NSF EIA-0196217), each frame seen through random cameras; only the
network's weights are shipped (lifting.json, float16). numpy only: it runs once per person.

Conventions. The input is the joints' pixels and the camera's intrinsics. The rays are turned
so that the hips' centre lies on the optical axis (the view a camera pointed at the person
would have: a person at the edge of a wide lens is seen obliquely), projected, centred on the
hips and scaled to unit spread. The output is in that turned camera's axes (x right, y down,
z away), hips at 0, unit spread, and is turned back to the camera's axes.

The network learned from cameras held level, so it knows people whose torsos stand up in the
picture. A person lying down, upside down, or photographed with the camera on its side is
rolled first (about the turned camera's axis, so that the hips-to-shoulders line points up),
lifted, and the answer rolled back: the lifting then answers any roll of the picture alike
(docs/body_fit.md "Lying people: the lifting turned upright").
"""

from __future__ import annotations

import base64
import functools
import json
from pathlib import Path

import numpy as np

from ..processing.goliath import mirror_order
from .alignment import rotation_between, similarity_onto

DATA = Path(__file__).with_name("lifting.json")
# The joints lifted, in this order (the inputs' and outputs' rows).
LIFT_JOINTS = ("right_shoulder", "right_elbow", "right_wrist", "left_shoulder", "left_elbow",
               "left_wrist", "right_hip", "right_knee", "right_ankle", "left_hip", "left_knee",
               "left_ankle")
HIPS = (LIFT_JOINTS.index("right_hip"), LIFT_JOINTS.index("left_hip"))
# The same joints with the body's sides exchanged (a mirrored view's rows).
MIRROR = mirror_order(LIFT_JOINTS)
MIN_SPREAD_PX = 1.0  # joints spread over less than a pixel hold no pose
SHOULDERS = (LIFT_JOINTS.index("right_shoulder"), LIFT_JOINTS.index("left_shoulder"))
# The torso's picture (hips' centre to shoulders' centre, x the joints' RMS spread) below which
# its direction is noise (a torso seen end-on, from above): the roll fades out from UPRIGHT_FULL
# down to UPRIGHT_NONE (an upright adult's is about 0.6).
UPRIGHT_FULL, UPRIGHT_NONE = 0.3, 0.1
LAYER_NORM_EPS = 1e-5  # torch.nn.LayerNorm's default, which the weights were learned with


def normalize_2d(uv: np.ndarray) -> np.ndarray:
    """[...,12,2] -> [...,24]: centred on the hips, divided by the joints' RMS distance from there."""
    x = uv - uv[..., HIPS, :].mean(-2, keepdims=True)
    s = np.sqrt((x ** 2).sum(-1).mean(-1))[..., None, None]
    return (x / np.maximum(s, 1e-12)).reshape(*uv.shape[:-2], -1)


def unit_spread(xyz: np.ndarray) -> np.ndarray:
    """[...,12,3] with the hips' centre at 0 and the joints' RMS distance from it 1."""
    x = xyz - xyz[..., HIPS, :].mean(-2, keepdims=True)
    return x / np.maximum(np.sqrt((x ** 2).sum(-1).mean(-1)), 1e-12)[..., None, None]


def centring_turn(xy: np.ndarray, intrinsics: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(uv [12,2] the joints seen by a camera turned to look at the hips' centre, turn [3,3] from
    the camera's axes to that camera's): the smallest rotation taking the hips' ray to +z."""
    rays = np.c_[np.asarray(xy, np.float64), np.ones(len(xy))] @ np.linalg.inv(intrinsics).T
    turn = rotation_between(rays[list(HIPS)].mean(0), np.array([0.0, 0.0, 1.0]))
    q = rays @ turn.T
    return q[:, :2] / q[:, 2:], turn


def upright_roll(uv: np.ndarray) -> float:
    """The angle (radians) to turn the picture ``uv`` [12,2] (x right, y down) about the hips'
    centre by for the hips-to-shoulders line to point up: 0 for an upright torso, about -pi/2
    for a person lying with the head to the right. Faded to 0 where the torso's picture is short
    (UPRIGHT_FULL, UPRIGHT_NONE): its direction is unknown there."""
    uv = np.asarray(uv, np.float64)
    hips = uv[list(HIPS)].mean(0)
    torso = uv[list(SHOULDERS)].mean(0) - hips
    spread = np.sqrt(((uv - hips) ** 2).sum(-1).mean())
    length = float(np.linalg.norm(torso)) / max(float(spread), 1e-12)
    fade = float(np.clip((length - UPRIGHT_NONE) / (UPRIGHT_FULL - UPRIGHT_NONE), 0.0, 1.0))
    return -fade * float(np.arctan2(torso[0], -torso[1]))


def roll_about_axis(angle: float) -> np.ndarray:
    """[3,3] the rotation about the camera's z by ``angle``: its top-left [2,2] turns pictures."""
    c, s = np.cos(angle), np.sin(angle)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])


class Lifter:
    """The learned network: Linear, LayerNorm, ReLU; residual blocks of two such; Linear."""

    def __init__(self, arrays: dict):
        self.a = {k: np.asarray(v, np.float32) for k, v in arrays.items()}
        self.blocks = int(self.a["blocks"].reshape(-1)[0])

    @staticmethod
    def _norm_relu(x, g, b):
        m = x.mean(-1, keepdims=True)
        v = ((x - m) ** 2).mean(-1, keepdims=True)
        return np.maximum((x - m) / np.sqrt(v + LAYER_NORM_EPS) * g + b, 0.0)

    def _layer(self, x, name):
        a = self.a
        return self._norm_relu(x @ a[f"{name}.w"].T + a[f"{name}.b"], a[f"{name}.g"], a[f"{name}.beta"])

    def __call__(self, x: np.ndarray) -> np.ndarray:
        """[N,24] normalize_2d inputs -> [N,12,3] unit-spread joints in the same camera's axes."""
        h = self._layer(np.asarray(x, np.float32), "in")
        for i in range(self.blocks):
            h = h + self._layer(self._layer(h, f"block{i}.0"), f"block{i}.1")
        return (h @ self.a["out.w"].T + self.a["out.b"]).reshape(len(h), len(LIFT_JOINTS), 3)


def read_arrays(path: Path = DATA) -> dict:
    """The stored arrays by name ({"shape", "dtype", "base64"} each, little-endian)."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    return {k: np.frombuffer(base64.b64decode(v["base64"]), np.dtype(v["dtype"]).newbyteorder("<"))
            .reshape(v["shape"]) for k, v in raw.items()}


def write_arrays(path: Path, arrays: dict) -> None:
    out = {}
    for k, v in arrays.items():
        a = np.asarray(v)
        a = np.ascontiguousarray(a, a.dtype.newbyteorder("<"))
        out[k] = {"shape": list(a.shape), "dtype": a.dtype.str, "base64": base64.b64encode(a.tobytes()).decode()}
    Path(path).write_text(json.dumps(out, separators=(",", ":")), encoding="utf-8")


@functools.lru_cache(maxsize=2)
def load(path: Path = DATA) -> Lifter:
    return Lifter(read_arrays(path))


def lift(xy: np.ndarray, intrinsics: np.ndarray, lifter: Lifter | None = None) -> np.ndarray | None:
    """[12,3] LIFT_JOINTS in the camera's axes, hips at 0, unit spread, from their pixels ``xy``
    [12,2] (extrapolated ones too); None where any is not finite or all lie within a pixel."""
    xy = np.asarray(xy, np.float64)
    if xy.shape != (len(LIFT_JOINTS), 2) or not np.isfinite(xy).all() or np.ptp(xy, 0).max() < MIN_SPREAD_PX:
        return None  # nothing to read a pose from (joints missing, or all on one pixel)
    uv, turn = centring_turn(xy, np.asarray(intrinsics, np.float64))
    roll = roll_about_axis(upright_roll(uv))  # the hips lie on the axis: a roll turns the picture
    out = (lifter or load())(normalize_2d(uv @ roll[:2, :2].T)[None])[0].astype(np.float64)
    return unit_spread(out @ roll @ turn)  # rows are vectors: v_cam = turn^T roll^T v_rolled


def blend(world: np.ndarray, lifted: np.ndarray, share: float) -> np.ndarray:
    """The 12 limb joints ``world`` [12,3] (metres) moved ``share`` of the way to ``lifted``
    [12,3] laid onto them (rotation, scale and shift: the lifted pose has no size or place)."""
    return (1.0 - share) * world + share * similarity_onto(lifted, world)


__all__ = ["LIFT_JOINTS", "Lifter", "blend", "centring_turn", "lift", "load", "normalize_2d",
           "read_arrays", "roll_about_axis", "unit_spread", "upright_roll", "write_arrays"]
