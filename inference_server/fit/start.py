# SPDX-License-Identifier: GPL-3.0-or-later
"""Where the fit starts: the rest body placed in the camera in closed form (numpy only).

No optimisation step is spent finding the person: the rest body's torso joints are aligned
(Kabsch) with the keypoints lifted by the pointmap, or, without metric depth, back-projected at
the distance their spread implies. Here too: the body size the lifted bone lengths imply, and
where each limb's far joint goes (on its keypoint's ray, at its bone's length), for the solver's
closed-form limb turns.
"""

from __future__ import annotations

import numpy as np

from .alignment import kabsch
from .correspondences import JOINT_NAMES
from .observations import BODY_CLASSES, PersonObservation

# anny's model frame (Z up, facing -Y) seen by a camera it faces: x = X, y = -Z, z = Y.
FACING_CAMERA = np.array([[1.0, 0, 0], [0, 0, -1.0], [0, 1.0, 0]])
_TORSO = tuple(JOINT_NAMES.index(n) for n in ("left_shoulder", "right_shoulder", "left_hip", "right_hip"))
_LEFT, _RIGHT = JOINT_NAMES.index("left_shoulder"), JOINT_NAMES.index("right_shoulder")
_HEAD_AND_SHOULDERS = tuple(JOINT_NAMES.index(n) for n in (
    "nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder", "right_shoulder"))


def distance_from_size(obs: PersonObservation, rest: np.ndarray, use) -> float:
    """Camera distance at which the rest body's joint spread matches the keypoints'."""
    pts = obs.keypoints[use]
    px = np.sqrt(((pts - pts.mean(0)) ** 2).sum(1).mean())
    m = rest[use][:, [0, 2]]  # width and height in the model frame (facing the camera)
    metres = np.sqrt(((m - m.mean(0)) ** 2).sum(1).mean())
    return float(np.clip(obs.intrinsics[0, 0] * metres / max(px, 1e-3), 0.3, 50.0))


def _facing_from_sides(obs: PersonObservation, r: np.ndarray) -> np.ndarray:
    """A body seen from behind and from the front project alike when all points share one
    depth: keep the rotation's up vector and choose the yaw that puts the person's left where
    the left keypoints are (the shoulders' x order in the image)."""
    if obs.weights[_LEFT] > 0 and obs.weights[_RIGHT] > 0:
        left_is_right_in_image = obs.keypoints[_LEFT, 0] > obs.keypoints[_RIGHT, 0]
        if (r[0, 0] > 0) != left_is_right_in_image:  # column 0: the person's left in the camera
            r = r @ np.diag([-1.0, 1.0, -1.0])  # half a turn about the body's up (Z)
    return r


