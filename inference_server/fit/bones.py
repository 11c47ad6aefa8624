# SPDX-License-Identifier: GPL-3.0-or-later
"""Which of anny's bones the fit turns, and what in a photo tells about each (solver, motion)."""

# Bones the fit turns (others keep their rest rotation relative to their parent: twist
# segments, metacarpals, toes, eyes follow their parents).
BODY_BONES = ("spine05", "spine04", "spine03", "spine02", "spine01", "neck01", "neck02", "neck03",
               "head", "clavicle.L", "clavicle.R", "shoulder01.L", "shoulder01.R", "upperarm01.L",
               "upperarm01.R", "lowerarm01.L", "lowerarm01.R", "wrist.L", "wrist.R", "upperleg01.L",
               "upperleg01.R", "lowerleg01.L", "lowerleg01.R", "foot.L", "foot.R")
FINGER_BONES = tuple(f"finger{n}-{k}.{s}" for s in "LR" for n in range(1, 6) for k in range(1, 4))
HINGES = ("lowerleg01.L", "lowerleg01.R", "lowerarm01.L", "lowerarm01.R")

# (age, height) phenotypes of the bodies the start picks the person's size from.
START_SIZES = tuple((a, 0.5) for a in (0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45)) + \
    tuple((0.5, h) for h in (0.5, 0.6, 0.7, 0.8, 0.9, 1.0))

# The limb bones the closed-form start turns, each towards the keypoint that ends it:
# (bone, the joint that ends it, the joint after that).
LIMB_CHAINS = (("upperarm01", "elbow", "wrist"), ("lowerarm01", "wrist", None), ("upperleg01", "knee", "ankle"),
                ("lowerleg01", "ankle", None))

# The segmentation part that shows where a bone's far end went (a limb without its keypoint
# is still placed by its part).
BONE_PART = {"upperarm01": "Upper_Arm", "lowerarm01": "Lower_Arm", "upperleg01": "Upper_Leg",
              "lowerleg01": "Lower_Leg", "wrist": "Hand", "foot": "Foot"}

# Which keypoints tell about which bone (a bone seen by none is held at rest).
BONE_EVIDENCE = {
    "upperarm01": ("elbow",), "lowerarm01": ("wrist",), "wrist": ("forefinger_third_joint", "pinky_finger_third_joint"),
    "upperleg01": ("knee",), "lowerleg01": ("ankle",), "foot": ("big_toe", "heel"),
    "clavicle": ("shoulder",), "shoulder01": ("elbow",),
}
