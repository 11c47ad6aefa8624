# SPDX-License-Identifier: GPL-3.0-or-later
"""Filling missing joints from the skeleton and deriving the joints no keypoint marks.

Filled joints keep their 2D keypoint when one exists (low score or occluded): the depth is then
chosen on that keypoint's ray so the bone has the length of its left/right partner. Without a 2D
position the partner's bone vector is mirrored across the body's sagittal plane. All filled and
derived joints are flagged ``estimated`` (maps_format.md, joints file).
"""

from __future__ import annotations

import numpy as np

from .types import Joint

# Parent -> child links used for filling, per side, in an order where parents come first.
_FILL_LINKS = (("shoulder", "elbow"), ("elbow", "wrist"), ("hip", "knee"), ("knee", "ankle"),
               ("ankle", "big_toe"), ("ankle", "small_toe"), ("ankle", "heel"))
# Default bone lengths as fractions of the torso (pelvis -> neck) when no partner bone exists.
_DEFAULT_LENGTH = {"elbow": 0.55, "wrist": 0.5, "knee": 0.8, "ankle": 0.8,
                   "big_toe": 0.38, "small_toe": 0.34, "heel": 0.14}
DEFAULT_TORSO_M = 0.5
# Foot points are filled only when their keypoint was seen (the skeleton does not need them).
_OPTIONAL = frozenset({"big_toe", "small_toe", "heel"})

DERIVED_JOINTS = ("pelvis", "spine", "chest", "head", "head_top",
                  "left_ball", "left_toe_tip", "right_ball", "right_toe_tip",
                  "left_hand_end", "right_hand_end")


class JointSet(dict):
    """{name: Joint} plus ``report``: which joints were lifted, filled, derived or missing."""

    report: dict


def fill_and_derive(lifted: dict, hints: dict, k: np.ndarray, notes: dict | None = None,
                    neck_at_shoulders: bool = True) -> JointSet:
    """Fill missing limb joints, then add DERIVED_JOINTS. ``lifted``: {name: Joint} measured;
    ``hints``: {name: (x, y)} keypoints seen but not liftable; ``k``: intrinsics."""
    j = {n: v.xyz.astype(np.float64) for n, v in lifted.items()}
    filled: dict[str, str] = {}
    notes = dict(notes or {})

    lateral, up, forward = _body_axes(j)
    # Roots of the limbs: a missing shoulder/hip takes its partner's depth on its own ray, or
    # the partner mirrored across the midline.
    for pair, centre in ((("left_shoulder", "right_shoulder"), "neck"), (("left_hip", "right_hip"), "")):
        for name in pair:
            other = _partner(name)
            if name in j or other not in j:
                continue
            if name in hints:
                j[name] = _on_ray(hints[name], k, j[other][2])
                filled[name] = "partner's depth on its own keypoint ray"
            elif centre in j:
                j[name] = _reflect(j[other], j[centre], lateral)
                filled[name] = "partner mirrored across the midline"
            else:
                sign = 1.0 if name.startswith("left") else -1.0
                j[name] = j[other] + sign * (0.32 if "shoulder" in name else 0.18) * lateral
                filled[name] = "partner shifted by a default width"
    torso = DEFAULT_TORSO_M
    hips = [j[n] for n in ("left_hip", "right_hip") if n in j]
    shoulders = [j[n] for n in ("left_shoulder", "right_shoulder") if n in j]
    if hips and shoulders:
        torso = float(np.linalg.norm(np.mean(shoulders, 0) - np.mean(hips, 0))) or DEFAULT_TORSO_M
    # Neck inside the body: on its keypoint ray at the shoulders' mean depth, else mid-shoulders.
    if len(shoulders) == 2:
        mid = 0.5 * (shoulders[0] + shoulders[1])
        if "neck" not in j:
            j["neck"] = mid
            filled["neck"] = "mid-shoulders"
        elif neck_at_shoulders:
            j["neck"] = _on_ray(_project(j["neck"], k), k, mid[2])
    lateral, up, forward = _body_axes(j)
    _fill_missing_girdle(j, filled, lateral, up, torso)
    lateral, up, forward = _body_axes(j)

    for side in ("left", "right"):
        other_side = "right" if side == "left" else "left"
        for parent, child in _FILL_LINKS:
            p, c = f"{side}_{parent}", f"{side}_{child}"
            if c in j or p not in j or (child in _OPTIONAL and c not in hints):
                continue
            op, oc = f"{other_side}_{parent}", f"{other_side}_{child}"
            partner = None
            if op in j and oc in j and (oc not in filled):
                partner = _mirror_vector(j[oc] - j[op], lateral)
            length = np.linalg.norm(partner) if partner is not None else _DEFAULT_LENGTH[child] * torso
            guess = j[p] + (partner if partner is not None else _default_dir(child, up, forward) * length)
            if c in hints:
                j[c] = _on_ray_at_distance(hints[c], k, j[p], length, guess)
                filled[c] = "own keypoint ray, partner bone length" if partner is not None else \
                    "own keypoint ray, default bone length"
            else:
                j[c] = guess
                filled[c] = "partner bone mirrored" if partner is not None else "default proportions"

    derived = _derive(j, lateral, up, forward, torso, filled)
    derived -= set(lifted)  # joints given as input (a joints file) are kept as they are
    out = JointSet()
    for n, xyz in j.items():
        was = bool(lifted[n].estimated) if n in lifted else False  # e.g. read from a joints file
        out[n] = Joint(n, np.asarray(xyz, np.float64), estimated=(was or n in filled or n in derived))
    missing = sorted(n for n in hints if n not in out)
    out.report = {
        "lifted": sorted(n for n in lifted),
        "filled": dict(sorted(filled.items())),
        "derived": sorted(derived),
        "missing": missing,
        "notes": notes,
    }
    return out