def upright_on_shoulders(obs: PersonObservation, rest: np.ndarray, z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R, t) putting the rest body's shoulders on their keypoints at depths ``z``, the body's up
    as near the camera's up as that allows (people are photographed upright). With the
    shoulders alone, a rigid fit to every seen keypoint (raised arms, the face) tilted a bust
    portrait's body 20-40 degrees towards the camera, a start the fit did not come back from
    (hips 17-35 cm off)."""
    sel = [_LEFT, _RIGHT]
    dst = _rays(obs, sel) * z[:, None]

    def frame(across: np.ndarray, up: np.ndarray, otherwise: np.ndarray) -> np.ndarray:
        e1 = across / max(np.linalg.norm(across), 1e-12)
        e2 = up - e1 * (up @ e1)
        if np.linalg.norm(e2) < 1e-3:  # shoulders one above the other (lying down): face it
            e2 = otherwise - e1 * (otherwise @ e1)
        e2 = e2 / max(np.linalg.norm(e2), 1e-12)
        return np.stack([e1, e2, np.cross(e1, e2)], 1)

    # the model's up is +Z and it faces -Y; the camera's up is -Y and it looks along +Z
    body = frame(rest[_RIGHT] - rest[_LEFT], np.array([0.0, 0.0, 1.0]), np.array([0.0, -1.0, 0.0]))
    camera = frame(dst[1] - dst[0], np.array([0.0, -1.0, 0.0]), np.array([0.0, 0.0, -1.0]))
    r = camera @ body.T
    return r, dst.mean(0) - r @ rest[sel].mean(0)


def closed_form(obs: PersonObservation, rest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(R, t) taking the rest body's model frame to the camera, from the seen keypoints."""
    use = [j for j in range(len(JOINT_NAMES)) if obs.weights[j] > 0]
    lifted_torso = [j for j in _TORSO if obs.weights[j] > 0 and np.isfinite(obs.lifted[j])]
    if obs.metric and len(lifted_torso) >= 3:
        # The torso alone: the limbs are posed (they are turned next, bone by bone), and a rigid
        # fit of the standing body to a raised arm or a step tilts and shifts the whole body.
        sel = lifted_torso
        z = obs.lifted[sel] + obs.joint_radius[sel]
    elif obs.weights[_LEFT] > 0 and obs.weights[_RIGHT] > 0 and not any(obs.weights[j] > 0 for j in _TORSO[2:]):
        # A bust portrait: of the torso, the shoulders alone, which leave the turn about their
        # own line open. Without their lifted depths, both at the distance the shoulders and
        # face imply (not the arms: raised, they spread wider than the rest body's).
        head = [j for j in use if j in _HEAD_AND_SHOULDERS]
        z = obs.lifted[[_LEFT, _RIGHT]] + obs.joint_radius[[_LEFT, _RIGHT]] if lifted_torso == [_LEFT, _RIGHT] \
            and obs.metric else np.full(2, distance_from_size(obs, rest, head))
        return upright_on_shoulders(obs, rest, z)
    else:
        sel = use
        z = np.full(len(sel), distance_from_size(obs, rest, use))
    dst = _rays(obs, sel) * z[:, None]
    if len(sel) < 3:
        r = FACING_CAMERA
    else:
        r, t = kabsch(rest[sel], dst)
        if obs.metric:
            return r, t
        r = _facing_from_sides(obs, r)
    return r, dst.mean(0) - r @ rest[sel].mean(0)


