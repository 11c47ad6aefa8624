# SPDX-License-Identifier: GPL-3.0-or-later
"""Joint trajectories -> a rest skeleton shared by all frames and per-frame bone rotations.

The rest skeleton keeps one length per bone for the whole track (the median over frames: the
body's shape is measured once). Each frame's bone frames are built like the rest's
(``geometry.skeleton``: local Y along the bone, local Z towards the person's front), top-down
from the root, so the posed joints are exactly what an armature with those rest bones shows
(forward kinematics). Arms and legs are solved as two-bone chains: the wrist/ankle lands on its
(smoothed, planted) target whenever the limb can reach it, the elbow/knee bends in the plane of
the measured one. Rotations come out as Blender pose-bone quaternions (w, x, y, z), continuous.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..geometry.skeleton import BODY_BONES, rolls_for_z_axes
from ..geometry.rotations import continuous_quaternions, matrix_to_quaternion
from ..geometry.types import CAMERA_TO_BLENDER, Skeleton

# Every joint a body bone starts or ends at, in a fixed order (the animation's joint arrays).
MOTION_JOINTS = tuple(dict.fromkeys(j for _, h, t, _ in BODY_BONES for j in (h, t)))
JOINT_INDEX = {n: i for i, n in enumerate(MOTION_JOINTS)}
BONE_NAMES = tuple(b for b, _, _, _ in BODY_BONES)
_PARENT = {b: p for b, _, _, p in BODY_BONES}
_BONE_INDEX = {b: i for i, b in enumerate(BONE_NAMES)}
# Two-bone chains: (upper bone, lower bone, end joint).
LIMB_CHAINS = {f"{u}.{s}": (f"{lo}.{s}", e) for s, side in (("L", "left"), ("R", "right"))
               for u, lo, e in (("upper_arm", "forearm", f"{side}_wrist"),
                                ("thigh", "shin", f"{side}_ankle"))}


@dataclass
class RestPose:
    joints: np.ndarray  # [J,3] camera frame, in MOTION_JOINTS order
    lengths: np.ndarray  # [B] metres
    skeleton: Skeleton  # the armature's bones (BODY_BONES order), camera frame, with rolls
    reference_frame: int  # the frame whose pose is the rest pose


@dataclass
class PosedFrames:
    matrices: np.ndarray  # [T,B,3,3] bone frames in Blender world (columns X, Y, Z)
    heads: np.ndarray  # [T,B,3] Blender world
    joints: np.ndarray  # [T,J,3] camera frame: the posed joints (forward kinematics)
    quaternions: np.ndarray  # [T,B,4] pose-bone rotations (w, x, y, z), continuous in time
    root_location: np.ndarray  # [T,3] pose-bone location of the root (its rest bone space)


def rest_pose(joints: np.ndarray, estimated: np.ndarray | None = None, reference: int | None = None) -> RestPose:
    """Rest skeleton of a track from its joints [T,J,3] (camera frame, MOTION_JOINTS order):
    the pose of frame ``reference`` (default: the complete frame with the fewest estimated
    joints) with the median bone lengths."""
    joints = np.asarray(joints, np.float64)
    heads, tails = _bone_ends(joints)
    lengths = np.nanmedian(np.linalg.norm(tails - heads, axis=-1), axis=0)
    lengths = np.where(np.isfinite(lengths) & (lengths > 1e-3), lengths, 0.01)
    complete = np.isfinite(joints).all(axis=(1, 2))
    if not complete.any():
        raise ValueError("no frame has every joint of the body: cannot make a rest pose")
    n_est = np.zeros(len(joints)) if estimated is None else np.asarray(estimated).sum(axis=1)
    if reference is not None and 0 <= reference < len(joints) and complete[reference]:
        ref = int(reference)
    else:
        ref = int(np.argmin(np.where(complete, n_est, np.inf)))
    posed = pose_frames(joints[ref:ref + 1], lengths, None)
    rest_joints = posed.joints[0]
    bh, bt = _bone_ends(rest_joints[None])
    heads_bl, tails_bl = bh[0] @ CAMERA_TO_BLENDER.T, bt[0] @ CAMERA_TO_BLENDER.T
    rolls = rolls_for_z_axes(heads_bl, tails_bl, posed.matrices[0][:, :, 2])
    parents = np.array([_BONE_INDEX[p] if p else -1 for p in _PARENT.values()], np.int32)
    skeleton = Skeleton(list(BONE_NAMES), bh[0], bt[0], parents, rolls,
                        np.zeros(len(BONE_NAMES), bool), z_axes=posed.matrices[0][:, :, 2])
    return RestPose(rest_joints, lengths, skeleton, ref)


def rest_joints_dict(rest: RestPose) -> dict:
    """{name: Joint} of the rest pose (a joints file's form, for building the relief mesh's armature)."""
    from ..geometry.types import Joint

    return {n: Joint(n, rest.joints[i].copy(), estimated=False) for i, n in enumerate(MOTION_JOINTS)}


def pose_frames(joints: np.ndarray, lengths: np.ndarray, rest: RestPose | None) -> PosedFrames:
    """Bone frames and posed joints for joints [T,J,3] (camera frame; no NaN), bone ``lengths``.

    With ``rest``, also the pose-bone quaternions and root location relative to it.
    """
    cam = np.asarray(joints, np.float64)
    world = cam @ CAMERA_TO_BLENDER.T
    t_len = len(world)
    forward, up = _body_axes(world)
    n_b = len(BONE_NAMES)
    mats = np.zeros((t_len, n_b, 3, 3))
    heads = np.zeros((t_len, n_b, 3))
    tails = np.zeros((t_len, n_b, 3))
    rest_heads = None if rest is None else rest.skeleton.heads @ CAMERA_TO_BLENDER.T
    rest_mats = None if rest is None else _rest_matrices(rest)
    knees: dict[str, np.ndarray] = {}
    at = {n: world[:, i] for n, i in JOINT_INDEX.items()}
    for b, (bone, head, tail, parent) in enumerate(BODY_BONES):
        if parent is None:
            h = at[head]
        else:
            p = _BONE_INDEX[parent]
            if BODY_BONES[p][2] == head:
                h = tails[:, p]
            elif rest is not None:  # a rigid offset in the parent's frame, as the armature does
                offset = rest_heads[b] - rest_heads[p]
                h = heads[:, p] + np.einsum("tij,kj,k->ti", mats[:, p], rest_mats[p], offset)
            else:
                h = at[head]
        if bone in LIMB_CHAINS:
            end = at[LIMB_CHAINS[bone][1]]
            lower = _BONE_INDEX[LIMB_CHAINS[bone][0]]
            knees[bone] = two_bone_ik(h, end, at[tail], lengths[b], lengths[lower])
            target = knees[bone]
        elif _PARENT.get(bone) in LIMB_CHAINS and bone == LIMB_CHAINS[_PARENT[bone]][0]:
            target = at[tail]
        else:
            target = h + (at[tail] - at[head])  # the measured direction from the placed head
        y = _unit(target - h)
        z = _perpendicular(forward, y, up)
        mats[:, b] = np.stack([np.cross(y, z), y, z], axis=-1)
        heads[:, b] = h
        tails[:, b] = h + lengths[b] * y
    posed_cam = np.zeros_like(cam)
    for b, (_, head, tail, _) in enumerate(BODY_BONES):
        posed_cam[:, JOINT_INDEX[head]] = heads[:, b] @ CAMERA_TO_BLENDER
        posed_cam[:, JOINT_INDEX[tail]] = tails[:, b] @ CAMERA_TO_BLENDER
    quats = np.zeros((t_len, n_b, 4))
    quats[..., 0] = 1.0
    root_loc = np.zeros((t_len, 3))
    if rest is not None:
        basis = np.empty_like(mats)
        for b, (_, _, _, parent) in enumerate(BODY_BONES):
            if parent is None:
                basis[:, b] = rest_mats[b].T @ mats[:, b]
            else:
                p = _BONE_INDEX[parent]
                local_rest = rest_mats[p].T @ rest_mats[b]
                local_now = np.swapaxes(mats[:, p], 1, 2) @ mats[:, b]
                basis[:, b] = local_rest.T @ local_now
        quats = continuous_quaternions(matrix_to_quaternion(basis))
        root_loc = (heads[:, 0] - rest_heads[0]) @ rest_mats[0]
    return PosedFrames(mats, heads, posed_cam, quats, root_loc)


def _rest_matrices(rest: RestPose) -> np.ndarray:
    from ..geometry.skeleton import bone_matrices

    sk = rest.skeleton
    return bone_matrices(sk.heads @ CAMERA_TO_BLENDER.T, sk.tails @ CAMERA_TO_BLENDER.T, sk.rolls)


def _bone_ends(joints):
    hi = [JOINT_INDEX[h] for _, h, _, _ in BODY_BONES]
    ti = [JOINT_INDEX[t] for _, _, t, _ in BODY_BONES]
    return joints[:, hi], joints[:, ti]


def _unit(v):
    return v / np.maximum(np.linalg.norm(v, axis=-1, keepdims=True), 1e-12)


def _perpendicular(forward, y, up):
    """Forward made orthogonal to the bone; up when the bone is nearly along forward."""
    z = forward - y * np.sum(y * forward, -1, keepdims=True)
    z_up = up - y * np.sum(y * up, -1, keepdims=True)
    z = np.where(np.linalg.norm(z, axis=-1, keepdims=True) < 0.3, z_up, z)
    return _unit(z)


def _body_axes(world):
    """Forward and up [T,3] (Blender world) per frame, as ``joints_fill._body_axes`` makes them."""
    j = {n: world[:, i] for n, i in JOINT_INDEX.items()}
    lateral = _unit(j["left_hip"] - j["right_hip"])
    top = (j["left_shoulder"] + j["right_shoulder"] + j["neck"]) / 3.0
    up = top - 0.5 * (j["left_hip"] + j["right_hip"])
    up = _unit(up - lateral * np.sum(up * lateral, -1, keepdims=True))
    # Camera-frame cross(lateral, up) is forward; in Blender's (proper rotation) frame too.
    forward = np.cross(lateral, up)
    return forward, up


def two_bone_ik(root, end, middle, upper: float, lower: float) -> np.ndarray:
    """Middle joint (elbow/knee) [T,3] for a chain of lengths ``upper``/``lower`` from ``root``
    reaching for ``end``, bending towards the measured ``middle``. Out of reach: straight."""
    d = end - root
    dist = np.linalg.norm(d, axis=-1)
    axis = _unit(d)
    reach = np.clip(dist, abs(upper - lower) + 1e-6, upper + lower - 1e-6)
    along = (upper ** 2 - lower ** 2 + reach ** 2) / (2 * reach)
    height = np.sqrt(np.maximum(upper ** 2 - along ** 2, 0.0))
    pole = middle - root
    pole = pole - axis * np.sum(pole * axis, -1, keepdims=True)
    fallback = np.cross(axis, np.array([1.0, 0.0, 0.0]))
    pole = np.where(np.linalg.norm(pole, axis=-1, keepdims=True) < 1e-6, fallback, pole)
    return root + axis * along[:, None] + _unit(pole) * height[:, None]
