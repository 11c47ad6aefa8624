# SPDX-License-Identifier: GPL-3.0-or-later
"""Bone hierarchy from 3D joints, with Blender edit-bone rolls (documented in docs/geometry.md).

Roll convention: every bone's local Z axis points to the person's front (the body's forward
direction, made orthogonal to the bone); bones nearly parallel to the front (feet, toes) point
their Z axis up instead. ``rolls`` are Blender edit-bone rolls for an armature object with an
identity transform, computed with Blender's own bone-matrix construction (vec_roll_to_mat3).
"""

from __future__ import annotations

import numpy as np

from .joints_fill import _body_axes
from .types import GeometryError, Skeleton, camera_to_blender

FINGERS = (("thumb", "thumb"), ("index", "forefinger"), ("middle", "middle_finger"),
           ("ring", "ring_finger"), ("pinky", "pinky_finger"))

_BODY = [  # (bone, head joint, tail joint, parent bone)
    ("pelvis", "pelvis", "spine", None),
    ("spine", "spine", "chest", "pelvis"),
    ("chest", "chest", "neck", "spine"),
    ("neck", "neck", "head", "chest"),
    ("head", "head", "head_top", "neck"),
]
for _side, _s in (("left", "L"), ("right", "R")):
    _BODY += [
        (f"clavicle.{_s}", "neck", f"{_side}_shoulder", "chest"),
        (f"upper_arm.{_s}", f"{_side}_shoulder", f"{_side}_elbow", f"clavicle.{_s}"),
        (f"forearm.{_s}", f"{_side}_elbow", f"{_side}_wrist", f"upper_arm.{_s}"),
        (f"hand.{_s}", f"{_side}_wrist", f"{_side}_hand_end", f"forearm.{_s}"),
        (f"thigh.{_s}", f"{_side}_hip", f"{_side}_knee", "pelvis"),
        (f"shin.{_s}", f"{_side}_knee", f"{_side}_ankle", f"thigh.{_s}"),
        (f"foot.{_s}", f"{_side}_ankle", f"{_side}_ball", f"shin.{_s}"),
        (f"toe.{_s}", f"{_side}_ball", f"{_side}_toe_tip", f"foot.{_s}"),
    ]
BODY_BONES = tuple(_BODY)

_FINGER_BONES = []
for _side, _s in (("left", "L"), ("right", "R")):
    for _bone, _kp in FINGERS:
        chain = [f"{_side}_{_kp}_third_joint", f"{_side}_{_kp}2", f"{_side}_{_kp}3", f"{_side}_{_kp}4"]
        for i in range(3):
            parent = f"hand.{_s}" if i == 0 else f"{_bone}_{i:02d}.{_s}"
            _FINGER_BONES.append((f"{_bone}_{i + 1:02d}.{_s}", chain[i], chain[i + 1], parent))
FINGER_BONES = tuple(_FINGER_BONES)

# (bone, parent) for every bone the skeleton can have, parents first. Body bones are always
# present; a finger's three bones only when all four of its keypoints were lifted.
BONE_HIERARCHY = tuple((b, p) for b, _, _, p in BODY_BONES + FINGER_BONES)


