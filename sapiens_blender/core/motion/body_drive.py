# SPDX-License-Identifier: GPL-3.0-or-later
"""Tracks -> the fitted body driven through the clip (the server's ``body_fit`` + ``body_motion``).

Per track: the body is fitted once, on the track's best-seen frame (its shape, fingers and that
frame's pose); then the server poses that body on every frame's smoothed, planted joints, the
shape held, each frame warm-started from its neighbour (``inference_server/fit/motion.py``).
Smoothing and foot planting act on the joints before, so the body moves as the relief armature
does, with anny's rig, weights and rest pose.

The armature object stays where the fitted frame put it (``placement`` of the reference frame);
the motion is keyed on the bones, the root's location and rotation carrying the root motion.
numpy + stdlib: runs in Blender's Python.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ..body.records import BodyFit, BodyTemplate
from ..body.pose import local_pose_matrices
from .smoothing import DEFAULT_LAG
from ..errors import (InvalidRequest, ModelNotFound, ModelNotReady, ProtocolError, RequestTooLarge,
                      ServerError)
from .clip import Animation, TrackAnimation
from ..geometry.rotations import continuous_quaternions, matrix_to_quaternion

# A joint the tracker filled (the smoother's prediction where it was not seen) or the lifting
# derived (a rig point no keypoint marks) counts less than a measured one. Not much less: the
# fills are the smoother's best estimate, and an arm that held still while its wrist was unseen
# then jumped to it (weight 0.05: 12 % more jitter on the ground-truth clip).
WEIGHT_ESTIMATED = 0.3

# fit(maps, people) -> (template, fit); motion(**inputs) -> the body_motion arrays
# What costs a track its body but not the clip: a server without the fit (ModelNotFound), a
# fit that fails for this person, a malformed answer. Cancellation and a lost server do stop it.
NO_BODY_ERRORS = (ValueError, ModelNotFound, ModelNotReady, InvalidRequest, RequestTooLarge, ServerError,
                  ProtocolError)
FitReference = Callable[[object, list], "tuple[BodyTemplate, BodyFit]"]
PoseTrack = Callable[..., dict]


@dataclass
class BodyMotion:
    """The server's poses of one track's body, ready for the Blender side."""

    bone_matrices: np.ndarray  # [T,B,4,4] model frame of the reference frame's placement
    joints: np.ndarray  # [T,J,3] camera frame, template.joint_names order
    residual_m: np.ndarray  # [T] mean distance of the body's points to the track's joints
    report: dict = field(default_factory=dict)


@dataclass
class TrackBody:
    """One track's fitted body and its pose on every frame of the track."""

    template: BodyTemplate
    fit: BodyFit  # the fit of the track's reference frame (it may hold other people too)
    person_id: int  # the person in ``fit`` (and in the reference maps)
    reference: int  # position in the track of the fitted frame
    # The poses, or (``drive_bodies(defer=True)``) a Future of them: the body can be built in
    # Blender from the fit while the server still poses it.
    motion: "BodyMotion | Future"
    # The face's smoothing look-ahead (core/motion/face.py): the body's (None = the whole clip).
    expression_lag: int | None = DEFAULT_LAG
    # Set by ``stop_bodies``: the deferred posing stops on the server too (a running Future
    # cannot be cancelled, and the interpreter's exit would wait for it)
    stop: threading.Event | None = None

    def settle(self) -> BodyMotion:
        """The motion, waiting for it if it is still being computed (raises what the server did)."""
        if isinstance(self.motion, Future):
            self.motion = self.motion.result()
        return self.motion

    @property
    def bone_matrices(self) -> np.ndarray:
        return self.settle().bone_matrices

    @property
    def joints(self) -> np.ndarray:
        return self.settle().joints

    @property
    def residual_m(self) -> np.ndarray:
        return self.settle().residual_m

    @property
    def report(self) -> dict:
        return self.settle().report

    @property
    def index(self) -> int:
        return self.fit.index(self.person_id)

    def pose_channels(self, parents=None) -> tuple[np.ndarray, np.ndarray]:
        """(quaternions [T,B,4] w,x,y,z continuous in time, locations [T,B,3]) of the pose bones,
        relative to the rest pose and to ``parents`` (default the template's hierarchy; a
        renamed rig may re-parent)."""
        parents = self.template.bone_parents if parents is None else np.asarray(parents)
        rest = self.fit.rest_bone_matrices[self.index]
        local = np.stack([local_pose_matrices(rest, pose, parents) for pose in self.bone_matrices])
        return continuous_quaternions(matrix_to_quaternion(local[..., :3, :3])), local[..., :3, 3]


