# SPDX-License-Identifier: GPL-3.0-or-later
"""A pose prior learned from real human motion: how likely each arm and leg's pose is.

Learned by benchmarks/learn_pose_prior.py from the CMU Graphics Lab Motion Capture Database
(mocap.cs.cmu.edu, NSF EIA-0196217) and shipped as its parameters only (pose_prior.json: JSON,
since the extension zip leaves .npz files out).

Rig-agnostic: it reads joint positions, not a rig's rotations, so the mocap skeleton and anny's
regressed joints give the same features. Per limb, its upper and lower bone's unit directions
in a frame of the torso (6 numbers): the pelvis frame for a leg (hips across, the torso up),
the chest frame for an arm (shoulders across). Both bones in the torso's frame, rather than the
lower in the upper's: a frame on the upper bone needs a twist reference that fails where the
bone lies along it (an arm held out sideways). Left limbs are mirrored onto right ones, so one
Gaussian mixture per kind of limb serves both sides; the mocap's legs are shifted onto anny's
rig before learning (its hips are a COCO regressor's, not femur heads). The energy is the
mixture's negative log-likelihood less the mocap's best (about 0 for a common pose).
Where it weighs in the fit: terms.GroupTerms; measured: docs/body_fit.md "Pose prior".
"""

from __future__ import annotations

import json

from pathlib import Path

import numpy as np
import torch

from .correspondences import JOINT_NAMES

DATA = Path(__file__).with_name("pose_prior.json")
# The joints the features read, in this order (index 0-5 left, 6-11 right).
FEATURE_JOINTS = tuple(f"{s}_{j}" for s in ("left", "right")
                       for j in ("shoulder", "elbow", "wrist", "hip", "knee", "ankle"))
LIMBS = ("right_arm", "left_arm", "right_leg", "left_leg")
KINDS = ("arm", "arm", "leg", "leg")  # which mixture scores each limb


def _unit(x: torch.Tensor) -> torch.Tensor:
    return x / x.norm(dim=-1, keepdim=True).clamp_min(1e-9)


# The bones read, each (start, end) in FEATURE_JOINTS, in LIMBS' order (upper bone, lower bone
# per limb), and the torso's axes (left to right): shoulders for the arms, hips for the legs.
_BONES = (("right_shoulder", "right_elbow"), ("right_elbow", "right_wrist"),
          ("left_shoulder", "left_elbow"), ("left_elbow", "left_wrist"),
          ("right_hip", "right_knee"), ("right_knee", "right_ankle"),
          ("left_hip", "left_knee"), ("left_knee", "left_ankle"))
_AXES = (("left_shoulder", "right_shoulder"), ("left_hip", "right_hip"))
# Where each of them sits among the selected joints: starts, ends, the axes' left and right ends.
_SELECT = tuple(FEATURE_JOINTS.index(n) for n in [a for a, _ in _BONES] + [b for _, b in _BONES]
                + [a for a, _ in _AXES] + [b for _, b in _AXES])
# A left limb's features are its mirror image's as a right one's: the body's frame with x (left
# to right) negated; reflect a whole body and swap its sides, and its right limbs get what its
# left had (pose_prior.py's tests check it).
_SIGN = [[1.0, 1.0, 1.0]] * 2 + [[-1.0, 1.0, 1.0]] * 2 + [[1.0, 1.0, 1.0]] * 2 + [[-1.0, 1.0, 1.0]] * 2


def _features(joints: torch.Tensor, select: torch.Tensor, sign: torch.Tensor) -> torch.Tensor:
    """[...,4,6] from the ``select`` rows of ``joints`` [...,N,3] (_SELECT's joints). Few, small
    operations: the fit evaluates it every step."""
    j = joints[..., select, :]
    starts, ends, left, right = j[..., :8, :], j[..., 8:16, :], j[..., 16:18, :], j[..., 18:, :]
    up = (left[..., :1, :] + right[..., :1, :] - left[..., 1:, :] - right[..., 1:, :]) / 2
    # The torso's frames held (detached): the prior turns a limb against its torso, never the
    # torso to suit a limb (an unseen leg bent the seen spine, 4.5 cm on the ground truth's half body).
    up, left, right = up.detach(), left.detach(), right.detach()
    x = _unit(right - left)  # [...,2 (chest, pelvis),3]
    z = _unit(up - (up * x).sum(-1, keepdim=True) * x)
    frames = torch.stack([x, torch.linalg.cross(z, x), z], -1)  # [...,2,3,3] columns x, y, z
    bones = _unit(ends - starts)
    local = torch.cat([bones[..., :4, :] @ frames[..., 0, :, :], bones[..., 4:, :] @ frames[..., 1, :, :]], -2)
    return (local * sign).reshape(*local.shape[:-2], 4, 6)


def _mirrored(j: torch.Tensor) -> torch.Tensor:
    """Joints [...,12,3] (FEATURE_JOINTS) reflected (x -> -x), left and right swapped."""
    swap = list(range(6, 12)) + list(range(6))
    return j[..., swap, :] * torch.tensor([-1.0, 1.0, 1.0], dtype=j.dtype, device=j.device)


