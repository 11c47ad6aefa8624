# SPDX-License-Identifier: GPL-3.0-or-later
"""The offline backend's work: people from MediaPipe Holistic passes, then their maps.

People: Holistic sees one person per pass; after each pass that person is painted out and the
photo is searched again, up to ``max_people``. Each instance is that pass's segmentation minus
the pixels already claimed, cleaned by connected components. People after the first must show
a face and both shoulders (this rejects ghosts found in objects beside a painted-out person).
Geometry (parts, pseudo-depth, normals) is computed on a WORK_SIDE grid and upsampled.
Imported lazily by ``mediapipe_cpu`` so the server starts where OpenCV/MediaPipe are absent.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

import cv2
import numpy as np

from ..processing.goliath import PART_NAMES_SAPIENS2
from ..processing.intrinsics import default_intrinsics
from ..processing.pseudo_depth import (
    distance_from_landmarks,
    distance_from_shoulders,
    inflate,
    normals_from_depth,
    smooth_inside,
)
from ..dataplane.base import AnalyzeOptions, CancelToken, ProgressFn
from .mediapipe_landmarks import POSE, to_goliath, to_goliath_3d
from .mediapipe_parts import parts_and_depth

log = logging.getLogger("inference_server.mediapipe")

SEGMENTATION_THRESHOLD = 0.5
WORK_SIDE = 256  # long side of the grid for parts/depth (smooth fields; upsampled after)
MIN_PERSON_AREA = 0.002  # fraction of the photo below which a detection is noise
MAX_LIMB_OFFSET = 0.5  # metres; landmark depths beyond this from the hips are not trusted
MIN_PIECE_FRACTION = 0.02  # a mask piece smaller than this share of the person is dropped


@dataclass
class Person:
    mask: np.ndarray  # bool [H,W]
    pose: np.ndarray  # [33,4] x px, y px, world z (m, relative to the hips), visibility
    world: np.ndarray  # [33,3] metric landmarks (x right, y down, z away), hips at the origin
    left_hand: np.ndarray | None  # [21,2] px
    right_hand: np.ndarray | None
    face: np.ndarray | None  # [468,2] px


def _points(landmarks, w: int, h: int) -> np.ndarray | None:
    if landmarks is None:
        return None
    return np.array([(p.x * w, p.y * h) for p in landmarks.landmark], np.float32)


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


def detect_people(process, image: np.ndarray, max_people: int,
                  cancel: CancelToken | None = None) -> list[Person]:
    """People in ``image`` via repeated Holistic passes; ``process`` runs one pass."""
    h, w = image.shape[:2]
    claimed = np.zeros((h, w), bool)
    people: list[Person] = []
    work = image
    for _ in range(max_people):
        if cancel is not None:
            cancel.check()
        res = process(work)
        if res.pose_landmarks is None or res.segmentation_mask is None:
            break
        lm = res.pose_landmarks.landmark
        pose = np.array([(p.x * w, p.y * h, 0.0, p.visibility) for p in lm], np.float32)
        world = np.array([(p.x, p.y, p.z) for p in res.pose_world_landmarks.landmark], np.float32)
        pose[:, 2] = world[:, 2]
        visible = pose[pose[:, 3] >= 0.5, :2]
        vis_in = visible[(visible[:, 0] >= 0) & (visible[:, 0] < w) & (visible[:, 1] >= 0)
                         & (visible[:, 1] < h)].astype(int)
        if people and len(vis_in) and claimed[vis_in[:, 1], vis_in[:, 0]].mean() > 0.5:
            break  # found someone already taken (their painted-out outline)
        if people and (res.face_landmarks is None
                       or pose[[POSE["left_shoulder"], POSE["right_shoulder"]], 3].min() < 0.5):
            # After a paint-out the detector also "finds" people in objects next to the
            # painted area (a held helmet); extra people must show a face and shoulders.
            break
        mask = (res.segmentation_mask > SEGMENTATION_THRESHOLD) & ~claimed
        mask = _clean(mask, vis_in.astype(np.float32))
        if mask.sum() < MIN_PERSON_AREA * h * w:
            break
        people.append(Person(mask, pose, world, _points(res.left_hand_landmarks, w, h),
                             _points(res.right_hand_landmarks, w, h),
                             _points(res.face_landmarks, w, h)))
        claimed |= mask
        if len(people) < max_people:
            # Paint the person out (a little wider than the mask) and look again.
            wide = cv2.dilate(mask.astype(np.uint8), np.ones((15, 15), np.uint8))
            wide[claimed] = 1
            fill = cv2.mean(image, mask=1 - wide)[:3]
            work = image.copy()
            cv2.copyTo(np.full_like(image, np.array(fill, np.uint8)), wide, work)
    return people


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


def analyze_photo(process, image: np.ndarray, options: AnalyzeOptions, max_people: int,
                  progress: ProgressFn, cancel: CancelToken) -> tuple[dict, dict[str, float]]:
    """Canonical maps (all but ``source``) of one RGB photo, and seconds per stage."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    h0, w0 = image.shape[:2]
    if options.max_side > 0 and max(h0, w0) > options.max_side:
        s = options.max_side / max(h0, w0)
        size = (max(1, round(w0 * s)), max(1, round(h0 * s)))
        image = cv2.resize(image, size, interpolation=cv2.INTER_AREA)
    image = np.ascontiguousarray(image)
    h, w = image.shape[:2]
    timings["resize"] = time.perf_counter() - t0
    cancel.check()

    t0 = time.perf_counter()
    progress("detect", 0.1, "finding people (MediaPipe Holistic)")
    people = detect_people(process, image, max_people, cancel)
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