def server_body_driver(client, timeout: float | None = None,
                       cancel_event: threading.Event | None = None) -> tuple[FitReference, PoseTrack]:
    """The two server calls a body drive needs, bound to ``client``."""
    from ..remote import analysis
    from ..remote.body_calls import template_for

    def fit_reference(maps, people):
        arrays = analysis.fit_body(client, maps, people=people, cancel_event=cancel_event, timeout=timeout)
        template = template_for(client, arrays, timeout)
        return template, BodyFit.from_arrays(arrays, template=template)

    def pose_track(progress=None, cancel_event=None, **inputs):
        either = _AnyEvent(bound, cancel_event)  # the caller's cancel, or the drive's own stop
        return analysis.body_motion(client, cancel_event=either, timeout=timeout, progress=progress, **inputs)

    bound = cancel_event

    return fit_reference, pose_track


def drive_bodies(animation: Animation, fit_reference: FitReference, pose_track: PoseTrack,
                 progress=None, whole_clip: bool = False, defer: bool = False) -> list[str]:
    """Give every track of ``animation`` its fitted body (``track.body``); a track whose body
    cannot be fitted keeps the relief armature, and a note says why. Returns the notes (also
    appended to ``animation.notes``); ``animation.source`` says what drives the tracks.

    ``whole_clip``: the joints were smoothed with the whole clip, so may the poses be (centred);
    else the poses are smoothed causally (the joints already used the look-ahead allowed).
    ``defer``: return once the bodies are fitted, the poses still being computed in a background
    thread (``TrackBody.motion`` a Future; ``settle_bodies`` waits): Blender can build the
    bodies meanwhile. A failure then surfaces when the motion is settled."""
    notes = []
    todo = [t for t in animation.tracks if t.reference_maps is not None and t.reference_person is not None]
    for t in animation.tracks:
        if t not in todo:
            notes.append(f"track {t.id}: no analysed frame kept for a body fit; the relief armature is animated")
    # One fit per reference frame, for every person whose reference it is.
    groups: dict[int, list[TrackAnimation]] = {}
    for t in todo:
        groups.setdefault(id(t.reference_maps), []).append(t)
    background = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sapiens-body-motion") if defer else None
    stop = threading.Event() if defer else None
    # Half of a track's share is its fit, half its posing: a deferred posing reports while the
    # loop fits the next group, so one count per track would make the bar jump back.
    state = {"fitted": 0, "posed": {}}
    lock = threading.Lock()

    def report(message: str, track=None, fraction: float = 0.0) -> None:
        with lock:
            if track is not None:
                state["posed"][track] = max(state["posed"].get(track, 0.0), min(max(fraction, 0.0), 1.0))
            if progress is not None and message:
                progress(0.5 * state["fitted"] + 0.5 * sum(state["posed"].values()), len(todo), message)

    for tracks in groups.values():
        maps = tracks[0].reference_maps
        people = sorted({int(t.reference_person) for t in tracks})
        report(f"fitting the body of track(s) {', '.join(str(t.id) for t in tracks)}")
        try:
            template, fit = fit_reference(maps, people)
        except NO_BODY_ERRORS as exc:
            for t in tracks:
                notes.append(f"track {t.id}: no body fit ({_first_line(exc)}); the relief armature is animated")
                report("", t.id, 1.0)  # nothing to pose
            with lock:
                state["fitted"] += len(tracks)
            continue
        with lock:
            state["fitted"] += len(tracks)
        for t in tracks:
            report(f"posing the body of track {t.id} on {len(t.frames)} frames")

            # the server's per-frame progress; ``t`` bound now: a deferred posing reports after
            # this loop has moved on to the next track
            def frames_done(_stage, fraction, message, t=t):
                if fraction is not None:
                    report(f"track {t.id}: {message}", t.id, float(fraction))

            args = (t, animation.joint_names, fit, pose_track, frames_done, "centred" if whole_clip else "causal",
                    stop)
            body = TrackBody(template, fit, int(t.reference_person), int(t.reference_frame), None,
                             None if whole_clip else DEFAULT_LAG, stop)
            if background is not None:
                body.motion = background.submit(_motion_of, *args)
                body.motion.add_done_callback(lambda _f, tid=t.id: report("", tid, 1.0))
                t.body = body
            else:
                try:
                    body.motion = _motion_of(*args)
                    t.body = body
                except NO_BODY_ERRORS as exc:
                    notes.append(no_motion_note(t, exc))
                report("", t.id, 1.0)
    if background is not None:
        background.shutdown(wait=False)  # the thread ends with its last track
    elif progress is not None and todo:
        progress(len(todo), len(todo), "bodies posed")
    animation.notes.extend(notes)
    animation.source = summarise_source(animation)
    return notes


