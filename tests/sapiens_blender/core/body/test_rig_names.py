# SPDX-License-Identifier: GPL-3.0-or-later
"""Bone names for retargeting tools: anny's rig onto the Mixamo and Unreal hierarchies.

On bodies made by the fit's own body model (tests/support/body_scenes.py).
"""

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

from sapiens_blender.core.body.rig_names import RIG_NAMES, rename_table, retarget_rig

pytestmark = [pytest.mark.anny]


MAIN = ["root", "spine05", "spine03", "spine01", "neck01", "head", "clavicle", "upperarm01", "lowerarm01", "wrist",
        "upperleg01", "lowerleg01", "foot", "toe3-1"] + [f"finger{n}-{k}" for n in range(1, 6) for k in (1, 2, 3)]
# Hierarchies of the targets, written from their published skeletons (child: parent, left side).
MIXAMO_PARENTS = {"Spine": "Hips", "Spine1": "Spine", "Spine2": "Spine1", "Neck": "Spine2", "Head": "Neck",
                  "LeftShoulder": "Spine2", "LeftArm": "LeftShoulder", "LeftForeArm": "LeftArm",
                  "LeftHand": "LeftForeArm", "LeftUpLeg": "Hips", "LeftLeg": "LeftUpLeg", "LeftFoot": "LeftLeg",
                  "LeftToeBase": "LeftFoot", "LeftEye": "Head",
                  **{f"LeftHand{f}{k}": (f"LeftHand{f}{k - 1}" if k > 1 else "LeftHand")
                     for f in ("Thumb", "Index", "Middle", "Ring", "Pinky") for k in (1, 2, 3)}}
UNREAL_PARENTS = {"spine_01": "pelvis", "spine_02": "spine_01", "spine_03": "spine_02", "spine_04": "spine_03",
                  "spine_05": "spine_04", "neck_01": "spine_05", "neck_02": "neck_01", "head": "neck_02",
                  "clavicle_l": "spine_05", "upperarm_l": "clavicle_l", "upperarm_twist_01_l": "upperarm_l",
                  "lowerarm_l": "upperarm_l", "lowerarm_twist_01_l": "lowerarm_l", "hand_l": "lowerarm_l",
                  "thigh_l": "pelvis", "thigh_twist_01_l": "thigh_l", "calf_l": "thigh_l",
                  "calf_twist_01_l": "calf_l", "foot_l": "calf_l", "ball_l": "foot_l",
                  "thumb_01_l": "hand_l", "thumb_02_l": "thumb_01_l", "thumb_03_l": "thumb_02_l",
                  **{f"{f}_metacarpal_l": "hand_l" for f in ("index", "middle", "ring", "pinky")},
                  **{f"{f}_0{k}_l": (f"{f}_0{k - 1}_l" if k > 1 else f"{f}_metacarpal_l")
                     for f in ("index", "middle", "ring", "pinky") for k in (1, 2, 3)}}


@pytest.mark.parametrize("rig,expected", [("mixamo", MIXAMO_PARENTS), ("unreal", UNREAL_PARENTS)])
def test_rig_names_map_every_main_bone_onto_the_target_hierarchy(body_scene, rig, expected):
    t = body_scene("standing").template
    names, parents = retarget_rig(t.bone_names, t.bone_parents, rig)
    table = rename_table(rig)
    for bone in MAIN:
        for side in (".L", ".R") if bone[0] in "cuwlft" and bone not in ("head",) else ("",):
            assert bone + side in table, f"{bone + side} is not mapped for {rig}"
    prefix = "mixamorig:" if rig == "mixamo" else ""
    parent_of = {n: (names[p] if p >= 0 else None) for n, p in zip(names, parents)}
    for child, parent in expected.items():
        assert parent_of[prefix + child] == prefix + parent, child
        mirrored = child.replace("Left", "Right").replace("_l", "_r")
        assert mirrored in [n.removeprefix(prefix) for n in names]
    assert all(parents[i] < i for i in range(len(parents)))  # still parents before children
    same_names, same_parents = retarget_rig(t.bone_names, t.bone_parents, "anny")
    assert same_names == list(t.bone_names) and np.array_equal(same_parents, t.bone_parents)
    with pytest.raises(ValueError, match="unknown rig names"):
        rename_table("maya")
    assert set(RIG_NAMES) == {"anny", "rigify", "mixamo", "unreal"}
