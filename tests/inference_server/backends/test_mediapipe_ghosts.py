# SPDX-License-Identifier: GPL-3.0-or-later
"""The offline people finder's keep rules on synthetic landmarks: fake detector candidates and a
fake landmark model (no models, no photos), through detect_people."""

from __future__ import annotations

from types import SimpleNamespace

import cv2
import numpy as np

from inference_server.backends.mediapipe_detector import Candidate
from inference_server.backends.mediapipe_landmarks import POSE
from inference_server.backends.mediapipe_ghosts import narrow, upside_down
from inference_server.backends.mediapipe_people import detect_people
from inference_server.processing.goliath import mirror_order

MIRROR = list(mirror_order(POSE))

H = W = 400
LIMBS = (("left_shoulder", "left_elbow"), ("left_elbow", "left_wrist"), ("right_shoulder", "right_elbow"),
         ("right_elbow", "right_wrist"), ("left_hip", "left_knee"), ("left_knee", "left_ankle"),
         ("right_hip", "right_knee"), ("right_knee", "right_ankle"), ("left_shoulder", "left_hip"),
         ("right_shoulder", "right_hip"), ("left_shoulder", "right_shoulder"), ("left_hip", "right_hip"))


def _body(score, joints, face=True, legs=0.9, radius=None, blob=None, widths=1.0):
    """A fake person: ``joints`` name -> (x, y) for the nose, shoulders, elbows, wrists, hips,
    knees and ankles; the other landmarks beside their nearest joint. Visibility 1, the legs'
    ``legs``. Segmentation: thick bones, and the rectangle ``blob`` (x0, y0, x1, y1) if given.
    Its metric 3D: the pose's, with shoulders and hips ``widths`` x as wide as people's (the
    pose's own are narrower: the landmark model's 3D keeps human widths)."""
    pose = np.zeros((33, 3), np.float32)
    pose[:, 2] = 1.0
    for name, xy in joints.items():
        pose[POSE[name], :2] = xy
    for k in range(1, 11):  # eyes, ears, mouth around the nose
        pose[k, :2] = pose[0, :2] + (k % 3 - 1, k % 2)
    for k, near in ((17, 15), (19, 15), (21, 15), (18, 16), (20, 16), (22, 16),
                    (29, 27), (31, 27), (30, 28), (32, 28)):
        pose[k, :2] = pose[near, :2]
    for n in ("left_knee", "right_knee", "left_ankle", "right_ankle"):
        pose[POSE[n], 2] = legs
    pose[29:, 2] = legs
    hips = pose[[POSE["left_hip"], POSE["right_hip"]], :2].mean(0)
    r = radius or 1.3 * float(np.abs(pose[:, :2] - hips).max())
    shoulders = pose[[POSE["left_shoulder"], POSE["right_shoulder"]], :2].mean(0)
    top = hips + r * (shoulders - hips) / np.linalg.norm(shoulders - hips)
    seg = np.zeros((H, W), np.uint8)
    for a, b in LIMBS:
        cv2.line(seg, tuple(int(v) for v in pose[POSE[a], :2]), tuple(int(v) for v in pose[POSE[b], :2]), 1, 22)
    cv2.circle(seg, tuple(int(v) for v in pose[0, :2]), 16, 1, -1)
    if blob is not None:
        seg[blob[1]:blob[3], blob[0]:blob[2]] = 1
    world = np.c_[(pose[:, :2] - hips) / 200.0, np.zeros(33)]
    torso = float(np.linalg.norm(world[[11, 12]].mean(0) - world[[23, 24]].mean(0)))
    for (a, b), width in (((11, 12), 0.7), ((23, 24), 0.45)):  # people's, x the torso's length
        mid, half = world[[a, b]].mean(0), (world[a] - world[b]) / 2
        half *= widths * width * torso / max(2 * float(np.linalg.norm(half)), 1e-6)
        world[a], world[b] = mid + half, mid - half
    return SimpleNamespace(cand=Candidate(score, hips, r, shoulders, top), pose=pose, face=face,
                           seg=seg.astype(np.float32), world=world, vanishes=())


def _lm(points):
    return SimpleNamespace(landmark=[SimpleNamespace(x=x / W, y=y / H, z=0.0, visibility=float(v))
                                     for x, y, v in points])


