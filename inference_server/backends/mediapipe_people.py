# SPDX-License-Identifier: GPL-3.0-or-later
"""The offline backend's work: people from the pose detector and MediaPipe Holistic, then maps.

People: the wheel's pose detector finds candidates on the photo and its tiles
(mediapipe_detector); Holistic's landmark models then look at each, in the detector's box
(mediapipe_landmarker), and a person is kept when they show both shoulders. Two candidates on
one person count once. Masks: each person's segmentation near their own seen bones; a pixel
claimed twice goes to the nearer bones.
Geometry (parts, pseudo-depth, normals) is computed on a WORK_SIDE grid and upsampled.
Imported lazily by ``mediapipe_cpu`` so the server starts where OpenCV/MediaPipe are absent.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import cv2
import numpy as np

from ..processing.goliath import PART_NAMES_SAPIENS2, mirror_order
from ..processing.intrinsics import default_intrinsics
from ..processing.pseudo_depth import (
    distance_from_landmarks,
    distance_from_shoulders,
    inflate,
    normals_from_depth,
    smooth_inside,
)
from ..dataplane.base import AnalyzeOptions, CancelToken, ProgressFn
from .mediapipe_ghosts import SAME_PERSON, UNFOUND, keep_people, on_a_bigger_one, same_person, torso_size
from .mediapipe_landmarker import Looks, shrunk
from .mediapipe_landmarks import POSE, to_goliath, to_goliath_3d
from .mediapipe_parts import parts_and_depth

log = logging.getLogger("inference_server.mediapipe")

SEGMENTATION_THRESHOLD = 0.5
WORK_SIDE = 256  # long side of the grid for parts/depth (smooth fields; upsampled after)
MIN_PERSON_AREA = 0.002  # fraction of the photo below which a detection is noise
MAX_LIMB_OFFSET = 0.5  # metres; landmark depths beyond this from the hips are not trusted
MIN_PIECE_FRACTION = 0.02  # a mask piece smaller than this share of the person is dropped
REFINE_PASSES = 1  # pose-only looks again at the landmarks' own box (then one with hands and face)
MIN_SHOULDER_VISIBILITY = 0.5  # a person shows both shoulders (a held helmet does not)
MASK_REACH = 0.8  # a person's mask ends this far (x torso size) from their seen bones
# Looks at a kept person's settled box whose world landmarks (the fit's 3D cue) are averaged
# with the last look's: (on the mirrored photo, box scale). One look's 3D pose moves by 10 mm
# and more with the box; the six looks' mean is 6 % nearer the real joints (docs/offline_backend.md).
WORLD_LOOKS = ((False, 0.9), (False, 1.1), (True, 1.0), (True, 0.9), (True, 1.1))
# Bones drawn to share contested mask pixels: arms, legs, the torso's outline, the head.
BONES = tuple((POSE[a], POSE[b]) for a, b in (
    ("left_shoulder", "right_shoulder"), ("left_hip", "right_hip"), ("left_shoulder", "left_hip"),
    ("right_shoulder", "right_hip"), ("left_shoulder", "left_elbow"), ("left_elbow", "left_wrist"),
    ("right_shoulder", "right_elbow"), ("right_elbow", "right_wrist"), ("left_hip", "left_knee"),
    ("left_knee", "left_ankle"), ("right_hip", "right_knee"), ("right_knee", "right_ankle"),
    ("nose", "left_shoulder"), ("nose", "right_shoulder"), ("left_ear", "right_ear")))


@dataclass
class Person:
    mask: np.ndarray  # bool [H,W]
    pose: np.ndarray  # [33,4] x px, y px, world z (m, relative to the hips), visibility
    world: np.ndarray  # [33,3] metric landmarks (x right, y down, z away), hips at the origin
    left_hand: np.ndarray | None  # [21,2] px
    right_hand: np.ndarray | None
    face: np.ndarray | None  # [468,2] px
    roi: tuple = ((0.0, 0.0), (0.0, 0.0))  # the landmarks' box: hips' centre, body-circle point (px)
    first: np.ndarray | None = None  # [33,4] pose of the first look, at the detection's box
    score: float = 1.0  # the detector's score of the candidate that placed them


def _points(landmarks, w: int, h: int) -> np.ndarray | None:
    if landmarks is None:
        return None
    return np.array([(p.x * w, p.y * h) for p in landmarks.landmark], np.float32)


def _world(landmarks) -> np.ndarray:
    """[33,3] metric world landmarks (x right, y down, z away, hips at the origin)."""
    return np.array([(p.x, p.y, p.z) for p in landmarks.landmark], np.float32)


def _clean(mask: np.ndarray, keep_points: np.ndarray) -> np.ndarray:
    """Drop small mask pieces unless a visible landmark sits on them."""
    n, labels, stats, _ = cv2.connectedComponentsWithStats(mask.astype(np.uint8), connectivity=8)
    if n <= 2:
        return mask
    areas = stats[1:, cv2.CC_STAT_AREA]
    keep = np.zeros(n, bool)
    keep[1:] = areas >= MIN_PIECE_FRACTION * areas.sum()
    h, w = mask.shape
    pts = np.round(keep_points).astype(int)
    inside = (pts[:, 0] >= 0) & (pts[:, 0] < w) & (pts[:, 1] >= 0) & (pts[:, 1] < h)
    keep[labels[pts[inside, 1], pts[inside, 0]]] = True
    keep[0] = False
    return keep[labels]


def detect_people(process, find, image: np.ndarray, max_people: int,
                  cancel: CancelToken | None = None, world_looks: bool = True,
                  photo: np.ndarray | None = None, check_again: bool = True) -> list[Person]:
    """People in ``image``, largest first: ``find`` gives the detector's candidates
    (mediapipe_detector), ``process(image, hips, top, full)`` Holistic's landmarks at one
    (mediapipe_landmarker; ``full`` False: the pose alone, to place people cheaply).
    ``world_looks`` False: each 3D pose is the last look's alone, not WORLD_LOOKS' mean, else
    that mean, read on ``photo`` where it is larger than ``image`` (the photo ``image`` was
    shrunk from; Looks). ``check_again`` False: unsure, faceless people are not looked at again
    (AGAIN_LOOKS; a clip's tracks drop what one frame alone shows)."""
    h, w = image.shape[:2]
    look = Looks(process, image)
    people: list[Person] = []
    seg: list[np.ndarray] = []
    for cand in find(image, cancel):
        if cancel is not None:
            cancel.check()
        if on_a_bigger_one(cand, people, seg):
            continue  # part of someone already placed, seen through a small tile
        got = _person_at(look, cand.hips, cand.top, REFINE_PASSES)
        if got is None or any(same_person(got[0], p) for p in people):
            continue
        got[0].score = cand.score
        people.append(got[0])
        seg.append(got[1])
        if len(people) >= max_people:
            break
    # Hands and face once per person, at their settled box (the last of the refining looks);
    # the body is the mean of that look and the first, at the detection's box (see _average).
    for k, person in enumerate(people):
        full = _person_at(look, *person.roi, 0, full=True, shoulders=False)
        if full is not None and not _shoulders_seen(full[0].pose):
            # this look sees the shoulders under the threshold that the pose-only looks placing the
            # person passed (a head-and-shoulders close-up): only its face is taken
            person.face = full[0].face
        elif full is not None:
            if person.first is not None:
                _average(full[0], person.first)
            full[0].score = person.score
            people[k], seg[k] = full
    def unfound(person: Person) -> int:  # asked by keep_people of unsure, faceless candidates
        if cancel is not None:
            cancel.check()
        return look.nobody_at(*person.roi, AGAIN_LOOKS, UNFOUND)

    keep = keep_people(people, seg, unfound if check_again else None)
    people, seg = [people[k] for k in keep], [seg[k] for k in keep]
    if people and WORLD_LOOKS and world_looks:
        # who is a person is decided on the grid, where the keep rules were set (looked at on the
        # larger photo, studio lights became people); their 3D pose is read on the photo
        look = Looks(process, image, photo)
        for person in people:
            if cancel is not None:
                cancel.check()
            _steady_world(look, person)
    _share_masks(people, seg, (h, w))
    people = [p for p in people if p.mask.sum() >= MIN_PERSON_AREA * h * w]
    return sorted(people, key=lambda p: -int(p.mask.sum()))


def _shoulders_seen(pose: np.ndarray) -> bool:
    return bool(pose[[POSE["left_shoulder"], POSE["right_shoulder"]], 3].min() >= MIN_SHOULDER_VISIBILITY)


def _person_at(look: Looks, hips, top, refine: int, full: bool = False, shoulders: bool = True):
    """(Person, segmentation [H,W] bool) at the box of ``hips`` and ``top`` (a detection's), or
    None when the landmark model finds nobody there, or (``shoulders``) someone without
    shoulders (an object).
    The landmarks' own box (their auxiliary hips and body-circle points) is looked at ``refine``
    more times, as MediaPipe does from frame to frame: candidates of one person from different
    tiles settle on one answer. ``Person.roi`` is the last answer's box."""
    h, w = look.hw
    res = first = look(hips, top, full)
    for _ in range(refine):
        if res.auxiliary_landmarks is None:
            break
        aux = [(p.x * w, p.y * h) for p in res.auxiliary_landmarks.landmark[:2]]
        again = look(aux[0], aux[1], full)
        if again.pose_landmarks is None:
            break
        res = again
    if (res.pose_landmarks is None or res.pose_world_landmarks is None or res.segmentation_mask is None
            or res.auxiliary_landmarks is None):
        return None
    lm = res.pose_landmarks.landmark
    pose = np.array([(p.x * w, p.y * h, 0.0, p.visibility) for p in lm], np.float32)
    world = _world(res.pose_world_landmarks)
    pose[:, 2] = world[:, 2]
    if shoulders and not _shoulders_seen(pose):
        return None  # a held helmet, a coat on a chair
    segmentation = res.segmentation_mask > SEGMENTATION_THRESHOLD
    aux = np.array([(p.x * w, p.y * h) for p in res.auxiliary_landmarks.landmark[:2]], np.float64)
    person = Person(np.zeros((h, w), bool), pose, world, _points(res.left_hand_landmarks, w, h),
                    _points(res.right_hand_landmarks, w, h), _points(res.face_landmarks, w, h),
                    (aux[0], aux[1]))
    if first is not res and first.pose_landmarks is not None:
        person.first = np.array([(p.x * w, p.y * h, 0.0, p.visibility) for p in first.pose_landmarks.landmark],
                                np.float32)
    return person, segmentation


def _same_torso(a: np.ndarray, b: np.ndarray) -> bool:
    """Two looks' [33,>=2] poses place the shoulders and hips alike (within SAME_PERSON x the
    torso): the same person, not a look that moved to a neighbour."""
    idx = [POSE[n] for n in ("left_shoulder", "right_shoulder", "left_hip", "right_hip")]
    return bool(np.linalg.norm(a[idx, :2] - b[idx, :2], axis=1).mean() <= SAME_PERSON * torso_size(a))


# A landmark's partner on the other side (the mirrored photo's left wrist is the person's right).
_MIRROR = list(mirror_order(POSE))
# Looks at a person's box that find a real person again: (on the mirrored photo, box scale).
AGAIN_LOOKS = ((True, 1.0), (False, 0.9), (False, 1.1))


def _steady_world(look: Looks, person: Person) -> None:
    """``person.world``: the mean of the world landmarks of the last look and of WORLD_LOOKS at
    the person's settled box (the box scaled, and the photo mirrored: the landmarks mirrored
    back, sides swapped). The 2D landmarks stay the two looks' mean (_average): averaged over
    these looks too, they were further from the labels (4.7 -> 5.0 %). Where ``look`` sees a
    photo larger than the grid, the last look is taken again there, at the same box: the 3D pose
    of a small person is read on their own pixels (the scored 3D frames' input 95.6 -> 93.8 mm,
    docs/offline_backend.md)."""
    h, w = look.hw
    hips, top = (np.asarray(p, np.float64) for p in person.roi)
    worlds, again = ([], ((False, 1.0),)) if look.larger else ([person.world], ())
    for mirror, scale in again + WORLD_LOOKS:
        res = look(hips, hips + scale * (top - hips), False, mirror)
        if res.pose_landmarks is None or res.pose_world_landmarks is None:
            continue
        pose, world = _points(res.pose_landmarks, w, h), _world(res.pose_world_landmarks)
        if mirror:
            pose[:, 0] = w - pose[:, 0]
            world[:, 0] = -world[:, 0]
            pose, world = pose[_MIRROR], world[_MIRROR]
        if _same_torso(person.pose, pose):
            worlds.append(world)
    if worlds:
        person.world = np.mean(worlds, axis=0).astype(np.float32)
    person.pose[:, 2] = person.world[:, 2]


def _average(person: Person, pose: np.ndarray) -> None:
    """``person``'s 2D landmarks and visibilities averaged with another look's ``pose`` at them.
    The refined box alone sees less: the astronaut's elbow behind her helmet has visibility
    0.52 at the detection's box, 0.34 at the refined one, 0.43 averaged (a joint under 0.3 is
    not measured); two looks also average out some noise (the backend's 2D error on the real
    photos 4.8 -> 4.5 %). The world landmarks are not averaged with this first look's (the 3D
    frames' fit was 143 mm, not 137, when tried; docs/body_fit.md) but over looks at the settled
    box (_steady_world). Looks whose torsos disagree (the refinement moved to a neighbour) are not
    mixed."""
    if not _same_torso(person.pose, pose):
        return
    person.pose[:, [0, 1, 3]] = 0.5 * (person.pose[:, [0, 1, 3]] + pose[:, [0, 1, 3]])


def _skeleton_distance(pose: np.ndarray, box) -> np.ndarray:
    """Distance (px) of each pixel of ``box`` (photo slices) from the person's seen bones."""
    ys, xs = box
    canvas = np.full((ys.stop - ys.start, xs.stop - xs.start), 255, np.uint8)
    pts = pose[:, :2] - np.array([xs.start, ys.start], np.float32)
    seen = pose[:, 3] >= 0.5
    for a, b in BONES:
        if seen[a] and seen[b]:
            cv2.line(canvas, tuple(int(v) for v in np.round(pts[a])), tuple(int(v) for v in np.round(pts[b])), 0, 1)
    if canvas.min() > 0:
        return np.zeros(canvas.shape, np.float32)  # nothing seen to measure from: no limit
    return cv2.distanceTransform(canvas, cv2.DIST_L2, 3)


def _share_masks(people: list[Person], seg: list[np.ndarray], hw: tuple[int, int]) -> None:
    """Each person's mask: their segmentation near their own seen bones; a pixel two people's
    segmentations claim goes to the one whose bones are nearer (people side by side, in front)."""
    h, w = hw
    owner = np.zeros((h, w), np.int32)
    best = np.full((h, w), np.inf, np.float32)
    for k, (person, m) in enumerate(zip(people, seg), start=1):
        ys, xs = np.nonzero(m)
        if len(ys) == 0:
            continue
        box = (slice(ys.min(), ys.max() + 1), slice(xs.min(), xs.max() + 1))
        d = _skeleton_distance(person.pose, box)
        take = m[box] & (d <= MASK_REACH * torso_size(person.pose)) & (d < best[box])
        owner[box][take] = k
        best[box][take] = d[take]
    for k, person in enumerate(people, start=1):
        vis = person.pose[person.pose[:, 3] >= 0.5, :2]
        vis_in = vis[(vis[:, 0] >= 0) & (vis[:, 0] < w) & (vis[:, 1] >= 0) & (vis[:, 1] < h)]
        person.mask = _clean(owner == k, vis_in)


def person_geometry(person: Person, intrinsics: np.ndarray, hw: tuple[int, int]):
    """(bounding box slices, parts, depth, normals, hips' distance) of one person; the maps
    cover the box of the photo grid that holds the person's mask."""
    h, w = hw
    f = float(intrinsics[0, 0])
    s = WORK_SIDE / max(h, w)
    sh, sw = max(2, round(h * s)), max(2, round(w * s))
    sx, sy = sw / w, sh / h
    pose_s = person.pose.copy()
    pose_s[:, 0] *= sx
    pose_s[:, 1] *= sy
    scale_pts = (lambda a: None if a is None else a * np.array([sx, sy], np.float32))
    labels, z_off = parts_and_depth((sh, sw), pose_s, scale_pts(person.left_hand),
                                    scale_pts(person.right_hand), scale_pts(person.face))
    # Distance of the hips (the world landmarks' origin) from the camera.
    vis = person.pose[:, 3]
    z0 = distance_from_landmarks(person.pose[:, :2], person.world, vis, f)
    if z0 is None:
        ls, rs = person.pose[POSE["left_shoulder"], :2], person.pose[POSE["right_shoulder"], :2]
        z0 = distance_from_shoulders(float(np.linalg.norm(ls - rs)), f)
        hips_z = z0
    else:
        hips_z = z0 - float(person.world[vis >= 0.5, 2].mean())  # the fit centres on the visible
    mask_s = cv2.resize(person.mask.astype(np.uint8), (sw, sh), interpolation=cv2.INTER_AREA) > 0
    # Per-limb landmark depths jump where the nearest segment changes; a body is smooth.
    z_off = np.clip(z_off, -MAX_LIMB_OFFSET, MAX_LIMB_OFFSET)
    z_off = smooth_inside(z_off, mask_s, max(2.0, 0.1 * float(np.sqrt(mask_s.sum()))))
    bulge = inflate(mask_s, hips_z / (f * s))
    depth_s = (hips_z + z_off - bulge).astype(np.float32)
    k_s = intrinsics.astype(np.float64).copy()
    k_s[0] *= sx
    k_s[1] *= sy
    normal_s = normals_from_depth(depth_s, k_s)
    # Upsample the whole grid (cv2.resize is fast), then keep the person's bounding box.
    x0, y0, bw, bh = cv2.boundingRect(person.mask.astype(np.uint8))
    box = (slice(y0, y0 + bh), slice(x0, x0 + bw))
    depth = cv2.resize(depth_s, (w, h), interpolation=cv2.INTER_CUBIC)[box]
    parts = cv2.resize(labels, (w, h), interpolation=cv2.INTER_NEAREST)[box]
    # Bilinear upsampling shortens unit vectors a little: renormalise, channel by channel.
    nx, ny, nz = (cv2.resize(c, (w, h), interpolation=cv2.INTER_LINEAR)[box] for c in cv2.split(normal_s))
    inv = 1.0 / np.maximum(cv2.sqrt(nx * nx + ny * ny + nz * nz), 1e-12)
    normal = cv2.merge([nx * inv, ny * inv, nz * inv])
    return box, parts, depth, normal, hips_z


def analyze_photo(process, find, image: np.ndarray, options: AnalyzeOptions, max_people: int,
                  progress: ProgressFn, cancel: CancelToken) -> tuple[dict, dict[str, float]]:
    """Canonical maps (all but ``source``) of one RGB photo, and seconds per stage."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    photo = image
    image = np.ascontiguousarray(shrunk(image, options.max_side))
    h, w = image.shape[:2]
    timings["resize"] = time.perf_counter() - t0
    cancel.check()

    t0 = time.perf_counter()
    progress("detect", 0.1, "finding people (MediaPipe pose detector, then Holistic per person)")
    # a clip's frame: its smoothing over frames replaces the looks (bench_animate 2.8 -> 4.2-4.9 frames/s)
    people = detect_people(process, find, image, max_people, cancel, world_looks=not options.clip_frame,
                           photo=photo, check_again=not options.clip_frame)
    timings["detect"] = time.perf_counter() - t0
    cancel.check()

    t0 = time.perf_counter()
    intrinsics = default_intrinsics(h, w)
    mask = np.zeros((h, w), np.uint8)
    parts = np.zeros((h, w), np.uint8)
    depth = np.full((h, w), np.nan, np.float32)
    normal = np.full((h, w, 3), np.nan, np.float32)
    keypoints = np.zeros((len(people), 308, 3), np.float32)
    keypoints_3d = np.full((len(people), 308, 4), np.nan, np.float32)
    distances = []
    for k, person in enumerate(people, start=1):
        progress("geometry", k / max(1, len(people)), f"depth, normals and parts of person {k}")
        keypoints[k - 1] = to_goliath(person.pose[:, [0, 1, 3]], person.left_hand,
                                      person.right_hand, person.face)
        # MediaPipe's own 3D pose: the fit takes its bones' directions (the pseudo-depth below
        # is smoothed over the body and flattens limbs that point at the camera or away).
        keypoints_3d[k - 1] = to_goliath_3d(person.world, person.pose[:, 3])
        box, p_parts, p_depth, p_normal, z = person_geometry(person, intrinsics, (h, w))
        m = person.mask[box]
        np.copyto(mask[box], np.uint8(k), where=m)
        np.copyto(parts[box], p_parts, where=m)
        np.copyto(depth[box], p_depth, where=m)
        np.copyto(normal[box], p_normal, where=np.repeat(m[..., None], 3, 2))  # no broadcast: 5x faster
        distances.append(round(z, 3))
        cancel.check()
    timings["geometry"] = time.perf_counter() - t0
    log.info("mediapipe: %d people at %s m, %s", len(people), distances,
             {k: f"{v * 1000:.0f} ms" for k, v in timings.items()})
    return {
        "image": image,
        "mask": mask,
        "parts": parts,
        "part_names": list(PART_NAMES_SAPIENS2),
        "normal": normal,
        "depth": depth,
        "metric": np.array(True),
        "intrinsics": intrinsics,
        "keypoints": keypoints,
        "keypoints_3d": keypoints_3d,
    }, timings