def _fill_missing_girdle(j, filled, lateral, up, torso) -> None:
    """Upper-body photos have no hips (and a few crops no shoulders): put the missing pair at
    default proportions from the other one so the limbs below can be filled and the skeleton
    stays complete (all of it flagged estimated)."""
    scale = torso / DEFAULT_TORSO_M
    has_hips = "left_hip" in j or "right_hip" in j
    has_shoulders = "left_shoulder" in j or "right_shoulder" in j
    if not has_hips and (has_shoulders or "neck" in j):
        top = j["neck"] if "neck" in j else np.mean([j[n] for n in ("left_shoulder", "right_shoulder") if n in j], 0)
        for side, sign in (("left", 1.0), ("right", -1.0)):
            j[f"{side}_hip"] = top - up * torso + sign * 0.09 * scale * lateral
            filled[f"{side}_hip"] = "default proportions below the shoulders"
    elif has_hips and not has_shoulders:
        base = np.mean([j[n] for n in ("left_hip", "right_hip") if n in j], 0)
        for side, sign in (("left", 1.0), ("right", -1.0)):
            j[f"{side}_shoulder"] = base + up * torso + sign * 0.18 * scale * lateral
            filled[f"{side}_shoulder"] = "default proportions above the hips"


def _derive(j, lateral, up, forward, torso, filled) -> set:
    derived = set()

    def put(name, xyz):
        if name in j and name != "neck":  # given (e.g. by a joints file): keep it
            return
        j[name] = np.asarray(xyz, np.float64)
        derived.add(name)

    if "left_hip" in j and "right_hip" in j:
        put("pelvis", 0.5 * (j["left_hip"] + j["right_hip"]))
    elif "neck" in j:
        put("pelvis", j["neck"] - up * torso)
    if "neck" not in j and "pelvis" in j:
        put("neck", j["pelvis"] + up * torso)
    if "pelvis" not in j or "neck" not in j:
        return derived
    spine_vec = j["neck"] - j["pelvis"]
    put("spine", j["pelvis"] + 0.35 * spine_vec)
    put("chest", j["pelvis"] + 0.7 * spine_vec)
    if "left_ear" in j and "right_ear" in j:
        head = 0.5 * (j["left_ear"] + j["right_ear"])
    elif "nose" in j:
        head = j["nose"] - 0.09 * (torso / DEFAULT_TORSO_M) * forward
    else:
        head = j["neck"] + 0.35 * torso * up
    put("head", head)
    head_up = head - j["neck"]
    head_up = head_up / max(np.linalg.norm(head_up), 1e-9)
    put("head_top", head + 0.12 * (torso / DEFAULT_TORSO_M) * head_up)
    for side in ("left", "right"):
        ankle = j.get(f"{side}_ankle")
        if ankle is not None:
            toes = [j[f"{side}_{t}"] for t in ("big_toe", "small_toe") if f"{side}_{t}" in j]
            tip = np.mean(toes, axis=0) if toes else ankle + 0.36 * torso * forward
            put(f"{side}_toe_tip", tip)
            put(f"{side}_ball", ankle + 0.7 * (tip - ankle))
        wrist, elbow = j.get(f"{side}_wrist"), j.get(f"{side}_elbow")
        knuckle = j.get(f"{side}_middle_finger_third_joint")
        if wrist is not None and knuckle is not None:
            put(f"{side}_hand_end", knuckle)
        elif wrist is not None and elbow is not None:
            put(f"{side}_hand_end", wrist + 0.35 * (wrist - elbow))
    return derived