def _find_people(*bodies, settles=None, check_again=True):
    """detect_people on fakes: the landmark model answers with the body whose hips are nearest
    (the last look, with hands and face, with ``settles[body]`` where given; nobody on a
    mirrored photo, or at a scaled box, where its ``vanishes`` says so)."""
    settles = settles or {}

    def find(image, cancel=None):
        return sorted((b.cand for b in bodies), key=lambda c: -c.score)

    def process(image, hips, top, full):
        mirrored = image[0, -1, 0] == 255  # the photo flipped left to right (its marker moved)
        hips, top = np.asarray(hips, np.float64), np.asarray(top, np.float64)
        if mirrored:
            hips, top = np.array([W - hips[0], hips[1]]), np.array([W - top[0], top[1]])
        b = min(bodies, key=lambda b: np.linalg.norm(b.cand.hips - hips))
        if full:
            b = settles.get(id(b), b)
        pose, world, aux = b.pose.copy(), b.world.copy(), np.array([b.cand.hips, b.cand.top], np.float64)
        scaled = abs(np.linalg.norm(top - hips) / b.cand.radius - 1.0) > 0.05
        if ("mirrored" in b.vanishes and mirrored) or ("scaled" in b.vanishes and scaled):
            return SimpleNamespace(pose_landmarks=None, pose_world_landmarks=None, segmentation_mask=None,
                                   auxiliary_landmarks=None, left_hand_landmarks=None,
                                   right_hand_landmarks=None, face_landmarks=None)  # nobody there
        if mirrored:  # the same person seen mirrored: x flipped, the sides exchanged
            pose, world = pose[MIRROR], world[MIRROR]
            pose[:, 0], world[:, 0], aux[:, 0] = W - pose[:, 0], -world[:, 0], W - aux[:, 0]
        face = None
        if full and b.face:
            face = _lm([(*(pose[0, :2] + (np.cos(a) * 8, np.sin(a) * 8)), 1.0)
                        for a in np.linspace(0, 6.28, 468)])
        return SimpleNamespace(
            pose_landmarks=_lm(pose), pose_world_landmarks=SimpleNamespace(
                landmark=[SimpleNamespace(x=x, y=y, z=z) for x, y, z in world]),
            segmentation_mask=b.seg[:, ::-1] if mirrored else b.seg,
            auxiliary_landmarks=_lm([(*aux[0], 1), (*aux[1], 1)]),
            left_hand_landmarks=None, right_hand_landmarks=None, face_landmarks=face)

    photo = np.zeros((H, W, 3), np.uint8)
    photo[0, 0, 0] = 255  # a marker: where it lands tells the fake model a mirrored look
    people = detect_people(process, find, photo, 16, check_again=check_again)
    return sorted(round(p.score, 2) for p in people)


SEATED = dict(nose=(100, 70), left_shoulder=(120, 105), right_shoulder=(80, 105), left_elbow=(125, 150),
              right_elbow=(75, 150), left_wrist=(120, 190), right_wrist=(80, 190), left_hip=(115, 180),
              right_hip=(85, 180), left_knee=(120, 240), right_knee=(80, 240), left_ankle=(120, 300),
              right_ankle=(80, 300))


# A head-down body over the seated man, its torso bigger than his, its legs (seen less) up out of
# him: COCO 000000040083's ghost (head on his lap, hips on his chest). His segmentation (the man,
# his chair) covers all the ghost's seen landmarks.
GHOST = dict(nose=(100, 290), left_shoulder=(80, 250), right_shoulder=(120, 250), left_elbow=(75, 200),
             right_elbow=(125, 200), left_wrist=(80, 150), right_wrist=(120, 150), left_hip=(88, 110),
             right_hip=(112, 110), left_knee=(90, 50), right_knee=(110, 50), left_ankle=(90, 10),
             right_ankle=(110, 10))
UPRIGHT = {n: (x, 410 - y) for n, (x, y) in GHOST.items()}  # the same body the right way up, on him


def _seated(score=0.92):
    return _body(score, SEATED, radius=120, blob=(40, 40, 160, 340))


def _on_seated(joints, score, face):
    return _body(score, joints, face=face, legs=0.35, radius=200)


def _turned(joints, quarter_turns):
    """``joints`` turned about the photo's centre by 90 degrees ``quarter_turns`` times."""
    out = {}
    for name, (x, y) in joints.items():
        for _ in range(quarter_turns % 4):
            x, y = W - y, x
        out[name] = (x, y)
    return out


def test_upside_down_means_head_and_torso_down():
    standing = _body(0.9, SEATED).pose
    assert not upside_down(standing)
    assert upside_down(_body(0.9, _turned(SEATED, 2)).pose)  # a handstand
    assert not upside_down(_body(0.9, _turned(SEATED, 1)).pose)  # lying on the floor
    assert not upside_down(_body(0.9, _turned(SEATED, 3)).pose)


