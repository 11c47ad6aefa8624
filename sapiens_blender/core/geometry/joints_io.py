# SPDX-License-Identifier: GPL-3.0-or-later
"""The joints file (docs/maps_format.md): 3D joints per person, camera frame, metres.

Keys are Goliath-308 keypoint names; the derived joints of the skeleton (``pelvis``, ``spine``,
``head_top``, ...) may be present too. Reading fills in the derived joints a file leaves out.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..files.atomic import atomic_write_bytes
from ..maps.goliath import KEYPOINT_INDEX
from ..files.safe_read import read_json
from .joints_fill import DERIVED_JOINTS, JointSet, fill_and_derive
from .types import Joint
from ..errors import SapiensError

KNOWN_NAMES = frozenset(KEYPOINT_INDEX) | frozenset(DERIVED_JOINTS)


class JointsFileError(SapiensError, ValueError):
    """The joints file is malformed; the message says where."""


def write(path, people: dict) -> Path:
    """Write {person_id: {name: Joint}} atomically (temp file + rename)."""
    path = Path(path)
    doc = {"people": [
        {"id": int(pid), "joints": {n: {"xyz": [float(c) for c in np.asarray(j.xyz).reshape(3)],
                                         "estimated": bool(j.estimated)} for n, j in joints.items()}}
        for pid, joints in sorted(people.items())
    ]}
    return atomic_write_bytes(path, json.dumps(doc, indent=1).encode("utf-8"))


def read(path, complete: bool = True) -> dict[int, dict[str, Joint]]:
    """{person_id: {name: Joint}}; with ``complete`` the derived joints are added when absent."""
    doc = read_json(path, JointsFileError, "joints JSON file")
    return parse(doc, complete=complete, source=str(path))


def parse(doc, complete: bool = True, source: str = "joints") -> dict[int, dict[str, Joint]]:
    if not isinstance(doc, dict) or not isinstance(doc.get("people"), list):
        raise JointsFileError(f'{source}: expected {{"people": [...]}}')
    out: dict[int, dict[str, Joint]] = {}
    for i, person in enumerate(doc["people"]):
        where = f"{source}: people[{i}]"
        if not isinstance(person, dict) or not isinstance(person.get("joints"), dict):
            raise JointsFileError(f'{where}: expected {{"id": int, "joints": {{...}}}}')
        pid = person.get("id")
        if isinstance(pid, bool) or not isinstance(pid, int) or pid < 1:
            raise JointsFileError(f"{where}: id must be a positive integer (the mask's person id), got {pid!r}")
        if pid in out:
            raise JointsFileError(f"{where}: person id {pid} appears twice")
        joints = {}
        for name, entry in person["joints"].items():
            if name not in KNOWN_NAMES:
                raise JointsFileError(f"{where}: unknown joint name {name!r} (Goliath-308 names expected)")
            xyz = entry.get("xyz") if isinstance(entry, dict) else None
            try:
                if not isinstance(xyz, list) or len(xyz) != 3:
                    raise ValueError
                arr = np.asarray(xyz, np.float64).reshape(3)
            except (TypeError, ValueError, OverflowError):
                raise JointsFileError(f"{where}.{name}: xyz must be 3 numbers, got {xyz!r}") from None
            if not np.isfinite(arr).all():
                raise JointsFileError(f"{where}.{name}: xyz must be finite, got {xyz!r}")
            est = entry.get("estimated", False)
            if not isinstance(est, bool):
                raise JointsFileError(f"{where}.{name}: estimated must be true or false, got {est!r}")
            joints[name] = Joint(name, arr, estimated=est)
        if complete:
            joints = fill_and_derive(joints, {}, np.eye(3), neck_at_shoulders=False)
        else:
            js = JointSet(joints)
            js.report = {}
            joints = js
        out[pid] = joints
    return out
