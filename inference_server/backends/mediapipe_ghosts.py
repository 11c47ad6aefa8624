# SPDX-License-Identifier: GPL-3.0-or-later
"""Who is a person: the offline people finder's keep rules (docs/offline_backend.md "People").

The detector and the landmark model answer for lights, chairs, an audience, the helmet a person
holds, and answer twice for one person; these rules, on a candidate's landmarks, its detection
score, its face and its segmentation, say which answers are people. Pure numpy on
mediapipe_people.Person; tested on fake models in tests/inference_server/backends/test_mediapipe_ghosts.py.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from .mediapipe_detector import SURE_SCORE
from .mediapipe_landmarks import POSE

if TYPE_CHECKING:
    from .mediapipe_people import Person

SAME_PERSON = 0.3  # two passes' torso points this close (x torso size): one person
SAME_FACE = 0.15  # two seen noses this close (x torso size): one person
SAME_BOX = 0.3  # ...or their boxes' centres this close (x radius), radii within this ratio... (see same_person)
MIN_LEGS_SEEN = 0.3  # a person after the detector's surest, with no face found, shows legs this well
# A body on someone's segmentation is a ghost when that someone is at least as big (NESTED_SIZE;
# 0.8 dropped the nearer of two overlapping people, whose torso looked 15 % bigger) ...
NESTED_SIZE, NESTED_SHARE = 1.0, 0.6  # see inside_another
UPSIDE_DOWN = 0.25  # torso and head both point down, this much (sine, ~15 deg) below level (see upside_down)
SKIP_SIZE = 0.8  # ... and a candidate on a placed person, under this size of theirs, is not looked at
NARROW_SHOULDERS, NARROW_HIPS = 0.45, 0.35  # a faceless 3D pose narrower than both is no one's (see narrow)
MIN_BODY_SEEN = 0.6  # a person the detector is unsure of (< SURE_SCORE) shows a face or this (see body_seen)
# ... and is found again by other looks at their box: of mediapipe_people.AGAIN_LOOKS (the
# mirrored photo, the box x0.9 and x1.1) at most UNFOUND - 1 find nobody. The landmark model's
# own verdict, a little moved: on the real photos every person is found again (two of three at
# worst); what it drew into an artwork's branches, or onto 3DHP's studio lights and a covered
# chair on the photos turned a quarter, is not (docs/offline_backend.md "People"). How far the
# looks move the landmarks was not used: real unsure people in a video's frames moved 0.28-0.59
# torso sizes, as far as the ghosts.
UNFOUND = 2


def on_a_bigger_one(cand, people: list[Person], seg: list[np.ndarray]) -> bool:
    """A candidate whose hips and shoulders lie on a placed person's segmentation, with a body
    circle under SKIP_SIZE of theirs: what inside_another would drop, skipped before its looks."""
    for p, m in zip(people, seg):
        h, w = m.shape
        pts = np.round([cand.hips, cand.shoulders]).astype(int)
        if ((pts >= 0) & (pts < (w, h))).all() and m[pts[:, 1], pts[:, 0]].all() and (
                cand.radius * SKIP_SIZE < np.linalg.norm(np.subtract(p.roi[1], p.roi[0]))):
            return True
    return False


def legs_seen(p: Person) -> float:
    """Mean visibility of the knees and ankles. A ghost in an object beside someone (the helmet
    an astronaut holds) has a torso and arms but no face and no legs."""
    return float(p.pose[[POSE[n] for n in ("left_knee", "right_knee", "left_ankle", "right_ankle")], 3].mean())


def body_seen(p: Person) -> float:
    """Mean visibility of the shoulders, arms, hands' points and hips. On the real photos, the
    people placed by a detection under SURE_SCORE showed a face or >= 0.61; the ghosts (on an
    artwork, in a corner of the astronaut photo) no face and <= 0.58: a thin margin, few samples."""
    return float(p.pose[POSE["left_shoulder"]:POSE["right_hip"] + 1, 3].mean())


def inside_another(k: int, people: list[Person], seg: list[np.ndarray], kept: list[int]) -> bool:
    """A "person" whose seen landmarks lie on a kept, not smaller one's segmentation: the
    landmark model fitted a second body into someone's chest, or hung one from their head. One
    upside down with weak evidence (no face found, or an unsure detection) is dropped there
    whatever the sizes: COCO 000000040083's ghost (sure, 0.54) lay head down over a seated man's
    arm and a chair, its face "seen" (1.00) but not found, its torso 1.4x his. Alone, or with a
    face found from a sure detection, an upside-down body is kept: people do handstands."""
    p = people[k]
    h, w = seg[k].shape
    pts = np.round(p.pose[p.pose[:, 3] >= 0.5, :2]).astype(int)
    pts = pts[(pts[:, 0] >= 0) & (pts[:, 0] < w) & (pts[:, 1] >= 0) & (pts[:, 1] < h)]
    if len(pts) == 0:
        return False
    size = torso_size(p.pose)
    any_size = upside_down(p.pose) and (p.face is None or p.score < SURE_SCORE)
    return any((any_size or torso_size(o.pose) > NESTED_SIZE * size)
               and m[pts[:, 1], pts[:, 0]].mean() > NESTED_SHARE for o, m in ((people[j], seg[j]) for j in kept))


def narrow(world: np.ndarray) -> bool:
    """A metric 3D pose far narrower than people's: shoulders under NARROW_SHOULDERS and hips
    under NARROW_HIPS torso lengths apart. The landmark model's 3D keeps human widths on real
    people (on the 30 of the real-photo benchmark: shoulders >= 0.57, hips >= 0.36, turned or
    not); on what it draws onto studio lights, a chair, a seated audience both collapse
    (<= 0.43 and <= 0.33): docs/offline_backend.md "People"."""
    w = np.asarray(world, np.float64)
    sh = w[[POSE["left_shoulder"], POSE["right_shoulder"]]]
    hp = w[[POSE["left_hip"], POSE["right_hip"]]]
    torso = float(np.linalg.norm(sh.mean(0) - hp.mean(0)))
    if not np.isfinite(torso) or torso < 1e-3:
        return False
    return bool(np.linalg.norm(sh[0] - sh[1]) < NARROW_SHOULDERS * torso
                and np.linalg.norm(hp[0] - hp[1]) < NARROW_HIPS * torso)


def upside_down(pose: np.ndarray) -> bool:
    """The shoulders and the face (its 11 points, seen or not) both below the hips, each more than
    UPSIDE_DOWN (sine) below level: head down, not lying (level) nor sitting or standing."""
    hips = pose[[POSE["left_hip"], POSE["right_hip"]], :2].mean(0)
    shoulders = pose[[POSE["left_shoulder"], POSE["right_shoulder"]], :2].mean(0)
    ends = (shoulders, pose[:POSE["left_shoulder"], :2].mean(0))
    return all(e[1] - hips[1] > UPSIDE_DOWN * max(float(np.linalg.norm(e - hips)), 1.0) for e in ends)


def torso_size(pose: np.ndarray) -> float:
    s = pose[[POSE["left_shoulder"], POSE["right_shoulder"]], :2]
    hp = pose[[POSE["left_hip"], POSE["right_hip"]], :2]
    return max(float(np.linalg.norm(s.mean(0) - hp.mean(0))), float(np.linalg.norm(s[0] - s[1])), 1.0)


def same_person(a: Person, b: Person) -> bool:
    """Two candidates that landed on one person: the same box, one nose, both shoulders, or torso
    points all close."""
    (ca, ta), (cb, tb) = a.roi, b.roi
    ra, rb = float(np.linalg.norm(np.subtract(ta, ca))), float(np.linalg.norm(np.subtract(tb, cb)))
    if np.linalg.norm(np.subtract(ca, cb)) < SAME_BOX * max(ra, rb) and min(ra, rb) > SAME_BOX * max(ra, rb):
        return True
    size = min(torso_size(a.pose), torso_size(b.pose))
    nose = POSE["nose"]
    if min(a.pose[nose, 3], b.pose[nose, 3]) >= 0.5 and (
            np.linalg.norm(a.pose[nose, :2] - b.pose[nose, :2]) < SAME_FACE * size):
        return True  # one face: a second body hung from it (upside down, or shrunk into the chest)
    sh = [POSE["left_shoulder"], POSE["right_shoulder"]]
    if min(a.pose[sh, 3].min(), b.pose[sh, 3].min()) >= 0.5 and (
            np.linalg.norm(a.pose[sh, :2] - b.pose[sh, :2], axis=1) < SAME_FACE * size).all():
        return True  # both shoulders in one place: two readings of one person's legs (3DHP S4, seated)
    idx = [POSE[n] for n in ("nose", "left_shoulder", "right_shoulder", "left_hip", "right_hip")]
    d = np.linalg.norm(a.pose[idx, :2] - b.pose[idx, :2], axis=1).mean()
    return d < SAME_PERSON * size


def keep_people(people: list[Person], seg: list[np.ndarray], unfound=None) -> list[int]:
    """The indices of the answers that are people, in order (``people`` the detector's surest
    first, each with its segmentation in ``seg``): the rules above, in one place. ``unfound(p)``:
    how many other looks at ``p``'s box find nobody (mediapipe_landmarker.Looks.nobody_at; it costs
    looks, so it is asked last, of unsure faceless candidates the other rules keep); None: none
    asked (a clip's frames)."""
    # The last look, at a person's settled box, can land on someone placed before (3DHP S4: an
    # unsure detection at the photo's edge settled on the seated woman): the surer one stays.
    once = [k for k in range(len(people)) if not any(same_person(people[j], people[k]) for j in range(k))]
    biggest = max(once, key=lambda k: int(seg[k].sum()), default=-1)  # a ghost can have a bigger torso
    keep: list[int] = []
    for k in once:  # the detector's most certain first: a ghost lies on a kept one
        p = people[k]
        if not inside_another(k, people, seg, keep) and not (p.face is None and narrow(p.world)) and (
                k == biggest or p.face is not None or legs_seen(p) >= MIN_LEGS_SEEN) and (
                p.score >= SURE_SCORE or p.face is not None or body_seen(p) >= MIN_BODY_SEEN) and (
                p.score >= SURE_SCORE or p.face is not None or unfound is None or unfound(p) < UNFOUND):
            keep.append(k)
    return keep