def facing_the_camera(obs: PersonObservation, rest: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The plain baseline's start: the rest body facing the camera at the silhouette's place
    and the person's median depth."""
    use = [j for j in range(len(JOINT_NAMES)) if obs.weights[j] > 0]
    z = float(np.nanmedian(obs.points[:, 2])) if obs.has_depth and len(obs.points) else \
        distance_from_size(obs, rest, use)
    k = obs.intrinsics
    c = obs.cover_pixels.mean(0)
    centre = np.array([(c[0] - k[0, 2]) / k[0, 0] * z, (c[1] - k[1, 2]) / k[1, 1] * z, z])
    return FACING_CAMERA, centre - FACING_CAMERA @ rest.mean(0)


# Lengths the closed-form start measures the person by: pairs of joints on one rigid bone or
# across the torso (their distance hardly depends on the pose).
_SEGMENTS = tuple((JOINT_NAMES.index(a), JOINT_NAMES.index(b)) for a, b in (
    ("left_shoulder", "right_shoulder"), ("left_hip", "right_hip"), ("left_shoulder", "left_hip"),
    ("right_shoulder", "right_hip"), ("left_shoulder", "left_elbow"), ("right_shoulder", "right_elbow"),
    ("left_elbow", "left_wrist"), ("right_elbow", "right_wrist"), ("left_hip", "left_knee"),
    ("right_hip", "right_knee"), ("left_knee", "left_ankle"), ("right_knee", "right_ankle")))


def best_size(obs: PersonObservation, candidates: np.ndarray, default: int, tolerance: float = 0.05) -> int | None:
    """Of candidate bodies' joints [K,J,3], the one whose sizes best match the person's lifted
    joints (the median ratio of the measured segments nearest 1); None without enough metric
    measurements. A child or a two-metre adult then starts at about its size; a person within
    ``tolerance`` (relative) of the ``default`` candidate keeps it (a few noisy lengths are not
    evidence enough to leave the average, and the fit itself takes it from there)."""
    seen = {j: lifted_point(obs, j) for j in range(len(JOINT_NAMES))}
    pairs = [(a, b) for a, b in _SEGMENTS if seen[a] is not None and seen[b] is not None]
    if len(pairs) < 3:
        return None
    measured = np.array([np.linalg.norm(seen[a] - seen[b]) for a, b in pairs])
    a, b = np.array(pairs).T
    model = np.linalg.norm(candidates[:, a] - candidates[:, b], axis=-1)  # [K, S]
    ratio = np.median(np.log(measured[None] / np.maximum(model, 1e-6)), axis=1)
    if abs(ratio[default]) < tolerance:
        return default
    return int(np.argmin(np.abs(ratio)))


def lifted_point(obs: PersonObservation, joint: int) -> np.ndarray | None:
    """A keypoint back-projected at its lifted depth, where the pointmap shows the keypoint's own
    part there, bare or clothed (metric depth only; under clothing a couple of centimetres too
    near, close enough to size a body or choose a limb's fold by); else None."""
    if obs.weights[joint] <= 0 or not obs.metric or not np.isfinite(obs.lifted[joint]) \
            or not (obs.lifted_two_sided[joint] or obs.lifted_clothed[joint]):
        return None
    return _ray(obs, joint) * (obs.lifted[joint] + obs.joint_radius[joint])


def _ray(obs: PersonObservation, joint: int) -> np.ndarray:
    """The keypoint's ray through the camera centre, scaled to unit depth."""
    return _rays(obs, [joint])[0]


def _rays(obs: PersonObservation, joints) -> np.ndarray:
    """[n,3] the keypoints' rays through the camera centre, scaled to unit depth."""
    k = obs.intrinsics
    xy = obs.keypoints[joints]
    return np.stack([(xy[:, 0] - k[0, 2]) / k[0, 0], (xy[:, 1] - k[1, 2]) / k[1, 1], np.ones(len(xy))], 1)


# Where a joint no keypoint shows is looked for: the seen skin of the part that lies along
# the bone ending at the joint (the hand continues the forearm; a thigh's points lie along it).
_PART_ALONG = {"elbow": ("Upper_Arm",), "wrist": ("Hand", "Lower_Arm"), "knee": ("Upper_Leg",),
               "ankle": ("Lower_Leg",)}


def part_direction_target(obs: PersonObservation, joint: int, pivot: np.ndarray, length: float) -> np.ndarray | None:
    """For a joint without its keypoint: the point at the bone's length from its head towards
    the seen skin points of the part along the bone, their centroid set back by a limb's radius
    (the pointmap sees the near side). Not from a part the frame cuts (its centroid is not the
    limb's), and with metric depth only."""
    name = JOINT_NAMES[joint]
    side, kind = name.split("_", 1)
    if not obs.metric or kind not in _PART_ALONG or not len(obs.points):
        return None
    own = obs.point_parts.sum(1) == 1  # skin of one part (not clothing over several)
    for part in _PART_ALONG[kind]:
        cls = f"{side.capitalize()}_{part}"
        if cls in obs.parts_cut:
            continue
        pts = obs.points[own & obs.point_parts[:, BODY_CLASSES.index(cls)]]
        if len(pts) >= 5:
            centre = np.median(pts, axis=0) + np.array([0.0, 0.0, obs.joint_radius[joint]])
            direction = centre - pivot
            return pivot + direction / max(np.linalg.norm(direction), 1e-9) * length
    return None


# Two folds of a limb closer than this in depth (m) are one guess, not two.
FOLD_APART = 0.05


def limb_target(obs: PersonObservation, joint: int, pivot: np.ndarray, length: float,
                current: np.ndarray, end: tuple[int, float] | None = None,
                forward: np.ndarray | None = None, depth_tolerance: float = 0.04
                ) -> tuple[np.ndarray | None, np.ndarray | None]:
    """Where a limb's far joint should go (camera frame): on its keypoint's ray, at the bone's
    length from the bone's head. Of the two such points: the one nearer the depth the pointmap
    lifts the keypoint to (its own part seen there), if within ``depth_tolerance`` (m) of it,
    else the lifted point itself at the bone's length; else, when ``end`` = (the next joint, the
    next bone's length) and that joint is lifted, the one from which it is in reach (a knee
    over a hole in the depth, its ankle seen); else the one nearer the limb's current depth. A
    joint something else covers is not put in front of that cover. ``forward`` (the body's
    front, for a knee): a knee is not put behind the line from its hip to its ankle (knees do
    not bend backwards), unless both points are.

    Returns (target, the other fold): the other fold when the pick was a guess that the depth
    at the joint does not settle (metric depth only, the two at least ``FOLD_APART`` apart in
    depth, neither a knee bent backwards nor in front of its cover), else None: the solver
    then tries both."""
    if obs.weights[joint] <= 0:
        return part_direction_target(obs, joint, pivot, length), None
    d = _ray(obs, joint)
    d /= np.linalg.norm(d)
    along = float(d @ pivot)
    disc = along ** 2 - float(pivot @ pivot) + length ** 2
    own = lifted_point(obs, joint)
    if disc <= 0:  # the ray passes farther than the bone reaches: the nearest point on it
        return d * along, None
    roots = [d * (along - np.sqrt(disc)), d * (along + np.sqrt(disc))]
    if own is not None:
        best = min(roots, key=lambda p: abs(p[2] - own[2]))
        if abs(best[2] - own[2]) <= depth_tolerance:
            return best, None
        # A limb across the line of sight (an arm raised sideways) meets its ray almost
        # tangentially: a few pixels of keypoint error move both points by a hand's length in
        # depth (an arm folded 25 cm off). The lifted point, brought to the bone's length, is
        # off by those pixels only.
        return pivot + (own - pivot) / max(np.linalg.norm(own - pivot), 1e-9) * length, None
    impossible = [False, False]  # a knee bent backwards, a joint in front of what covers it
    far = lifted_point(obs, end[0]) if end is not None else None
    if far is not None:
        def knee_backwards(p):
            axis = (far - pivot) / max(np.linalg.norm(far - pivot), 1e-9)
            off = (p - pivot) - axis * float((p - pivot) @ axis)  # from the hip-ankle line
            return forward is not None and float(off @ forward) < -0.02
        impossible = [knee_backwards(p) for p in roots]
        # The one from which the next joint is in reach. With a few pixels of keypoint error on
        # a limb across the line of sight that too is a guess (an elbow over a hole put 18 cm
        # in front of the body): hence the other fold.
        cost = [abs(np.linalg.norm(far - p) - end[1]) + (1.0 if b else 0.0) for p, b in zip(roots, impossible)]
    else:
        ref = float(current[2])
        if obs.metric and np.isfinite(obs.lifted[joint]):  # covered: at or behind the cover
            ref = max(ref, obs.lifted[joint] + obs.joint_radius[joint])
            impossible = [float(p[2]) < obs.lifted[joint] for p in roots]
        elif (along := _part_depth(obs, joint)) is not None:  # no depth at the keypoint (a hole)
            ref = along  # the depth of the limb's own part where the pointmap sees it
        cost = [abs(p[2] - ref) for p in roots]
    pick = int(cost[1] < cost[0])
    guess = obs.metric and not any(impossible) and abs(roots[0][2] - roots[1][2]) >= FOLD_APART
    return roots[pick], (roots[1 - pick] if guess else None)


def _part_depth(obs: PersonObservation, joint: int) -> float | None:
    """The median depth of the seen skin of the part along the bone ending at ``joint``, set back
    by a limb's radius (metric depth only; None if too little of it is seen)."""
    side, kind = JOINT_NAMES[joint].split("_", 1)
    if not obs.metric or kind not in _PART_ALONG or not len(obs.points):
        return None
    own = obs.point_parts.sum(1) == 1
    for part in _PART_ALONG[kind]:
        pts = obs.points[own & obs.point_parts[:, BODY_CLASSES.index(f"{side.capitalize()}_{part}")]]
        if len(pts) >= 5:
            return float(np.median(pts[:, 2])) + float(obs.joint_radius[joint])
    return None
