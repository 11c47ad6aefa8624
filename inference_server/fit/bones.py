# SPDX-License-Identifier: GPL-3.0-or-later
"""Which of anny's bones the fit turns, and what in a photo tells about each (solver, terms,
motion, the report's guessed joints)."""

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

# Bones whose 3D direction the backend's own 3D pose gives (keypoints_3d): limbs and the torso
# (terms.py's world term; guessed.py calls their joints placed by that pose, no others).
# Not the feet: MediaPipe's 3D feet point down (bench_real's 28 feet of straight legs: heel to
# toes 17.6 deg below the body's level, median; anny's foot at rest 5.2), and the fitted feet
# followed them onto tiptoe; left to their 2D heel and toes, the real photos' feet of straight
# legs off level by over 15 deg 13 of 29 -> 5 of 33, the bodies' 2D error 5.62 -> 5.38 %, the 3D
# frames 92.3 -> 91.2 mm (refit_real.py; docs/body_fit.md "Feet left to their keypoints").
WORLD_BONES = tuple((f"{s}_{a}", f"{s}_{b}") for s in ("left", "right") for a, b in
                    (("shoulder", "elbow"), ("elbow", "wrist"), ("hip", "knee"), ("knee", "ankle"),
                     ("shoulder", "hip"))) + \
    (("left_shoulder", "right_shoulder"), ("left_hip", "right_hip"))
