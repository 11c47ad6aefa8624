# SPDX-License-Identifier: GPL-3.0-or-later
"""Goliath-308 keypoints -> 3D joint centres inside the body (camera frame, metres).

A keypoint marks where the joint projects; the visible surface there is the skin in front of the
joint. Depth = robust (median) surface depth in a small window of the person's pixels of the
limb's own parts, plus the limb's half-thickness, measured as half the silhouette width across
the limb (a round-limb model: the axis of a cylinder of radius R lies R behind its front-most
point). Keypoints with a low score, off the person, or on another limb's pixels (occluded) are
re-estimated from the skeleton in ``joints_fill`` and flagged ``estimated``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..maps.goliath import KEYPOINT_INDEX
from ..maps.canonical import Maps
from .joints_fill import fill_and_derive
from .silhouette import widths_across
from .surface import person_depth, unproject
from .types import GeometryError, Joint


@dataclass(frozen=True)
class LimbRule:
    """How to measure one joint: where the width is taken, along what, within which parts."""

    towards: str | None  # neighbour keypoint giving the limb direction (and the sampling point)
    along: float  # where the width is measured: joint + along * (towards - joint)
    parts: tuple[str, ...]  # part classes that belong to this limb (clothing always allowed)
    max_half: float  # metres: a cap on the half-thickness (guards against merged silhouettes)
    default_half: float  # metres: used when the width cannot be measured
    # A bendable joint (elbow, knee): the width is measured on both segments, ``along`` of the way
    # to each neighbour (clear of the fold at the joint), and the smaller one kept.
    also_from: str | None = None
    depth_parts: tuple[str, ...] = ()  # extra classes the keypoint itself may lie on (not for width)


_CLOTHES = ("Apparel", "Upper_Clothing", "Lower_Clothing")


def _side_rules(side: str, s: str) -> dict[str, LimbRule]:
    return {
        f"{side}_shoulder": LimbRule(f"{side}_elbow", 0.3, (f"{s}_Upper_Arm",), 0.09, 0.05,
                                     depth_parts=("Torso",)),
        f"{side}_elbow": LimbRule(f"{side}_wrist", 0.2, (f"{s}_Upper_Arm", f"{s}_Lower_Arm"), 0.07, 0.04,
                                  also_from=f"{side}_shoulder"),
        f"{side}_wrist": LimbRule(f"{side}_elbow", 0.0, (f"{s}_Lower_Arm", f"{s}_Hand"), 0.05, 0.03),
        f"{side}_hip": LimbRule(f"{side}_knee", 0.3, (f"{s}_Upper_Leg",), 0.12, 0.08,
                                depth_parts=("Torso",)),
        f"{side}_knee": LimbRule(f"{side}_ankle", 0.2, (f"{s}_Upper_Leg", f"{s}_Lower_Leg"), 0.08, 0.05,
                                 also_from=f"{side}_hip"),
        f"{side}_ankle": LimbRule(f"{side}_knee", 0.0,
                                  (f"{s}_Lower_Leg", f"{s}_Foot", f"{s}_Shoe", f"{s}_Sock"), 0.06, 0.04),
    }


LIMB_RULES: dict[str, LimbRule] = {**_side_rules("left", "Left"), **_side_rules("right", "Right")}

# Other keypoints sit close to the skin: (parts, fixed depth below the surface in metres).
_FACE = ("Face_Neck", "Hair", "Eyeglass")
SURFACE_RULES: dict[str, tuple[tuple[str, ...], float]] = {
    "nose": (_FACE, 0.0), "left_eye": (_FACE, 0.0), "right_eye": (_FACE, 0.0),
    "left_ear": (_FACE, 0.0), "right_ear": (_FACE, 0.0),
    "neck": (("Face_Neck", "Torso"), 0.06),
}
for _side, _s in (("left", "Left"), ("right", "Right")):
    for _n in ("big_toe", "small_toe", "heel"):
        SURFACE_RULES[f"{_side}_{_n}"] = ((f"{_s}_Foot", f"{_s}_Shoe", f"{_s}_Sock"), 0.02)
    for _f in ("thumb", "forefinger", "middle_finger", "ring_finger", "pinky_finger"):
        for _k in ("4", "3", "2", "_third_joint"):
            SURFACE_RULES[f"{_side}_{_f}{_k}"] = ((f"{_s}_Hand",), 0.008)


def lift_joints(maps: Maps, person_id: int, mesh=None, min_score: float = 0.3) -> dict[str, Joint]:
    """3D joints of one person: lifted keypoints, filled-in joints and derived ones.

    Returns {name: Joint}; names are Goliath-308 keypoint names plus the derived joints of
    ``joints_fill.DERIVED_JOINTS``. ``mesh`` is accepted for API symmetry (depth comes from the
    maps, which the mesh was built from).
    """
    z = person_depth(maps, person_id)
    if not np.isfinite(z).any():
        raise GeometryError(f"person {person_id} has no depth: cannot place joints")
    kp = maps.person_keypoints(person_id).astype(np.float64)
    k = np.asarray(maps.intrinsics, np.float64)
    focal = 0.5 * (k[0, 0] + k[1, 1])
    name_to_id = {n: i for i, n in enumerate(maps.part_names)}
    person = maps.mask == person_id

    regions: dict = {}

    def region_of(parts, clothes=True):  # the same few part sets recur: compute each once
        key = (parts, clothes)
        if key not in regions:
            regions[key] = _region(maps, person, name_to_id, parts, clothes)
        return regions[key]

    lifted: dict[str, Joint] = {}
    hints: dict[str, np.ndarray] = {}  # 2D positions of keypoints we could not lift directly
    notes: dict[str, str] = {}
    # Limbs first (vectorised width measurement), then surface keypoints.
    max_px = 0.5 * maps.width
    for n in (n for n in LIMB_RULES if _score(kp, n) >= min_score):
        rule = LIMB_RULES[n]
        p = kp[KEYPOINT_INDEX[n], :2]
        region = region_of(rule.parts)
        width = _limb_width(kp, n, rule, region, max_px, z, focal)
        depth_region = region | region_of(rule.depth_parts, clothes=False) \
            if rule.depth_parts else region
        zs = _surface_depth(z, depth_region, p, radius=max(1.5, 0.15 * (width or 0.0)))
        if zs is None:
            hints[n], notes[n] = p, "keypoint not on the visible limb (occluded or off the person)"
            continue
        half = min(0.5 * width * zs / focal, rule.max_half) if width else rule.default_half
        lifted[n] = Joint(n, unproject(p[1] - 0.5, p[0] - 0.5, zs + half, k), estimated=False)
    for n, (parts, below) in SURFACE_RULES.items():
        if _score(kp, n) < min_score:
            if _score(kp, n) > 0:
                hints[n] = kp[KEYPOINT_INDEX[n], :2]
            continue
        p = kp[KEYPOINT_INDEX[n], :2]
        zs = _surface_depth(z, region_of(parts), p, radius=2.0)
        if zs is None:
            zs = _surface_depth(z, person, p, radius=2.0)  # small parts: any of the person's pixels
        if zs is None:
            hints[n], notes[n] = p, "keypoint off the person"
            continue
        lifted[n] = Joint(n, unproject(p[1] - 0.5, p[0] - 0.5, zs + below, k), estimated=False)
    for n in LIMB_RULES:
        if n not in lifted and n not in hints and 0 < _score(kp, n):
            hints[n] = kp[KEYPOINT_INDEX[n], :2]
    return fill_and_derive(lifted, hints, k, notes)


def _score(kp: np.ndarray, name: str) -> float:
    s = float(kp[KEYPOINT_INDEX[name], 2])
    x, y = kp[KEYPOINT_INDEX[name], :2]
    return s if np.isfinite(x) and np.isfinite(y) else 0.0


def _limb_width(kp, name, rule: LimbRule, region, max_px, z, focal) -> float | None:
    """Silhouette width (px) across the limb; the smaller of two for a bent joint; None if the
    limb direction is unknown or the sample point is off the limb."""
    p = kp[KEYPOINT_INDEX[name], :2]
    found = []
    for other, along in ((rule.towards, rule.along), (rule.also_from, rule.along)):
        if other is None or _score(kp, other) <= 0:
            continue
        q = kp[KEYPOINT_INDEX[other], :2]
        if np.linalg.norm(q - p) < 1.0:
            continue
        w = widths_across(region, (p + along * (q - p))[None], (q - p)[None], max_px, depth=z, focal=focal)[0]
        if w > 0:
            found.append(w)
    return min(found) if found else None


def _region(maps: Maps, person: np.ndarray, name_to_id: dict, parts: tuple[str, ...],
            clothes: bool = True) -> np.ndarray:
    """The person's pixels of the given parts (plus clothing); the whole person when the maps
    carry no part labels for them (all background)."""
    ids = [name_to_id[p] for p in parts + (_CLOTHES if clothes else ()) if p in name_to_id]
    labels = maps.parts
    if not (labels[person] > 0).any():
        return person
    return person & np.isin(labels, ids)


def _surface_depth(z: np.ndarray, region: np.ndarray, p: np.ndarray, radius: float):
    """Median depth of region pixels within ``radius`` px of p (x, y); None if none nearby.

    The keypoint pixel itself must be in the region (else the joint is hidden behind something
    else, or off the body): a window that merely grazes the limb would give another depth.
    """
    h, w = z.shape
    col, row = int(np.floor(p[0])), int(np.floor(p[1]))
    if not (0 <= row < h and 0 <= col < w):
        return None
    if not region[row, col]:
        # Allow a keypoint a pixel or two off the silhouette edge (labels are blurry there).
        r0, r1, c0, c1 = max(0, row - 2), min(h, row + 3), max(0, col - 2), min(w, col + 3)
        if not region[r0:r1, c0:c1].any():
            return None
    rad = int(np.ceil(radius)) + 2
    r0, r1, c0, c1 = max(0, row - rad), min(h, row + rad + 1), max(0, col - rad), min(w, col + rad + 1)
    rr, cc = np.mgrid[r0:r1, c0:c1]
    near = ((rr + 0.5 - p[1]) ** 2 + (cc + 0.5 - p[0]) ** 2) <= max(radius, 2.0) ** 2
    zz = z[r0:r1, c0:c1][near & region[r0:r1, c0:c1]]
    zz = zz[np.isfinite(zz)]
    return float(np.median(zz)) if zz.size else None