def _partner(name: str) -> str:
    """The left/right partner's name (left_hip <-> right_hip)."""
    return name.replace("left_", "@").replace("right_", "left_").replace("@", "right_")


def _body_axes(j):
    """Unit lateral (towards the person's left), up and forward (where the person faces)."""
    lateral = None
    for l, r in (("left_hip", "right_hip"), ("left_shoulder", "right_shoulder")):
        if l in j and r in j and np.linalg.norm(j[l] - j[r]) > 1e-6:
            lateral = (j[l] - j[r]) / np.linalg.norm(j[l] - j[r])
            break
    if lateral is None:
        lateral = np.array([1.0, 0.0, 0.0])  # facing the camera: the person's left is image right
    up = None
    top = [j[n] for n in ("left_shoulder", "right_shoulder", "neck") if n in j]
    bottom = [j[n] for n in ("left_hip", "right_hip") if n in j]
    if top and bottom:
        up = np.mean(top, 0) - np.mean(bottom, 0)
    if up is None or np.linalg.norm(up) < 1e-6:
        up = np.array([0.0, -1.0, 0.0])  # camera y points down
    up = up - lateral * np.dot(up, lateral)
    up = up / max(np.linalg.norm(up), 1e-9)
    forward = np.cross(lateral, up)
    return lateral, up, forward


def _default_dir(child: str, up, forward):
    if child in ("big_toe", "small_toe"):
        return forward
    if child == "heel":
        return -forward
    return -up  # limbs hang down


def _mirror_vector(v, lateral):
    return v - 2.0 * np.dot(v, lateral) * lateral


def _reflect(point, plane_point, normal):
    return point - 2.0 * np.dot(point - plane_point, normal) * normal


def _ray(p2d, k):
    return np.array([(p2d[0] - k[0, 2]) / k[0, 0], (p2d[1] - k[1, 2]) / k[1, 1], 1.0])


def _project(xyz, k):
    return np.array([k[0, 0] * xyz[0] / xyz[2] + k[0, 2], k[1, 1] * xyz[1] / xyz[2] + k[1, 2]])


def _on_ray(p2d, k, z):
    return _ray(p2d, k) * z


def _on_ray_at_distance(p2d, k, parent, length, guess):
    """Point on the keypoint's ray at ``length`` from ``parent``; of the two, the one nearer the
    guess. When the ray passes farther than ``length`` from the parent, its closest point."""
    d = _ray(p2d, k)
    a, b, c = d @ d, -2.0 * (d @ parent), parent @ parent - length * length
    disc = b * b - 4 * a * c
    if disc <= 0:
        return d * (-b / (2 * a))
    roots = np.array([(-b - np.sqrt(disc)) / (2 * a), (-b + np.sqrt(disc)) / (2 * a)])
    roots = roots[roots > 0] if (roots > 0).any() else roots
    best = roots[np.argmin(np.abs(roots - guess[2]))]
    return d * best
