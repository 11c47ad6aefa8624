# SPDX-License-Identifier: GPL-3.0-or-later
"""A clip's body stage names the right track in its progress while the poses are computed in
the background (what `animate` does): the server's per-frame messages of one track must not be
reported under the track the drive has moved on to, and the bar must not jump back."""

import threading
from types import SimpleNamespace

import numpy as np

from sapiens_blender.core.motion.body_drive import drive_bodies, stop_bodies


def _track(tid: int, frames: int, maps) -> SimpleNamespace:
    return SimpleNamespace(id=tid, frames=np.arange(frames), joints=np.zeros((frames, 2, 3)),
                           estimated=np.zeros((frames, 2), bool), reference_maps=maps, reference_person=tid,
                           reference_frame=0, body=None)


def test_the_background_posing_reports_each_track_under_its_own_id():
    # Two reference frames (two fits), three tracks of different lengths: by the time the
    # deferred posing reports, the drive's loop has moved past the track it poses.
    first, second = object(), object()
    tracks = [_track(1, 5, first), _track(2, 7, first), _track(3, 4, second)]
    animation = SimpleNamespace(tracks=tracks, joint_names=("a", "b"), notes=[], source="")
    fit = SimpleNamespace(bone_matrices=np.zeros((3, 2, 4, 4)), phenotypes=np.zeros((3, 6)),
                          placement=np.zeros((3, 4, 4)), index=lambda person: person - 1)
    submitted, reported, values = threading.Event(), [], []

    def pose_track(progress=None, cancel_event=None, targets=None, **_):
        submitted.wait(5)  # report only once the drive has handed every track over
        progress("body motion", 0.0, f"posing the body: frame 1 of {len(targets)}")
        progress("body motion", 0.6, f"posing the body: frame 4 of {len(targets)}")
        raise ValueError("not posed in this test")

    def progress(done, total, message):
        reported.append(message)
        values.append((done, total))

    drive_bodies(animation, lambda maps, people: (None, fit), pose_track, progress=progress, defer=True)
    submitted.set()
    for t in tracks:
        try:
            t.body.settle()
        except ValueError:
            pass
    stop_bodies(animation)
    per_frame = sorted(m for m in reported if ": posing the body: frame 1" in m)
    assert per_frame == ["track 1: posing the body: frame 1 of 5", "track 2: posing the body: frame 1 of 7",
                         "track 3: posing the body: frame 1 of 4"], reported
    # The posings report after every fit: the bar still only moves on (it went 2 -> 0 before).
    done = [d for d, _ in values]
    assert all(b >= a for a, b in zip(done, done[1:])), values
    assert {t for _, t in values} == {3} and 1.5 <= done[-1] <= 3, values