def limb_features(joints: torch.Tensor) -> torch.Tensor:
    """[...,4,6] the features of LIMBS (left ones mirrored) from joints [...,12,3] in
    FEATURE_JOINTS order (mocap or anny, any frame, any units)."""
    return _features(joints, torch.tensor(_SELECT, device=joints.device),
                     torch.tensor(_SIGN, dtype=joints.dtype, device=joints.device))


class PosePrior:
    """The shipped mixtures on one device and dtype. ``energy(joints)`` [...,4]: each limb's
    negative log-likelihood less the mixture's best (0 for the most common pose)."""

    def __init__(self, data: dict, dtype=torch.float32, device="cpu"):
        real = lambda a: torch.as_tensor(np.asarray(a), dtype=dtype, device=device)  # noqa: E731
        # Per kind: means [K,D], inverse covariance's Cholesky factor [K,D,D] (maha = |L^T (x-mu)|^2)
        # and log weight less half the log-determinant [K], all stacked over KINDS' rows.
        order = [("arm", "leg").index(k) for k in KINDS]
        self.means = real(data["means"])[order]  # [4,K,D]
        self.prec_chol = real(data["prec_chol"])[order]  # [4,K,D,D]
        self.log_norm = real(data["log_norm"])[order]  # [4,K]
        self.best = real(data["best"])[order]  # [4]
        # _SELECT's joints among the fit's (JOINT_NAMES), on the device: no host copy per step
        self.select = torch.tensor([JOINT_NAMES.index(FEATURE_JOINTS[i]) for i in _SELECT], device=device)
        self.sign = real(_SIGN)

    def energy_of_features(self, feats: torch.Tensor) -> torch.Tensor:
        """[...,4] the energy of LIMBS' features [...,4,6]."""
        d = feats[..., None, :] - self.means  # [...,4,K,D]
        z = (d[..., None, :] @ self.prec_chol)[..., 0, :]  # [...,4,K,D]
        logp = torch.logsumexp(self.log_norm - 0.5 * (z * z).sum(-1), -1)
        return self.best - logp

    def energy(self, joints: torch.Tensor) -> torch.Tensor:
        """[...,4] the energy of the fit's joints [...,J,3] (JOINT_NAMES order)."""
        return self.energy_of_features(_features(joints, self.select, self.sign))


_LOADED: dict = {}


def read_parameters(path: Path = DATA) -> dict:
    """The learned arrays by name (each stored as shape, dtype and its values flattened)."""
    raw = json.loads(Path(path).read_text(encoding="utf-8"))
    return {k: np.asarray(v["data"], v["dtype"]).reshape(v["shape"]) for k, v in raw.items()}


def write_parameters(path: Path, arrays: dict) -> None:
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    Path(path).write_text(json.dumps({k: {"shape": list(a.shape), "dtype": str(a.dtype), "data": a.ravel().tolist()}
                                      for k, a in arrays.items()}, separators=(",", ":")), encoding="utf-8")


def load(dtype=torch.float32, device="cpu") -> PosePrior:
    """The shipped prior, read once per process and kept per (dtype, device)."""
    key = (dtype, str(device))
    if key not in _LOADED:
        _LOADED[key] = PosePrior(read_parameters(), dtype, device)
    return _LOADED[key]


# The free bones (bones.BODY_BONES) that each of LIMBS' rows is made of.
_LIMB_BONES = {"right_arm": ("upperarm01.R", "lowerarm01.R"), "left_arm": ("upperarm01.L", "lowerarm01.L"),
               "right_leg": ("upperleg01.R", "lowerleg01.R"), "left_leg": ("upperleg01.L", "lowerleg01.L")}


def limb_weights(bone_prior: torch.Tensor, scores: torch.Tensor, seen_weight: torch.Tensor,
                 unseen_weight: float) -> torch.Tensor:
    """[P,4] each limb's weight of the prior. Where neither of its bones is seen
    (problem.PersonProblem.prior [P,F] holds the hard pull to rest there, >= 1):
    ``unseen_weight``; else the person's ``seen_weight`` [P] x the doubt of its keypoints, 1 -
    the mean of its lower joints' (elbow and wrist, knee and ankle) ``scores`` [P,J] (the fit's
    keypoint weights, JOINT_NAMES order; 0 where a keypoint is not used). On exact keypoints (the ground truth,
    scores 1) nothing; on a limb the backend half guesses (MediaPipe's arm at 0.04), most."""
    from .bones import BODY_BONES

    rows = torch.tensor([[BODY_BONES.index(b) for b in _LIMB_BONES[limb]] for limb in LIMBS],
                        device=bone_prior.device)
    ends = torch.tensor([[JOINT_NAMES.index(f"{limb.split('_')[0]}_{j}") for j in _LIMB_ENDS[limb.split("_")[1]]]
                         for limb in LIMBS], device=bone_prior.device)
    unseen = (bone_prior[:, rows] >= 1.0).to(bone_prior.dtype).mean(-1)  # [P,4]
    seen = seen_weight.to(scores)[:, None] * (1.0 - scores[:, ends].clamp(0, 1).mean(-1))
    return seen + (unseen_weight - seen) * unseen


_LIMB_ENDS = {"arm": ("elbow", "wrist"), "leg": ("knee", "ankle")}