def stop_bodies(animation: Animation) -> None:
    """Stop every deferred posing still queued or running, on the server too (Ctrl-C, a failed
    build): the running one ends at the server's next frame (RequestCancelled)."""
    for t in animation.tracks:
        body = t.body
        if body is not None and isinstance(body.motion, Future):
            body.motion.cancel()
            if body.stop is not None:
                body.stop.set()


class _AnyEvent:
    """Set when any of its events is (what the remote calls read of a cancel event)."""

    def __init__(self, *events):
        self._events = [e for e in events if e is not None]

    def is_set(self) -> bool:
        return any(e.is_set() for e in self._events)


def settle_bodies(animation: Animation) -> list[str]:
    """Wait for every deferred motion; a track whose motion failed falls back to the relief
    armature (``track.body`` None) with a note. Returns the new notes (also in ``animation.notes``)."""
    notes = []
    for t in animation.tracks:
        if t.body is None:
            continue
        try:
            t.body.settle()
        except NO_BODY_ERRORS as exc:
            t.body = None
            notes.append(no_motion_note(t, exc))
    animation.notes.extend(notes)
    animation.source = summarise_source(animation)
    return notes


def no_motion_note(track, exc) -> str:
    return f"track {track.id}: the body could not follow the clip ({_first_line(exc)}); the relief armature is animated"


def summarise_source(animation: Animation) -> str:
    bodies = sum(1 for t in animation.tracks if t.body is not None)
    if animation.tracks and bodies == len(animation.tracks):
        return "fitted body"
    if bodies == 0:
        return "relief armature"
    return f"fitted body ({bodies} tracks), relief armature ({len(animation.tracks) - bodies})"


def _motion_of(track: TrackAnimation, joint_names, fit: BodyFit, pose_track: PoseTrack, progress=None,
               smoothing: str = "causal", stop: threading.Event | None = None) -> BodyMotion:
    """The server's poses of ``track``'s body (fitted in ``fit``), checked and brought into the
    model frame of the fitted frame's placement."""
    template_bones = fit.bone_matrices.shape[1]
    i = fit.index(int(track.reference_person))
    ref = int(track.reference_frame)
    weights = np.where(track.estimated, WEIGHT_ESTIMATED, 1.0)
    out = pose_track(phenotypes=fit.phenotypes[i], reference_bone_matrices=fit.bone_matrices[i],
                     reference_placement=fit.placement[i], reference_frame=ref, targets=track.joints,
                     target_names=list(joint_names), weights=weights, smoothing=smoothing,
                     progress=progress, cancel_event=stop)
    t_len = len(track.frames)
    bones = np.asarray(out.get("bone_matrices"), np.float64)
    placement = np.asarray(out.get("placement"), np.float64)
    joints = np.asarray(out.get("joints"), np.float64)
    if bones.shape != (t_len, template_bones, 4, 4) or placement.shape != (t_len, 4, 4) \
            or joints.shape != (t_len, fit.joints.shape[1], 3):
        raise ValueError(f"the server's body motion has shapes {list(bones.shape)}, {list(placement.shape)}, "
                         f"{list(joints.shape)} for a {t_len}-frame track of a {template_bones}-bone body")
    if not (np.isfinite(bones).all() and np.isfinite(placement).all() and np.isfinite(joints).all()):
        raise ValueError("the server's body motion holds NaN or infinite values")
    # Every frame in the model frame of the reference frame's placement: the armature object
    # stays put and the root bone carries the motion.
    to_reference = np.linalg.inv(fit.placement[i].astype(np.float64)) @ placement  # [T,4,4]
    posed = to_reference[:, None] @ bones
    report = {}
    raw = out.get("report")
    if raw is not None:
        try:
            report = json.loads(str(np.asarray(raw).reshape(-1)[0]))
        except (json.JSONDecodeError, IndexError):
            report = {}
    return BodyMotion(posed, joints, np.asarray(out.get("residual_m", np.zeros(t_len)), np.float64).reshape(-1),
                      report)


def _first_line(exc: Exception) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__

