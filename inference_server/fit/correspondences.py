# SPDX-License-Identifier: GPL-3.0-or-later
"""What the analysis and the body have in common: keypoints <-> joints, part classes <-> bones.

Goliath-308 names that mean something on anny: the 23 COCO+feet points of anny's own regressor
(body, face, feet) and the 40 finger joints, read off the finger bones (bone heads are joint
centres, a last phalanx's tail is the finger tip). The Sapiens2 part classes of the body's own
skin are given per bone; the classes that cover the body (clothing, hair, shoes) are the
"covering" ones, where the body may lie behind the observed surface but never in front of it.
"""

from __future__ import annotations

from ..processing.goliath import KEYPOINT_NAMES, PART_NAMES_SAPIENS2

_REGRESSED = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
              "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist",
              "left_hip", "right_hip", "left_knee", "right_knee", "left_ankle", "right_ankle",
              "left_big_toe", "right_big_toe", "left_small_toe", "right_small_toe",
              "left_heel", "right_heel")

# Goliath finger name -> anny finger number (1 = thumb ... 5 = little finger).
_FINGERS = {"thumb": 1, "forefinger": 2, "middle_finger": 3, "ring_finger": 4, "pinky_finger": 5}


def _finger_sources() -> list[tuple[str, tuple[str, str]]]:
    out = []
    for side, s in (("left", "L"), ("right", "R")):
        for gname, n in _FINGERS.items():
            # Goliath: *_third_joint = the finger's base, 2 and 3 the next joints, 4 the tip.
            out.append((f"{side}_{gname}_third_joint", ("head", f"finger{n}-1.{s}")))
            out.append((f"{side}_{gname}2", ("head", f"finger{n}-2.{s}")))
            out.append((f"{side}_{gname}3", ("head", f"finger{n}-3.{s}")))
            out.append((f"{side}_{gname}4", ("tail", f"finger{n}-3.{s}")))
    return out


_SOURCES = [(n, ("regressor", n)) for n in _REGRESSED] + _finger_sources()
JOINT_NAMES: tuple[str, ...] = tuple(n for n, _ in _SOURCES)
JOINT_SOURCES: tuple[tuple[str, str], ...] = tuple(src for _, src in _SOURCES)
JOINT_KEYPOINT_INDEX = tuple(KEYPOINT_NAMES.index(n) for n in JOINT_NAMES)


def is_finger(name: str) -> bool:
    """A hand keypoint of Goliath's: a finger's or the thumb's joint or tip."""
    return "finger" in name or "thumb" in name


# Keypoints that sit on the skin rather than at a joint centre (eyes, ears, nose, toes, heels,
# finger tips): their depth is the observed surface's, not the surface's plus a limb radius.
SKIN_JOINTS = frozenset(n for n in JOINT_NAMES if not n.endswith(
    ("shoulder", "elbow", "wrist", "hip", "knee", "ankle", "_third_joint", "2", "3")))

# Classes that lie over the body: the body is on or behind them, never in front.
COVERING_CLASSES = frozenset({"Apparel", "Upper_Clothing", "Lower_Clothing", "Hair", "Left_Shoe",
                              "Right_Shoe", "Left_Sock", "Right_Sock", "Eyeglass"})


def part_names() -> list[str]:
    return list(PART_NAMES_SAPIENS2)


def part_of_bone(bone: str) -> str:
    """The Sapiens2 skin class a bone's vertices carry (the person's left is anny's .L)."""
    side = "Left" if bone.endswith(".L") else "Right"
    if bone.startswith("upperleg"):
        return f"{side}_Upper_Leg"
    if bone.startswith("lowerleg"):
        return f"{side}_Lower_Leg"
    if bone.startswith(("foot", "toe")):
        return f"{side}_Foot"
    if bone.startswith(("shoulder01", "upperarm")):
        return f"{side}_Upper_Arm"
    if bone.startswith("lowerarm"):
        return f"{side}_Lower_Arm"
    if bone.startswith(("wrist", "finger", "metacarpal")):
        return f"{side}_Hand"
    if bone.startswith(("neck", "head", "eye")):
        return "Face_Neck"
    return "Torso"  # root, pelvis, spine, clavicle


# Which body classes an observed class may cover (a clothing pixel belongs to one of these).
def covered_classes(observed: str) -> tuple[str, ...]:
    arms = ("Left_Upper_Arm", "Right_Upper_Arm", "Left_Lower_Arm", "Right_Lower_Arm")
    legs = ("Left_Upper_Leg", "Right_Upper_Leg", "Left_Lower_Leg", "Right_Lower_Leg")
    if observed == "Upper_Clothing":
        return ("Torso",) + arms
    if observed == "Lower_Clothing":
        return ("Torso",) + legs
    if observed == "Apparel":
        return ("Torso",) + arms + legs
    if observed in ("Hair", "Eyeglass"):
        return ("Face_Neck",)
    if observed.endswith(("Shoe", "Sock")):
        side = observed.split("_")[0]
        return (f"{side}_Foot", f"{side}_Lower_Leg")
    if observed in ("Lower_Lip", "Upper_Lip", "Lower_Teeth", "Upper_Teeth", "Tongue"):
        return ("Face_Neck",)
    return (observed,)
