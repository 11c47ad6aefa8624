# SPDX-License-Identifier: GPL-3.0-or-later
"""core.motion.tracking: optimal assignment and following people across frames."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from sapiens_blender.core.motion.tracking import Detection, Tracker, assign, hungarian

from motion_fixtures import image_box, moving_person


def test_hungarian_is_optimal_on_random_matrices():
    rng = np.random.default_rng(1)
    for n in (1, 2, 4, 6):
        for _ in range(20):
            cost = rng.random((n, n))
            col = hungarian(cost)
            best = min(sum(cost[i, p[i]] for i in range(n)) for p in itertools.permutations(range(n)))
            assert cost[np.arange(n), col].sum() == pytest.approx(best)


def test_assign_leaves_pairs_above_the_gate_unmatched():
    rows, cols = assign(np.array([[0.1, 0.9], [0.2, 5.0], [3.0, 3.0]]), gate=1.0)
    assert sorted(zip(rows, cols)) == [(0, 1), (1, 0)]  # 1.1 in all beats 0.1 + two unmatched
    assert assign(np.array([[5.0]]), gate=1.0) == ([], [])
    assert assign(np.zeros((0, 3))) == ([], [])


def test_tracks_keep_identity_through_a_crossing_and_an_occlusion():
    """Two people walk past each other (one in front: the other vanishes for 4 frames while
    hidden), a third enters later. Detections arrive in shuffled order every frame."""
    frames = 40
    a = moving_person(frames, shift=(-0.5, 0, 0.3))
    a[:, :, 0] += np.linspace(0, 1.0, frames)[:, None]  # left to right, in front
    b = moving_person(frames, shift=(0.5, 0, 0.0))
    b[:, :, 0] -= np.linspace(0, 1.0, frames)[:, None]  # right to left, behind
    c = moving_person(frames, shift=(1.5, 0, 1.0))
    rng = np.random.default_rng(0)
    tracker = Tracker()
    owner = {}
    for t in range(frames):
        people = [("a", a[t])]
        if not 18 <= t < 22:  # b hidden behind a
            people.append(("b", b[t]))
        if t >= 25:
            people.append(("c", c[t]))
        rng.shuffle(people)
        noisy = [(who, j + rng.normal(0, 0.01, j.shape)) for who, j in people]
        ids = tracker.update(t, [Detection(j, image_box(j)) for _, j in noisy])
        for (who, _), tid in zip(noisy, ids):
            owner.setdefault(who, set()).add(tid)
    assert all(len(ids) == 1 for ids in owner.values()), owner
    assert len({next(iter(v)) for v in owner.values()}) == 3
    assert [len(t.frames) for t in tracker.tracks()] == [40, 36, 15]


def test_a_close_up_keeps_its_track_when_its_filled_in_joints_jump():
    """A close-up: 6 joints measured, the rest filled in (legs out of the frame) and jumping
    by up to 0.5 m from frame to frame, as lifted guesses do. Identity follows the measured
    joints: one track (its filled-in joints alone carried it past the gate)."""
    frames = 12
    truth = moving_person(frames)
    estimated = np.ones(truth.shape[1], bool)
    estimated[:6] = False
    rng = np.random.default_rng(3)
    tracker = Tracker()
    ids = set()
    for t in range(frames):
        j = truth[t].copy()
        j[estimated] += rng.uniform(-0.5, 0.5, (int(estimated.sum()), 3))
        ids |= set(tracker.update(t, [Detection(j, image_box(truth[t]), estimated.copy())]))
    assert ids == {1}, [len(t.frames) for t in tracker.tracks()]


def test_a_far_person_keeps_one_track_through_depth_jumps_and_an_outlier_frame():
    """A person 5 m away as a single camera measures them (PoseTrack's real clip): their
    distance jumps by ~0.5 m between frames while they stay put in the image, and one frame's
    detection is off (a body mixed with a neighbour's), after which they are seen as before.
    One track, not three: depth counts for less than the image's axes, and a track may also be
    met where it was last seen, not only where two noisy sightings' velocity throws it."""
    frames = 8
    truth = moving_person(frames, shift=(0.5, 0.0, 5.0))
    jumps = np.array([0.0, 0.47, -0.5, 0.3, -0.4, 0.45, -0.2, 0.35])
    tracker = Tracker()
    owner = []
    for t in range(frames):
        j = truth[t] + np.array([0.0, 0.0, jumps[t]])
        if t == 2:  # the outlier: half a metre lower, a metre nearer
            j = j + np.array([0.0, 0.5, -1.0])
        owner.append(tracker.update(t, [Detection(j, image_box(truth[t]))])[0])
    assert len(set(owner) - {owner[2]}) == 1, owner  # every frame but the outlier on one track
    assert len(tracker.tracks()[0].frames) == frames - 1
    # two people side by side at different depths are still told apart
    near, far = moving_person(6, shift=(0.0, 0.0, 3.0)), moving_person(6, shift=(0.0, 0.0, 7.0))
    tracker = Tracker()
    ids = [tracker.update(t, [Detection(near[t], image_box(near[t])), Detection(far[t], image_box(far[t]) * 0.5)])
           for t in range(6)]
    assert all(i == ids[0] for i in ids) and len(set(ids[0])) == 2


def test_a_track_ends_after_max_missing_frames():
    j = moving_person(10)
    tracker = Tracker(max_missing=3)
    first = tracker.update(0, [Detection(j[0], image_box(j[0]))])
    for t in range(1, 6):
        tracker.update(t, [])
    assert tracker.update(6, [Detection(j[1], image_box(j[1]))]) != first
