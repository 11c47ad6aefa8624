# SPDX-License-Identifier: GPL-3.0-or-later
"""A clip's frames -> per-track animation: tracking, smoothing, foot planting, rig rotations.

``ClipAnimator`` is fed one frame's maps at a time (in the input's order, so analysis can stream)
and ``finish()`` returns an :class:`Animation`: per track the smoothed joints (camera frame), a
rest skeleton shared by all its frames and per-frame pose-bone quaternions and root motion,
ready to bake. Nothing here needs Blender.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..maps.canonical import Maps
from .body_prior import BodyPriorOptions, apply_body_prior
from .feet import PlantingOptions, plant_feet
from .poses import PoseSource, ReliefJoints
from .rig import PosedFrames, RestPose, pose_frames, rest_pose
from .smoothing import SmoothingOptions, smooth
from .stillness import StillnessOptions, tie_still_joints
from .tracking import Tracker

REFERENCE_WARMUP = 5  # a track's first frames are the rest pose / body fit frame only if no later one is as complete
STANDARD_TORSO_M = 0.5  # pelvis to neck of an adult: the unit the smoothing options assume


@dataclass(frozen=True)
class AnimateOptions:
    smoothing: SmoothingOptions = SmoothingOptions()
    # Bone lengths and a rigid torso, per frame before smoothing (None: joints as lifted).
    body_prior: BodyPriorOptions | None = BodyPriorOptions()
    stillness: StillnessOptions | None = StillnessOptions()  # None: every joint its own track
    planting: PlantingOptions | None = PlantingOptions()  # None: feet are not planted
    # Shorter tracks are dropped (spurious detections); in a clip of under twice as many frames,
    # a track seen in at least half of them is kept (PoseTrack's 5-frame clip: a player seen in 4
    # was dropped, leaving 1 of its 3 players).
    min_track_frames: int = 5
    max_missing: int = 15  # frames a person may vanish for (occlusion) and keep their track
    smooth: bool = True  # False: every frame as lifted (the baseline the proof compares with)


@dataclass
class TrackAnimation:
    id: int
    frames: np.ndarray  # [T] frame numbers (input order, from 0), every analysed frame of the span
    joints: np.ndarray  # [T,J,3] camera frame, metres: smoothed (and feet planted) joints
    # ``posed.joints`` are what the armature shows: the same poses with one length per bone.
    estimated: np.ndarray  # [T,J] bool: not measured in that frame (filled, derived or unseen)
    seen: np.ndarray  # [T] bool: the person was detected in that frame
    rest: RestPose
    posed: PosedFrames
    contacts: dict = field(default_factory=dict)  # side -> [T] bool foot contact
    # The maps of the rest frame (the frame with the fewest estimated joints) and the person's
    # mask id in them: what the relief mesh is built from. None when the source kept no maps.
    reference_maps: Maps | None = None
    reference_person: int | None = None
    reference_frame: int | None = None  # position in the track of the reference maps' frame
    # The fitted body driven through the track (core.motion.body_drive.TrackBody), when there is one.
    body: object | None = None
    # [T,308,3] the person's 2D keypoints per frame (score 0 where unseen): the face's evidence
    # for its expressions (core/motion/face.py). None when the frames' maps gave none.
    keypoints: np.ndarray | None = None

    @property
    def source(self) -> str:
        return "fitted body" if self.body is not None else "relief armature"


@dataclass
class Animation:
    fps: float
    intrinsics: np.ndarray  # [3,3] of the clip
    width: int
    height: int
    frames: list[int]  # frame numbers analysed (input order)
    tracks: list[TrackAnimation]
    source: str  # what the tracks drive: "relief armature", "fitted body" or a mix (body_drive)
    joint_names: tuple[str, ...]
    notes: list[str] = field(default_factory=list)


class ClipAnimator:
    def __init__(self, fps: float, pose_source: PoseSource | None = None,
                 options: AnimateOptions = AnimateOptions()):
        self.fps = float(fps)
        self.poses = pose_source or ReliefJoints()
        self.options = options
        self.tracker = Tracker(max_missing=options.max_missing)
        self.frames: list[int] = []
        self._intrinsics: list[np.ndarray] = []
        self._size: tuple[int, int] | None = None
        self._reference: dict[int, tuple] = {}  # track id -> (rank key, position, maps, person)
        self._first_seen: dict[int, int] = {}
        self._keypoints: dict[int, dict[int, np.ndarray]] = {}  # track id -> position -> [308,3]

    def add(self, frame_index: int, maps: Maps, detections: list | None = None) -> list[int]:
        """Take one frame's maps (frames in input order); returns the track id per person found.

        ``detections``: the pose source's output for these maps when already computed (the
        streaming runner detects in its worker threads, overlapping with other frames' analysis).
        """
        if self._size is None:
            self._size = (maps.width, maps.height)
        elif self._size != (maps.width, maps.height):
            raise ValueError(f"frame {frame_index} is {maps.width}x{maps.height}, the clip "
                             f"{self._size[0]}x{self._size[1]}: every frame must have one size")
        self.frames.append(int(frame_index))
        self._intrinsics.append(np.asarray(maps.intrinsics, np.float64))
        if detections is None:
            detections = self.poses.detect(maps)
        position = len(self.frames) - 1
        ids = self.tracker.update(position, detections)
        for tid, det in zip(ids, detections):  # keep the best-measured frame's maps per track
            n_est = int(np.count_nonzero(det.estimated)) if det.estimated is not None else 0
            person = (det.payload or {}).get("person_id") if isinstance(det.payload, dict) else None
            if person is not None:
                self._keypoints.setdefault(tid, {})[position] = np.asarray(maps.person_keypoints(int(person)),
                                                                           np.float32)
            first = self._first_seen.setdefault(tid, position)
            # Fewest estimated joints first; then a frame past the track's first few, which the
            # smoother has seen with a past (the first frame has none: the noisiest).
            key = (n_est, position - first < REFERENCE_WARMUP)
            if person is not None and (tid not in self._reference or key < self._reference[tid][0]):
                self._reference[tid] = (key, position, maps, person)
        return ids

    def finish(self) -> Animation:
        if not self.frames:
            raise ValueError("no frames were analysed")
        notes = []
        tracks = []
        needed = min(self.options.min_track_frames, (len(self.frames) + 1) // 2)
        for track in self.tracker.tracks():
            if len(track.frames) < needed:
                notes.append(f"track {track.id}: seen in only {len(track.frames)} frame(s); dropped")
                continue
            try:
                tracks.append(self._animate_track(track))
            except ValueError as exc:
                notes.append(f"track {track.id}: {exc}; dropped")
        for pid, why in getattr(self.poses, "skipped", [])[:20]:
            notes.append(f"a person (mask id {pid}) was skipped in a frame: {why}")
        k = np.median(np.stack(self._intrinsics), axis=0)
        return Animation(self.fps, k, self._size[0], self._size[1], list(self.frames), tracks,
                         self.poses.kind, tuple(self.poses.joint_names), notes)

    def _animate_track(self, track) -> TrackAnimation:
        first, last = track.frames[0], track.frames[-1]
        t_len = last - first + 1
        n_j = len(self.poses.joint_names)
        raw = np.full((t_len, n_j, 3), np.nan)
        est = np.ones((t_len, n_j), bool)
        conf = np.ones((t_len, n_j))
        seen = np.zeros(t_len, bool)
        for f, det in zip(track.frames, track.detections):
            raw[f - first] = det.joints
            est[f - first] = det.estimated if det.estimated is not None else False
            if det.confidence is not None:
                conf[f - first] = det.confidence
            seen[f - first] = True
        if self.options.smooth:
            if self.options.body_prior is not None:
                raw = apply_body_prior(raw, est, self.poses.joint_names, self.options.smoothing.lag,
                                       self.options.body_prior, conf)
            joints = _smooth_along_rays(raw, est, conf, self.options.smoothing, tuple(self.poses.joint_names),
                                        self.options.stillness)
        else:
            joints = _hold_gaps(raw)
        if not np.isfinite(joints).all():
            missing = sorted({self.poses.joint_names[j] for j in np.flatnonzero(~np.isfinite(joints).all(axis=(0, 2)))})
            raise ValueError(f"joints never seen: {', '.join(missing)}")
        contacts = {}
        if self.options.planting is not None:
            joints, contacts = plant_feet(joints, self.poses.joint_names, self.fps, self.options.planting)
        # The rest pose comes from the smoothed joints: one noisy frame would tilt the rigid
        # offsets (hips in the pelvis, shoulders in the chest) for the whole clip.
        ref = self._reference.get(track.id)
        reference = ref[1] - first if ref else None
        rest = rest_pose(np.where(seen[:, None, None], joints, np.nan), est, reference)
        posed = pose_frames(joints, rest.lengths, rest)
        frames = np.asarray(self.frames[first:last + 1])
        return TrackAnimation(track.id, frames, joints, est | ~seen[:, None], seen, rest, posed,
                              contacts, ref[2] if ref else None, ref[3] if ref else None,
                              reference, keypoints=self._track_keypoints(track.id, first, t_len))

    def _track_keypoints(self, tid: int, first: int, t_len: int) -> np.ndarray | None:
        rows = self._keypoints.get(tid)
        if not rows:
            return None
        out = np.zeros((t_len, *next(iter(rows.values())).shape), np.float32)
        for position, kp in rows.items():
            if 0 <= position - first < t_len:
                out[position - first] = kp
        return out


def _smooth_along_rays(raw: np.ndarray, est: np.ndarray, conf: np.ndarray, options: SmoothingOptions,
                       names: tuple[str, ...], stillness: StillnessOptions | None = None) -> np.ndarray:
    """Smooth where each joint is seen (x/z, y/z) and how far (z) separately, in the units of a
    body with a 0.5 m torso.

    Depth is noisier than the image position: smoothing camera x/y directly would let the depth
    noise leak into where the joint projects. And a backend's depth scale may be off (a guessed
    focal length puts a person at 0.5 m or at 5 m): measured in torsos, the smoothing options
    mean the same motion whatever the scale.
    """
    z_ref = float(np.nanmedian(raw[..., 2]))
    if not np.isfinite(z_ref) or z_ref <= 0:
        return smooth(raw, est, options, conf)
    z = np.where(raw[..., 2] > 1e-6, raw[..., 2], np.nan)
    rays = np.stack([raw[..., 0] / z * z_ref, raw[..., 1] / z * z_ref, z], axis=-1)
    scale = 1.0
    if "pelvis" in names and "neck" in names:
        torso = np.nanmedian(np.linalg.norm(rays[:, names.index("neck")] - rays[:, names.index("pelvis")], axis=-1))
        if np.isfinite(torso) and torso > 1e-6:
            scale = STANDARD_TORSO_M / float(torso)
    out = smooth(rays * scale, est, options, conf)
    if stillness is not None:
        out = tie_still_joints(rays * scale, out, options, stillness, est, conf)
    out = out / scale
    depth = out[..., 2]
    return np.stack([out[..., 0] / z_ref * depth, out[..., 1] / z_ref * depth, depth], axis=-1)


def _hold_gaps(raw: np.ndarray) -> np.ndarray:
    """Unsmoothed joints with a gap holding the last (else next) value."""
    out = raw.copy()
    for t in range(1, len(out)):
        out[t] = np.where(np.isfinite(out[t]), out[t], out[t - 1])
    for t in range(len(out) - 2, -1, -1):
        out[t] = np.where(np.isfinite(out[t]), out[t], out[t + 1])
    return out
