# SPDX-License-Identifier: GPL-3.0-or-later
"""Which vertices of a fitted body were seen and which were guessed, from the fit report's
``guessed`` (inference_server/fit/guessed.py: per limb, its joints by source).

Each body part (the template's ``vertex_parts``) takes the least certain source of the joints
that place it: a forearm is as sure as its elbow and wrist. Blender turns the result into vertex
groups the artist can select (blender/body.py); the CLI prints ``summary``.
"""

from __future__ import annotations

import numpy as np

# Least to most guessed: a part takes the last of its joints' sources.
SOURCES = ("seen", "3d", "occluded", "out_of_frame")
GROUP_NAMES = {"seen": "sapiens seen", "3d": "sapiens guessed: 3D pose",
               "occluded": "sapiens guessed: occluded", "out_of_frame": "sapiens guessed: out of frame"}
_WORDS = {"3d": "from the 3D pose", "occluded": "occluded (set by the prior)",
          "out_of_frame": "out of the frame (set by the prior)", "partly seen": "partly seen"}
_JOINT_WORDS = {"3d": "from the 3D pose", "occluded": "occluded", "out_of_frame": "out of the frame"}

# Body part -> the fitted joints that place it (both sides).
_PART_JOINTS = {"Face_Neck": ("nose", "left_eye", "right_eye", "left_ear", "right_ear"),
                "Torso": ("left_shoulder", "right_shoulder", "left_hip", "right_hip")}
for _s, _S in (("left", "Left"), ("right", "Right")):
    _PART_JOINTS.update({
        f"{_S}_Upper_Arm": (f"{_s}_shoulder", f"{_s}_elbow"),
        f"{_S}_Lower_Arm": (f"{_s}_elbow", f"{_s}_wrist"),
        f"{_S}_Hand": (f"{_s}_wrist",),  # and the fingers: the report's hand (see joint_sources)
        f"{_S}_Upper_Leg": (f"{_s}_hip", f"{_s}_knee"),
        f"{_S}_Lower_Leg": (f"{_s}_knee", f"{_s}_ankle"),
        f"{_S}_Foot": (f"{_s}_ankle", f"{_s}_big_toe", f"{_s}_heel"),
    })


def joint_sources(guessed: dict) -> dict[str, str]:
    """Joint name -> source, from the report's ``guessed`` ({} for a report without it)."""
    out = {}
    for limb in (guessed or {}).values():
        for source in SOURCES:
            for name in limb.get(source, ()):
                out[name] = source
    return out


def vertex_sources(guessed: dict, vertex_parts: np.ndarray, part_names) -> dict[str, np.ndarray]:
    """Source -> indices of the vertices it holds (each vertex in one), for a body whose vertex
    ``i`` lies on part ``part_names[vertex_parts[i]]``. {} when the report has no ``guessed``."""
    joints = joint_sources(guessed)
    if not joints:
        return {}
    rank = {s: k for k, s in enumerate(SOURCES)}
    hands = {side: [n for n, s in joints.items() if n.startswith(side) and ("finger" in n or "thumb" in n)]
             for side in ("left", "right")}
    part_rank = np.zeros(len(part_names), np.int64)
    for p, name in enumerate(part_names):
        names = list(_PART_JOINTS.get(name, ()))
        if name.endswith("_Hand"):
            names += hands[name.split("_")[0].lower()]
        known = [rank[joints[n]] for n in names if n in joints]
        part_rank[p] = max(known) if known else 0
    per_vertex = part_rank[np.asarray(vertex_parts, np.int64)]
    return {s: np.nonzero(per_vertex == k)[0] for k, s in enumerate(SOURCES) if (per_vertex == k).any()}


def summary(guessed: dict) -> str:
    """One line naming the limbs not fully seen, '' when all were (or the report says nothing)."""
    parts = []
    for limb, v in (guessed or {}).items():
        word = v.get("source")
        if word not in _WORDS:
            continue
        if word == "partly seen":  # name the joints that were not
            unseen = [f"{n.replace('_', ' ')} {_JOINT_WORDS[s]}" for s in SOURCES[1:] for n in v.get(s, ())]
            word_text = f"partly seen ({', '.join(unseen)})"
        else:
            word_text = _WORDS[word]
        parts.append(f"{limb.replace('_', ' ')} {word_text}")
    return "; ".join(parts)