def test_an_upside_down_body_on_someone_with_weak_evidence_is_a_ghost():
    """Bigger than the seated man, so the size rule alone keeps it (the upright control below);
    upside down, with no face found (a sure detection) or from an unsure one, it is dropped."""
    assert _find_people(_seated(), _on_seated(GHOST, 0.54, face=False)) == [0.92]
    assert _find_people(_seated(), _on_seated(GHOST, 0.45, face=True)) == [0.92]
    # A sure detection upside down with a face found on someone (an acrobat held up): kept.
    assert _find_people(_seated(), _on_seated(GHOST, 0.54, face=True)) == [0.54, 0.92]
    # The same bodies upright on him: not ghosts by the size rule (nearer people look bigger).
    assert _find_people(_seated(), _on_seated(UPRIGHT, 0.54, face=False)) == [0.54, 0.92]
    assert _find_people(_seated(), _on_seated(UPRIGHT, 0.45, face=True)) == [0.45, 0.92]


def test_people_upside_down_or_lying_alone_are_kept():
    """A sure handstand or a person lying down, alone (or beside someone): people, face found or not."""
    for turns in (1, 2, 3):
        for face in (True, False):
            alone = _body(0.8, _turned(SEATED, turns), face=face)
            assert _find_people(alone) == [0.8], (turns, face)
    beside = _body(0.9, {n: (x + 260, y) for n, (x, y) in SEATED.items()})
    assert _find_people(_body(0.8, _turned(SEATED, 2), face=False), beside) == [0.8, 0.9]


def test_a_faceless_body_far_narrower_than_people_is_no_one():
    """The landmark model's 3D of what it draws onto studio lights, a chair or an audience has
    shoulders and hips a fraction of people's (S8's ghost on the lights: 0.28 and 0.15 torso
    lengths); found alone or beside someone, without a face, it is dropped; with a face found,
    or narrow at the shoulders only (a person turned), kept."""
    beside = _body(0.9, {n: (x + 260, y) for n, (x, y) in SEATED.items()})
    assert narrow(_body(0.8, SEATED, widths=0.4).world) and not narrow(_body(0.8, SEATED).world)
    assert _find_people(_body(0.8, SEATED, face=False, widths=0.4), beside) == [0.9]
    assert _find_people(_body(0.8, SEATED, face=False, widths=0.4)) == []
    assert _find_people(_body(0.8, SEATED, face=True, widths=0.4), beside) == [0.8, 0.9]
    turned = _body(0.8, SEATED, face=False)
    turned.world[[11, 12], 0] = turned.world[[11, 12], 0].mean()  # shoulders in line with the camera
    assert not narrow(turned.world) and _find_people(turned, beside) == [0.8, 0.9]


def test_a_person_whose_last_look_lands_on_someone_placed_is_one_person():
    """3DHP S4: an unsure detection at the photo's edge, looked at again at its settled box,
    answered with the seated woman placed before it: two bodies on her. The surer one stays."""
    seated = _seated()
    edge = _body(0.34, {n: (x + 230, y + 60) for n, (x, y) in SEATED.items()}, face=True)
    # her upper body read again, the legs elsewhere (off her segmentation: no nested ghost)
    legs_off = {n: (x + (0 if "shoulder" in n or n == "nose" else 150), y) for n, (x, y) in SEATED.items()}
    again = _body(0.34, legs_off, face=True)
    assert _find_people(seated, edge) == [0.34, 0.92]  # apart, both people
    assert _find_people(seated, edge, settles={id(edge): again}) == [0.92]


def test_an_unsure_body_that_other_looks_do_not_find_again_is_no_one():
    """An unsure detection (< SURE_SCORE) without a face, where two of the three other looks at
    its box (the mirrored photo, the box x0.9 and x1.1) find nobody (what the model draws into
    branches, studio lights, a chair under a cloth), is dropped; one found again by two of them
    is a person, and so is the vanishing one when the detector is sure, a face is found, or the
    photo is a clip's frame (not looked at again: the clip's tracks judge)."""
    def body(score=0.4, face=False, vanishes=()):
        b = _body(score, SEATED, face=face)
        b.vanishes = vanishes
        return b

    assert _find_people(body()) == [0.4]
    assert _find_people(body(vanishes=("mirrored",))) == [0.4]  # a profile the mirror misses
    assert _find_people(body(vanishes=("scaled",))) == []
    assert _find_people(body(vanishes=("mirrored", "scaled"))) == []
    beside = _body(0.9, {n: (x + 260, y) for n, (x, y) in SEATED.items()})
    assert _find_people(body(vanishes=("scaled",)), beside) == [0.9]
    assert _find_people(body(0.6, vanishes=("scaled",))) == [0.6]
    assert _find_people(body(face=True, vanishes=("scaled",))) == [0.4]
    assert _find_people(body(vanishes=("scaled",)), check_again=False) == [0.4]