def build_skeleton(joints: dict, person_id: int = 1) -> Skeleton:
    """Bones (camera frame) for the joints of ``joints.lift_joints``."""
    xyz = {n: np.asarray(j.xyz, np.float64) for n, j in joints.items()}
    est = {n: bool(j.estimated) for n, j in joints.items()}
    derived = set(getattr(joints, "report", {}).get("derived", ()))
    missing = [t for _, h, t, _ in BODY_BONES for t in (h, t) if t not in xyz]
    if missing:
        missing = sorted(set(missing))
        which = ", ".join(missing) if len(missing) <= 6 else \
            f"{len(missing)} of its joints ({', '.join(missing[:3])}, ...): too few confident keypoints"
        raise GeometryError(f"cannot build the body skeleton of person {person_id}: no joint for {which}")
    bones = list(BODY_BONES)
    for i in range(0, len(FINGER_BONES), 3):
        chain = FINGER_BONES[i:i + 3]
        if all(h in xyz and t in xyz and not est[h] and not est[t] for _, h, t, _ in chain):
            bones += chain
    names = [b for b, _, _, _ in bones]
    index = {n: i for i, n in enumerate(names)}
    heads = np.array([xyz[h] for _, h, _, _ in bones])
    tails = np.array([xyz[t] for _, _, t, _ in bones])
    # Zero-length bones are deleted by Blender: nudge the tail along the parent's direction.
    for i, (b, h, t, p) in enumerate(bones):
        if np.linalg.norm(tails[i] - heads[i]) < 1e-4:
            d = heads[i] - heads[index[p]] if p else np.array([0.0, -1.0, 0.0])
            tails[i] = heads[i] + 0.01 * d / max(np.linalg.norm(d), 1e-9)
    parents = np.array([index[p] if p else -1 for _, _, _, p in bones], np.int32)
    # A bone is estimated when it rests on a filled-in joint (derived joints are not "filled").
    estimated = np.array([(est[h] and h not in derived) or (est[t] and t not in derived)
                          for _, h, t, _ in bones])
    lateral, up, forward = _body_axes(xyz)
    z_axes = _z_axes(camera_to_blender(tails - heads), camera_to_blender(forward), camera_to_blender(up))
    rolls = rolls_for_z_axes(camera_to_blender(heads), camera_to_blender(tails), z_axes)
    return Skeleton(names, heads, tails, parents, rolls, estimated, person_id=person_id, z_axes=z_axes)


def _z_axes(y_axes, forward, up):
    """The wanted local Z of each bone: forward made orthogonal to the bone (up if parallel)."""
    y = y_axes / np.maximum(np.linalg.norm(y_axes, axis=1, keepdims=True), 1e-12)
    z = forward[None, :] - y * (y @ forward)[:, None]
    weak = np.linalg.norm(z, axis=1) < 0.3  # bone within ~17 deg of the forward direction
    z_up = up[None, :] - y * (y @ up)[:, None]
    z = np.where(weak[:, None], z_up, z)
    return z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-12)


def bone_matrices(heads, tails, rolls) -> np.ndarray:
    """Blender's rest orientation [B,3,3] (columns = local X, Y, Z) for head/tail/roll.

    Mirrors Blender's vec_roll_to_mat3_normalized: the shortest rotation taking +Y to the bone,
    then a rotation by ``roll`` about the bone.
    """
    y = np.asarray(tails, np.float64) - np.asarray(heads, np.float64)
    y = y / np.maximum(np.linalg.norm(y, axis=1, keepdims=True), 1e-12)
    x_, y_, z_ = y[:, 0], y[:, 1], y[:, 2]
    theta = 1.0 + y_
    theta_alt = x_ * x_ + z_ * z_
    safe = (theta > 6.1e-3) | (theta_alt > 2.5e-4 ** 2)
    theta = np.where(theta > 6.1e-3, theta, theta_alt * 0.5 + theta_alt * theta_alt * 0.125)
    theta = np.where(safe, theta, 1.0)
    m = np.zeros((len(y), 3, 3))
    m[:, 0, 0] = 1 - x_ * x_ / theta
    m[:, 1, 0] = -x_
    m[:, 2, 0] = -x_ * z_ / theta
    m[:, :, 1] = y
    m[:, 0, 2] = -x_ * z_ / theta
    m[:, 1, 2] = -z_
    m[:, 2, 2] = 1 - z_ * z_ / theta
    flip = np.diag([-1.0, -1.0, 1.0])  # bone pointing straight down -Y: 180 deg about Z
    m[~safe] = flip
    # Roll: rotate the X and Z columns about the bone axis.
    c, s = np.cos(rolls)[:, None], np.sin(rolls)[:, None]
    x0, z0 = m[:, :, 0].copy(), m[:, :, 2].copy()
    m[:, :, 0] = x0 * c + np.cross(y, x0) * s
    m[:, :, 2] = z0 * c + np.cross(y, z0) * s
    return m


