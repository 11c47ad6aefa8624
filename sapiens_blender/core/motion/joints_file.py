# SPDX-License-Identifier: GPL-3.0-or-later
"""The joints file of an animation (docs/maps_format.md):

    {"fps": F, "intrinsics": [fx, fy, cx, cy], "source": "relief armature",
     "frames": [{"frame": i, "people": [{"id": k, "joints": {name: {"xyz": [x, y, z],
                                                                  "estimated": bool}}}]}]}

Camera frame, metres; ``frame`` counts from 0 in the input's order; ``id`` is the track.
Written atomically.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..files.atomic import atomic_write_bytes
from .clip import Animation
from ..errors import SapiensError


class AnimationJointsError(SapiensError, ValueError):
    """The animation joints file is malformed; the message says where."""


def to_document(animation: Animation) -> dict:
    k = np.asarray(animation.intrinsics, np.float64)
    by_frame: dict[int, list] = {f: [] for f in animation.frames}
    for track in animation.tracks:
        names, xyz, estimated = track_joints(track, animation.joint_names)
        for t, frame in enumerate(track.frames):
            joints = {n: {"xyz": [round(float(c), 5) for c in xyz[t, j]], "estimated": bool(estimated[t, j])}
                      for j, n in enumerate(names)}
            by_frame[int(frame)].append({"id": int(track.id), "joints": joints})
    return {"fps": float(animation.fps),
            "intrinsics": [float(k[0, 0]), float(k[1, 1]), float(k[0, 2]), float(k[1, 2])],
            "source": animation.source,
            "frames": [{"frame": int(f), "people": people} for f, people in sorted(by_frame.items())]}


def track_joints(track, motion_names) -> tuple[list[str], np.ndarray, np.ndarray]:
    """(names, xyz [T,J,3], estimated [T,J]) of what the track's rig shows: the fitted body's
    joints (the names the joints file knows) when a body drives the track, else the smoothed
    joints. A body joint is estimated where the person was not seen, where the fitted frame did
    not see it, or where the tracker filled the joint of the same name."""
    if track.body is None:
        return list(motion_names), track.joints, track.estimated
    from ..geometry.joints_io import KNOWN_NAMES

    body = track.body
    all_names = list(body.template.joint_names)
    keep = [j for j, n in enumerate(all_names) if n in KNOWN_NAMES]
    names = [all_names[j] for j in keep]
    est = np.repeat(~track.seen[:, None], len(keep), axis=1)
    est |= np.asarray(body.fit.joints_estimated[body.index], bool)[keep][None]
    motion = {n: i for i, n in enumerate(motion_names)}
    for k, n in enumerate(names):
        if n in motion:
            est[:, k] |= track.estimated[:, motion[n]]
    return names, body.joints[:, keep], est


def write(path, animation: Animation) -> Path:
    return atomic_write_bytes(path, json.dumps(to_document(animation)).encode("utf-8"))


def read(path) -> dict:
    """The document, checked: {"fps", "intrinsics", "frames": [{"frame", "people": [...]}]}; each
    person's joints as {name: (xyz ndarray, estimated)}."""
    path = Path(path)
    try:
        doc = json.loads(Path(path).read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise AnimationJointsError(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(doc, dict) or not isinstance(doc.get("frames"), list):
        raise AnimationJointsError(f'{path}: expected {{"fps": F, "intrinsics": [...], "frames": [...]}}')
    fps = doc.get("fps")
    if isinstance(fps, bool) or not isinstance(fps, (int, float)) or not fps > 0:
        raise AnimationJointsError(f"{path}: fps must be a positive number, got {fps!r}")
    k = doc.get("intrinsics")
    if not isinstance(k, list) or len(k) != 4 or not all(isinstance(v, (int, float)) for v in k):
        raise AnimationJointsError(f"{path}: intrinsics must be [fx, fy, cx, cy], got {k!r}")
    for i, fr in enumerate(doc["frames"]):
        if not isinstance(fr, dict) or not isinstance(fr.get("frame"), int) or not isinstance(fr.get("people"), list):
            raise AnimationJointsError(f'{path}: frames[{i}] must be {{"frame": int, "people": [...]}}')
        for j, person in enumerate(fr["people"]):
            where = f"{path}: frames[{i}].people[{j}]"
            if not isinstance(person, dict) or not isinstance(person.get("joints"), dict):
                raise AnimationJointsError(f"{where}: expected {{\"id\": int, \"joints\": {{...}}}}")
            joints = {}
            for name, entry in person["joints"].items():
                try:
                    xyz = np.asarray(entry["xyz"], np.float64).reshape(3)
                except (KeyError, TypeError, ValueError):
                    raise AnimationJointsError(f"{where}.{name}: xyz must be 3 numbers") from None
                joints[name] = (xyz, bool(entry.get("estimated", False)))
            person["joints"] = joints
    return doc
