# SPDX-License-Identifier: GPL-3.0-or-later
"""core.motion: smoothing, foot planting, rig rotations, frame sources, the clip animator (tracking:
test_tracking.py)."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest

from sapiens_blender.core.motion import joints_file
from sapiens_blender.core.motion.clip import AnimateOptions, ClipAnimator
from sapiens_blender.core.motion.feet import plant_feet
from sapiens_blender.core.motion.rig import (MOTION_JOINTS, continuous_quaternions, matrix_to_quaternion,
                                             pose_frames, rest_pose)
from sapiens_blender.core.motion.smoothing import SmoothingOptions, smooth
from sapiens_blender.core.motion.sources import (FrameRange, FrameSourceError, ImageFolder, MapsFolder,
                                                 open_source)
from sapiens_blender.core.motion.tracking import Detection

from motion_fixtures import image_box, moving_person


def _acc(x):
    return float(np.linalg.norm(np.diff(x, 2, axis=0), axis=-1).mean())


def test_smoothing_cuts_jitter_and_follows_the_motion():
    truth = moving_person(60)
    rng = np.random.default_rng(0)
    noisy = truth + rng.normal(0, 0.02, truth.shape)
    raw_acc = _acc(noisy - truth)
    for lag, factor in ((2, 5.0), (None, 20.0)):
        out = smooth(noisy, options=SmoothingOptions(lag=lag))
        assert _acc(out - truth) * factor < raw_acc, (lag, _acc(out - truth), raw_acc)
        assert np.linalg.norm(out - truth, axis=-1).mean() < 0.02
    # Fixed lag: frame t depends only on measurements up to t + lag.
    changed = noisy.copy()
    changed[30:] += 1.0
    a, b = smooth(noisy), smooth(changed)
    np.testing.assert_allclose(a[:28], b[:28])
    assert not np.allclose(a[28], b[28])


def test_smoothing_bridges_gaps_and_rejects_an_outlier():
    truth = moving_person(30)
    noisy = truth.copy()
    noisy[10:14] = np.nan  # unseen for 4 frames
    noisy[20, 5] += 0.5  # one wild joint
    out = smooth(noisy, options=SmoothingOptions(lag=None))
    assert np.isfinite(out).all()
    assert np.abs(out[10:14] - truth[10:14]).max() < 0.03
    assert np.linalg.norm(out[20, 5] - truth[20, 5]) < 0.05


def test_a_still_foot_is_planted_exactly():
    truth = moving_person(30)
    rng = np.random.default_rng(2)
    idx = [MOTION_JOINTS.index(n) for n in ("left_ankle", "left_ball", "left_toe_tip")]
    truth[:, idx] = truth[0, idx]  # the left foot stands still while the body moves
    noisy = truth + rng.normal(0, 0.0005, truth.shape)  # what is left of the noise after smoothing
    planted, contacts = plant_feet(noisy, MOTION_JOINTS, fps=25.0)
    assert contacts["left"].all() and not contacts["right"].any()
    assert np.ptp(planted[:, idx], axis=0).max() < 1e-9
    right = MOTION_JOINTS.index("right_ankle")
    np.testing.assert_array_equal(planted[:, right], noisy[:, right])


def test_rig_keeps_bone_lengths_and_reaches_the_ankles():
    joints = moving_person(20)
    rest = rest_pose(joints)
    posed = pose_frames(joints, rest.lengths, rest)
    for ankle in ("left_ankle", "right_ankle", "left_wrist"):
        i = MOTION_JOINTS.index(ankle)
        assert np.abs(posed.joints[:, i] - joints[:, i]).max() < 1e-6
    # A rigid motion of the whole body changes nothing but the root.
    assert np.abs(posed.joints - joints).max() < 0.02


def test_quaternions_match_matrices_and_never_flip():
    rng = np.random.default_rng(3)
    q = rng.normal(size=(50, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    w, x, y, z = q.T
    m = np.stack([np.stack([1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)], -1),
                  np.stack([2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)], -1),
                  np.stack([2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)], -1)], -2)
    back = matrix_to_quaternion(m)
    np.testing.assert_allclose(np.abs(np.sum(back * q, axis=1)), 1.0, atol=1e-9)
    # A slow spin through 360 deg: sign-normalised quaternions jump, continuous ones do not.
    a = np.linspace(0, 2 * np.pi, 80)
    spin = np.stack([np.cos(a / 2), np.zeros_like(a), np.zeros_like(a), np.sin(a / 2)], -1)
    jumpy = matrix_to_quaternion(np.stack([[np.cos(a), -np.sin(a), 0 * a], [np.sin(a), np.cos(a), 0 * a],
                                           [0 * a, 0 * a, 1 + 0 * a]]).transpose(2, 0, 1))
    assert np.linalg.norm(np.diff(jumpy, axis=0), axis=1).max() > 1.0
    smooth_q = continuous_quaternions(jumpy)
    assert np.linalg.norm(np.diff(smooth_q, axis=0), axis=1).max() < 0.1
    np.testing.assert_allclose(np.abs(np.sum(smooth_q * spin, axis=1)), 1.0, atol=1e-9)


def test_frame_sources_select_sort_and_explain(tmp_path):
    for name in ("f10.png", "f2.png", "f1.png", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    src = ImageFolder(tmp_path, FrameRange(start=1, stride=1))
    assert [f.name for f in src] == ["f2.png", "f10.png"] and [f.index for f in src] == [1, 2]
    assert src.selected == 2 and src.fps == 25.0
    src = open_source(tmp_path, FrameRange(0, None, 2), fps=30)
    assert [f.index for f in src] == [0, 2] and src.output_fps == 15.0
    with pytest.raises(FrameSourceError, match="no maps"):
        MapsFolder(tmp_path)
    with pytest.raises(FrameSourceError, match="stride"):
        FrameRange(stride=0)
    with pytest.raises(FrameSourceError, match="no such video"):
        open_source(tmp_path / "missing.mp4")
    (tmp_path / "bad.mp4").write_bytes(b"not a video")
    with pytest.raises(FrameSourceError, match="cannot decode"):
        open_source(tmp_path / "bad.mp4")


def test_frame_rates_are_checked_before_any_work(tmp_path, monkeypatch):
    """--fps inf ran the whole analysis and then died on an OverflowError; 1e-6 made the .blend
    and the .glb disagree: a rate outside 0.1-1000 fps is refused when the source opens, and a
    video whose own rate is outside it plays at the default."""
    from sapiens_blender.cli import main

    (tmp_path / "f1.png").write_bytes(b"x")
    for fps in (float("inf"), float("nan"), 1e308, 1e-6, 0.0, -5.0):
        with pytest.raises(FrameSourceError, match="between 0.1 and 1000"):
            ImageFolder(tmp_path, fps=fps)
        with pytest.raises(FrameSourceError, match="between 0.1 and 1000"):
            open_source(tmp_path / "missing.mp4", fps=fps)  # before looking for the file
    assert ImageFolder(tmp_path, fps=0.5).fps == 0.5
    assert main(["animate", str(tmp_path), "--fps", "inf", "-o", str(tmp_path / "a.glb")]) == 2
    from sapiens_blender.core.motion import sources

    _, path = _write_video(tmp_path)
    real = sources._local_decoder()
    said = {**real, "probe": lambda p: {**real["probe"](p), "fps": 1e-6}}  # a container's odd rate
    monkeypatch.setattr(sources, "_local_decoder", lambda: said)
    assert open_source(path).fps == 25.0


def _write_video(tmp_path):
    cv2 = pytest.importorskip("cv2")
    path = tmp_path / "clip.avi"
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 30.0, (64, 48))
    for i in range(12):
        writer.write(np.full((48, 64, 3), i * 20, np.uint8))
    writer.release()
    return cv2, path


def test_video_frames_stream_with_stride(tmp_path):
    cv2, path = _write_video(tmp_path)
    src = open_source(path, FrameRange(start=2, end=11, stride=3))
    frames = list(src)
    assert [f.index for f in frames] == [2, 5, 8] and src.fps == pytest.approx(30.0) and src.output_fps == 10.0
    levels = [int(cv2.imdecode(np.frombuffer(f.data, np.uint8), cv2.IMREAD_GRAYSCALE).mean()) for f in frames]
    assert levels == pytest.approx([40, 100, 160], abs=6)


def test_video_decoded_by_another_python_when_this_one_lacks_opencv(tmp_path, monkeypatch):
    """Blender's Python has no cv2: the server's interpreter decodes and streams the frames."""
    import sys

    from sapiens_blender.core.motion import sources

    _, path = _write_video(tmp_path)
    local = list(open_source(path, FrameRange(start=2, end=11, stride=3)))
    monkeypatch.setattr(sources, "_local_decoder", lambda: None)
    with pytest.raises(FrameSourceError, match="needs OpenCV"):
        open_source(path)
    src = open_source(path, FrameRange(start=2, end=11, stride=3), decoder_python=sys.executable)
    assert src.fps == pytest.approx(30.0) and (src.width, src.height) == (64, 48)
    remote = list(src)
    assert [f.index for f in remote] == [2, 5, 8] and [f.data for f in remote] == [f.data for f in local]
    stream = iter(open_source(path, decoder_python=sys.executable))
    next(stream)
    stream.close()  # stopping early ends the decoder process
    (tmp_path / "bad.mp4").write_bytes(b"not a video")
    with pytest.raises(FrameSourceError, match="cannot decode"):
        open_source(tmp_path / "bad.mp4", decoder_python=sys.executable)


class _JointsOnly:
    """A pose source that returns given joints (the tracker and rig need nothing else)."""

    kind = "relief armature"
    joint_names = MOTION_JOINTS

    def __init__(self, per_frame):
        self.per_frame = iter(per_frame)

    def detect(self, maps):
        return [Detection(j, image_box(j), np.zeros(len(j), bool)) for j in next(self.per_frame)]


def test_clip_animator_and_the_joints_file(tmp_path):
    from geometry_fixtures import plane_maps

    truth = moving_person(12)
    maps = plane_maps()
    animator = ClipAnimator(25.0, _JointsOnly([[j] for j in truth]), AnimateOptions(min_track_frames=3))
    for t in range(12):
        animator.add(t * 2, maps)  # every other frame of the input
    animation = animator.finish()
    assert len(animation.tracks) == 1 and animation.frames == list(range(0, 24, 2))
    path = joints_file.write(tmp_path / "anim.json", animation)
    doc = json.loads(path.read_text())
    assert doc["fps"] == 25.0 and len(doc["intrinsics"]) == 4
    assert [f["frame"] for f in doc["frames"]] == list(range(0, 24, 2))
    person = doc["frames"][3]["people"][0]
    assert person["id"] == 1 and set(person["joints"]) == set(MOTION_JOINTS)
    back = joints_file.read(path)
    xyz, est = back["frames"][3]["people"][0]["joints"]["left_wrist"]
    np.testing.assert_allclose(xyz, animation.tracks[0].joints[3, MOTION_JOINTS.index("left_wrist")], atol=1e-5)
    (tmp_path / "bad.json").write_text('{"fps": 0, "intrinsics": [1,1,1,1], "frames": []}')
    with pytest.raises(joints_file.AnimationJointsError, match="fps"):
        joints_file.read(tmp_path / "bad.json")


def test_a_short_clip_keeps_a_person_seen_in_most_of_its_frames():
    """Tracks shorter than min_track_frames are dropped, but in a clip of a few frames a person
    seen in at least half of them stays (a real 5-frame clip lost a player seen in 4)."""
    from geometry_fixtures import plane_maps

    walker, runner = moving_person(5), moving_person(5) + np.array([1.5, 0.0, 0.0])
    seen = [[walker[t]] + ([runner[t]] if t in (0, 1, 2) else []) for t in range(5)]
    animation = _animate(seen, plane_maps())
    assert len(animation.tracks) == 2 and not any("dropped" in n for n in animation.notes)
    seen = [[walker[t]] + ([runner[t]] if t in (0, 1) else []) for t in range(5)]
    animation = _animate(seen, plane_maps())
    assert len(animation.tracks) == 1 and any("seen in only 2 frame(s); dropped" in n for n in animation.notes)
    long = moving_person(12)
    seen = [[long[t]] + ([long[t] + np.array([1.5, 0.0, 0.0])] if t < 4 else []) for t in range(12)]
    assert len(_animate(seen, plane_maps()).tracks) == 1  # a long clip still asks for 5


def _animate(per_frame, maps):
    animator = ClipAnimator(25.0, _JointsOnly(per_frame), AnimateOptions())
    for t in range(len(per_frame)):
        animator.add(t, maps)
    return animator.finish()


def test_body_prior_restores_bone_lengths_and_weights_the_doubtful_end():
    from sapiens_blender.core.motion.body_prior import LIMB_BONES, apply_body_prior

    truth = moving_person(40)
    rng = np.random.default_rng(3)
    noisy = truth + rng.normal(0.0, 0.02, truth.shape)
    est = np.zeros(truth.shape[:2], bool)
    est[:, MOTION_JOINTS.index("head")] = True
    out = apply_body_prior(noisy, est, MOTION_JOINTS, lag=2)
    a, b = (np.array([MOTION_JOINTS.index(n) for n in names]) for names in zip(*LIMB_BONES))
    spread = lambda j: np.linalg.norm(j[:, b] - j[:, a], axis=-1).std(axis=0).mean()  # noqa: E731
    assert spread(out) < 0.3 * spread(noisy)
    limbs = sorted(set(a) | set(b))
    err = lambda j: np.linalg.norm(j[:, limbs] - truth[:, limbs], axis=-1).mean()  # noqa: E731
    assert err(out) < 0.9 * err(noisy)
    np.testing.assert_array_equal(out[:, MOTION_JOINTS.index("head")], noisy[:, MOTION_JOINTS.index("head")])
    # One frame's forearm 6 cm too long at a doubtful wrist: the wrist takes most of the correction.
    elbow, wrist = MOTION_JOINTS.index("left_elbow"), MOTION_JOINTS.index("left_wrist")
    stretched = truth.copy()
    d = truth[-1, wrist] - truth[-1, elbow]
    stretched[-1, wrist] += 0.06 * d / np.linalg.norm(d)
    conf = np.ones(truth.shape[:2])
    conf[-1, wrist] = 0.2
    fixed = apply_body_prior(stretched, np.zeros_like(est), MOTION_JOINTS, lag=None, confidence=conf)
    moved_wrist = np.linalg.norm(fixed[-1, wrist] - stretched[-1, wrist])
    moved_elbow = np.linalg.norm(fixed[-1, elbow] - stretched[-1, elbow])
    assert moved_wrist > 5 * moved_elbow and moved_wrist > 0.04


def test_still_joints_follow_the_global_motion_and_moving_ones_keep_their_track():
    from sapiens_blender.core.motion.stillness import tie_still_joints

    frames = 60
    base = moving_person(1)[0]
    pan = np.stack([0.4 * np.sin(np.linspace(0, 2 * np.pi, frames)), np.zeros(frames), np.zeros(frames)], -1)
    truth = base[None] + pan[:, None]
    wrist = MOTION_JOINTS.index("left_wrist")
    truth[:, wrist, 1] += 0.3 * np.sin(np.linspace(0, 3 * np.pi, frames))  # the one joint that moves
    rng = np.random.default_rng(4)
    noisy = truth + rng.normal(0.0, 0.01, truth.shape)
    gap = noisy.copy()
    gap[20:23] = np.nan  # the person unseen for three frames
    for lag, measured in itertools.product((2, None), (noisy, gap)):
        options = SmoothingOptions(lag=lag)
        smoothed = smooth(measured, options=options)
        tied = tie_still_joints(measured, smoothed, options)
        assert np.isfinite(tied).all()
        still = [j for j in range(len(MOTION_JOINTS)) if j != wrist]
        err = lambda j: np.linalg.norm(j[:, still] - truth[:, still], axis=-1).mean()  # noqa: E731
        assert err(tied) < 0.5 * err(smoothed), lag
        # The wrist keeps its own track along the axis it moves (y: ±30 cm; measured within
        # 2.6 mm of its per-joint smoothing, now smoothed relative to the body); still along x
        # and z, it follows the global motion there (per axis), which only makes it better.
        assert np.abs(tied[:, wrist, 1] - smoothed[:, wrist, 1]).max() < 0.005
        wrist_err = lambda j: np.linalg.norm(j[:, wrist] - truth[:, wrist], axis=-1).mean()  # noqa: E731
        assert wrist_err(tied) < 0.95 * wrist_err(smoothed)


def test_a_short_track_is_not_smoothed_relative_to_a_global_motion_it_cannot_measure():
    """A person tipping over while sliding (18 degrees and a decelerating slide a frame), seen in
    4 of 5 frames, as a real clip's sliding footballer. Over so few frames the global motion's
    "noise" (second differences) is its deceleration: smoothed relative to it, every frame was
    1-18 mm further from the truth than the per-joint smoothing (the real one's last frame 3.3 ->
    8.7 % of his size from his keypoints). Under 2 x min_frames frames the pass stands aside."""
    from sapiens_blender.core.motion.stillness import StillnessOptions, tie_still_joints

    base = moving_person(1)[0]
    centre = base.mean(0)
    truth = []
    for t in range(5):
        a = np.radians(18 * t)
        turn = np.array([[np.cos(a), -np.sin(a), 0], [np.sin(a), np.cos(a), 0], [0, 0, 1]])
        truth.append((base - centre) @ turn.T + centre + np.array([0.5 * (1 - (1 - t / 5) ** 2), 0, 0]))
    measured = np.array(truth) + np.random.default_rng(0).normal(0, 0.005, (5, *base.shape))
    measured[1] = np.nan
    options = SmoothingOptions(lag=2)
    smoothed = smooth(measured, options=options)
    assert StillnessOptions().min_frames * 2 > 5
    np.testing.assert_array_equal(tie_still_joints(measured, smoothed, options), smoothed)


def test_the_global_motion_is_not_fooled_by_joints_that_jitter_together():
    """A still body panned sideways; every joint but the head jumps up and down together each
    frame (2 cm: a backend's correlated keypoint noise), the head does not. Counting the body's
    joints as independent evidence would put their common jitter into the global motion."""
    from sapiens_blender.core.motion.stillness import tie_still_joints

    frames = 60
    pan = np.stack([0.4 * np.sin(np.linspace(0, 2 * np.pi, frames)), np.zeros(frames), np.zeros(frames)], -1)
    truth = moving_person(1)[0][None] + pan[:, None]
    rng = np.random.default_rng(5)
    noisy = truth + rng.normal(0.0, 0.003, truth.shape)
    body = [j for j, name in enumerate(MOTION_JOINTS) if name != "head"]
    noisy[:, body, 1] += rng.normal(0.0, 0.02, frames)[:, None]
    for lag, ratio in ((2, 0.6), (None, 0.8)):  # measured 0.49 and 0.67 (inverse-jitter weights: 0.90, 1.23)
        options = SmoothingOptions(lag=lag)
        smoothed = smooth(noisy, options=options)
        tied = tie_still_joints(noisy, smoothed, options)
        err = lambda j: np.abs(j[:, body, 1] - truth[:, body, 1]).mean()  # noqa: E731
        assert err(tied) < ratio * err(smoothed), lag