def rolls_for_z_axes(heads, tails, z_axes) -> np.ndarray:
    """Blender rolls (radians) that make each bone's local Z axis point along ``z_axes``."""
    base = bone_matrices(heads, tails, np.zeros(len(heads)))
    y, z0 = base[:, :, 1], base[:, :, 2]
    return np.arctan2(np.einsum("ij,ij->i", np.cross(z0, z_axes), y), np.einsum("ij,ij->i", z0, z_axes))


def project_to_pixels(xyz: np.ndarray, intrinsics: np.ndarray) -> np.ndarray:
    """Camera-frame points [...,3] -> (row, col) pixel coordinates [...,2] (float)."""
    k = np.asarray(intrinsics, np.float64)
    z = np.maximum(xyz[..., 2], 1e-6)
    return np.stack([k[1, 1] * xyz[..., 1] / z + k[1, 2], k[0, 0] * xyz[..., 0] / z + k[0, 2]], axis=-1)


def drop_bones_outside(skel: Skeleton, person_mask: np.ndarray, intrinsics: np.ndarray,
                       margin: float = 0.02) -> tuple[Skeleton, list[str]]:  # fmt: skip
    """Remove estimated bones whose tail lies outside the person in the photo (the legs of a
    half-body photo), with all their children. A bone with a measured joint is always kept.

    "Outside": the tail projects off the image, or farther than ``margin`` (a fraction of the
    photo's diagonal) from every pixel of ``person_mask``. Returns (skeleton, dropped names)."""
    h, w = person_mask.shape
    rc = project_to_pixels(skel.tails, intrinsics)
    radius = max(2, int(round(margin * np.hypot(h, w))))
    grown = _dilate(person_mask.astype(bool), radius)
    r, c = np.rint(rc[:, 0]).astype(np.int64), np.rint(rc[:, 1]).astype(np.int64)
    on_image = (r >= 0) & (r < h) & (c >= 0) & (c < w)
    inside = np.zeros(len(skel.names), bool)
    inside[on_image] = grown[r[on_image], c[on_image]]
    drop = skel.estimated & ~inside
    for i, parent in enumerate(skel.parents):  # parents come first: children follow them out
        if parent >= 0 and drop[parent]:
            drop[i] = True
    if not drop.any():
        return skel, []
    if drop[0]:
        return skel, []  # never drop the root: a skeleton needs its pelvis
    keep = np.flatnonzero(~drop)
    new_index = -np.ones(len(skel.names), np.int64)
    new_index[keep] = np.arange(len(keep))
    parents = np.where(skel.parents[keep] >= 0, new_index[np.maximum(skel.parents[keep], 0)], -1).astype(np.int32)
    trimmed = Skeleton([skel.names[i] for i in keep], skel.heads[keep], skel.tails[keep], parents,
                       skel.rolls[keep], skel.estimated[keep], person_id=skel.person_id,
                       z_axes=None if skel.z_axes is None else skel.z_axes[keep])  # fmt: skip
    return trimmed, [skel.names[i] for i in np.flatnonzero(drop)]


def _dilate(mask: np.ndarray, radius: int) -> np.ndarray:
    """Binary dilation by a square of half-size ``radius`` (separable running maximum)."""
    out = mask
    for axis in (0, 1):
        padded = np.pad(out, [(radius, radius) if a == axis else (0, 0) for a in (0, 1)])
        cums = np.cumsum(padded, axis=axis, dtype=np.int32)
        cums = np.concatenate([np.zeros_like(np.take(cums, [0], axis=axis)), cums], axis=axis)
        n = out.shape[axis]
        upper = np.take(cums, np.arange(2 * radius + 1, 2 * radius + 1 + n), axis=axis)
        lower = np.take(cums, np.arange(0, n), axis=axis)
        out = (upper - lower) > 0
    return out
