# SPDX-License-Identifier: GPL-3.0-or-later
"""The fitted body on real, labelled photos, against the backend's own output in the same run.

    .venv/bin/python benchmarks/bench_real.py --data /work/realdata [--out DIR] [--json-out FILE]

``--data DIR`` holds mmpose's ``tests/data`` sample folders (``DIR/<name>`` or
``DIR/tests/data/<name>``), fetched from ``open-mmlab/mmpose`` and never committed (their licences
vary; see ../shared/reference/real_data.md). Read: ``mpi_inf_3dhp`` (3D joints, camera frame),
``coco``, ``crowdpose``, ``mhp``, ``humanart``, ``posetrack18`` (2D keypoints). The ``h36m`` and
``ochuman`` samples are reserved for an independent check: this script never opens them.

Two more 3D sets, each read from its own folder under ``--data`` and scored by default only where
that folder exists (``--sets`` names them; never committed either, research-only licences):

- ``humanm3`` (folder ``humanm3_demo/``): the Human-M3 frame (Fan et al. 2023, Tsinghua
  i-VisionGroup; licence: non-commercial scientific research, no redistribution) that
  ``guidodumont/SMPLify-3D`` ships as its demo: one 2048x1536 outdoor photo (basketball1,
  camera_1), 9 people each with ``pose3d`` [15,3] in ``data.pkl`` (metres, already in the camera
  frame; joints pelvis, left/right hip, knee, ankle, neck, head, left/right shoulder, elbow,
  wrist). The camera's intrinsics are the ones its ``datasets/demo.py`` gives
  (``HUMANM3_INTRINSICS``). Each person is a 3D frame of its own; the photo is built once.
  ``git --git-dir=<fetched mirror> archive HEAD data/demo | tar -x -C DIR/humanm3_demo
  --strip-components=2``.
- ``zju_mocap`` (folder ``zju_mocap/``): two ZJU-MoCap frames (one subject, 1024x1024, a lens
  with distortion; ZJU-MoCap's terms: research use on request) as ``simon-schaefer/vhop``'s
  ``data/test/samples`` keeps them: ``sample`` and ``sample_31`` (``.npz`` + ``.jpg``; 32 and
  33 are the next frames of 31 and are left out). Truth = SMPL's joints of the dataset's
  multi-view SMPL fit, ``T_C_B`` applied (body to camera). ``git --git-dir=<mirror> archive HEAD
  data/test/samples | tar -x -C DIR/zju_mocap --strip-components=3``.

``--turned`` builds and scores every photo turned a quarter clockwise instead (written into
``--out/turned``, the labels and the 3D truth turned with it): a camera held on its side, people
lying across the picture (docs/body_fit.md "Lying people").

Neither set has 2D labels: the label is the 3D joints projected with the dataset's camera
(ZJU's through its lens distortion), the box spans all of its joints. Joints map by name onto
the 12 limb joints (SMPL's 24: shoulders 16/17, elbows 18/19, wrists 20/21, hips 1/2, knees
4/5, ankles 7/8); a Human-M3 or SMPL hip is not anny's, as for 3DHP.

Every photo goes through the product's full path, as a user runs it::

    sapiens-blender build PHOTO --body -o P.glb --save-joints P.joints.json --save-maps P.npz \
        --report P.report.json [--server URL --token T]

with the default model (``auto``: the offline MediaPipe backend without a GPU). One local server
(``sapiens-blender serve``) is started for the run and shared by the builds (``--server URL
--token T`` uses a running one, ``--server-per-photo`` lets each build start its own, exactly as
a single ``build`` does; the analysis and the fit are the same either way). Only the documented
files are read: the joints file (docs/maps_format.md: fitted joints, camera frame, metres) and
the maps (``image``, ``intrinsics``, ``keypoints``: the backend's own 2D keypoints per person,
Goliath-308 order).

What is scored
- **3D frames** (mpi_inf_3dhp 4 frames, humanm3 9 people in one photo, zju_mocap 2 frames;
  means over all and per set): the 12 limb joints (shoulders, elbows, wrists, hips,
  knees, ankles). PA-MPJPE (prediction similarity-aligned to the truth: rotation, translation,
  scale, Umeyama) and root-relative MPJPE (both skeletons' hip midpoints at the origin, no
  rotation, no scale) of the fitted body, and of MediaPipe's own 3D world landmarks. The maps do
  not keep the world landmarks, so they are computed here: one MediaPipe Holistic pass with the
  backend's settings (static image, model complexity 1, segmentation on, face refinement off)
  on the maps' ``image`` -- the very picture the backend analysed (its 2D landmarks are checked
  to equal the maps' keypoints of person 1) -- and, for comparison with figures measured on
  the original file, on the full-resolution photo. The body scored is the built person whose
  projected joints are nearest the labelled 2D joints, if its centre lies on the person (inside
  the labelled joints' box grown by 20 %); its 2D error is reported beside (as a % of sqrt of
  that box's area), since a body on the right person may still be posed wrong. No body on
  the person is a miss. MediaPipe's pass alike. Also: the fitted root's distance from the true
  one (the fit is metric, in the camera frame).
- **2D photos**: labelled people = annotations with at least 5 labelled keypoints, not crowd.
  Size of a labelled person = sqrt(w * h) of the dataset's box. Error of a built person
  against a labelled one = the mean pixel distance over the keypoints the label has and the
  joints file has (nose, eyes, ears, shoulders, elbows, wrists, hips, knees, ankles; whichever
  the dataset labels), divided by the size. Built people and labels are matched one to one,
  lowest error first; a label is **recalled** when its match is within 10 %. A built person
  matching no label is listed with its nearest label's error and whether it stands inside any
  annotated box (also boxes without keypoints). The same is done for the backend's own
  keypoints (the maps' people: what the fit received), so a person the backend never found is
  told apart from one the fit lost. PoseTrack labels only some people of a crowd: its unmatched
  bodies are listed but not counted as false. Human-Art's two artworks are scored apart
  (``humanart-art``) from its real photo.
- **Legs out of the frame**, of each label with a body within 25 % (matched one to one as
  above; the body may be on the right person with a poor pose): a leg whose hip is labelled
  in the picture and whose ankle is not (unlabelled, or labelled outside it), where a straight
  leg continuing the torso would end outside the picture (hip + 1.8 x the shoulders-to-hips
  vector of the labels' midpoints); or, with no hip labelled (a portrait cut at the chest),
  both legs when the hips, 1.3 shoulder widths straight below the labelled shoulders, are
  outside the picture. ``upright``: the torso leans at most 45 deg from the image's vertical
  (shoulders within 30 deg of level when no hip is labelled); ``seated``: a labelled knee in the
  picture lies less than 0.4 torso lengths below its hip along the torso (a thigh towards the
  camera or raised: sitting; a standing leg's knee lies 0.6 or more below); ``standing``:
  upright and not seated, the people the target applies to. On the body: hip flexion (the thigh's angle from the torso's down axis in the body's sagittal
  plane, forward positive) and knee flexion (the angle between thigh and shin, 0 = straight),
  in degrees, and which of that leg's joints the joints file marks ``estimated``.

``--draw`` writes an overlay per photo into --out (labels green, fitted bodies red, the
backend's keypoints blue) to see what went wrong.

Joint definitions differ (a 3DHP or COCO hip is not anny's hip joint centre): the fit and the
backend are compared on the same joints in the same run; absolute numbers carry that offset.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

# --- joints --------------------------------------------------------------------------------
LIMB_JOINTS = ("right_shoulder", "right_elbow", "right_wrist", "left_shoulder", "left_elbow",
               "left_wrist", "right_hip", "right_knee", "right_ankle", "left_hip", "left_knee",
               "left_ankle")
FACE_JOINTS = ("nose", "left_eye", "right_eye", "left_ear", "right_ear")
HIPS = (LIMB_JOINTS.index("right_hip"), LIMB_JOINTS.index("left_hip"))
# mpi_inf_3dhp (mmpose's 17-joint order): head_top, neck, right_shoulder, right_elbow,
# right_wrist, left_shoulder, left_elbow, left_wrist, right_hip, right_knee, right_ankle,
# left_hip, left_knee, left_ankle, root, spine, head
MPI3DHP_LIMB_INDEX = (2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13)
# Human-M3 (15 joints): pelvis, left_hip, right_hip, left_knee, right_knee, left_ankle,
# right_ankle, neck, head, left_shoulder, right_shoulder, left_elbow, right_elbow, left_wrist,
# right_wrist
HUMANM3_LIMB_INDEX = (10, 12, 14, 9, 11, 13, 2, 4, 6, 1, 3, 5)
# SMPL's 24 joints (smplx's SMPL output starts with them): pelvis, left_hip, right_hip, spine1,
# left_knee, right_knee, spine2, left_ankle, right_ankle, spine3, left_foot, right_foot, neck,
# left_collar, right_collar, head, left_shoulder, right_shoulder, left_elbow, right_elbow,
# left_wrist, right_wrist, left_hand, right_hand
SMPL_LIMB_INDEX = (17, 19, 21, 16, 18, 20, 2, 5, 8, 1, 4, 7)
# Goliath-308 slots of the maps' keypoints (docs/maps_format.md, the Goliath keypoint list)
GOLIATH_INDEX = {"nose": 0, "left_eye": 1, "right_eye": 2, "left_ear": 3, "right_ear": 4,
                 "left_shoulder": 5, "right_shoulder": 6, "left_elbow": 7, "right_elbow": 8,
                 "left_hip": 9, "right_hip": 10, "left_knee": 11, "right_knee": 12,
                 "left_ankle": 13, "right_ankle": 14, "right_wrist": 41, "left_wrist": 62}
# MediaPipe Pose's 33 landmarks (BlazePose topology)
MEDIAPIPE_INDEX = {"nose": 0, "left_eye": 2, "right_eye": 5, "left_ear": 7, "right_ear": 8,
                   "left_shoulder": 11, "right_shoulder": 12, "left_elbow": 13, "right_elbow": 14,
                   "left_wrist": 15, "right_wrist": 16, "left_hip": 23, "right_hip": 24,
                   "left_knee": 25, "right_knee": 26, "left_ankle": 27, "right_ankle": 28}
# Dataset keypoint names -> ours (names not listed are not scored: head top, neck, pelvis, ...)
_MPII_NAMES = {"Right-ankle": "right_ankle", "Right-knee": "right_knee", "Right-hip": "right_hip",
               "Left-hip": "left_hip", "Left-knee": "left_knee", "Left-ankle": "left_ankle",
               "Right-wrist": "right_wrist", "Right-elbow": "right_elbow",
               "Right-shoulder": "right_shoulder", "Left-shoulder": "left_shoulder",
               "Left-elbow": "left_elbow", "Left-wrist": "left_wrist"}
SCORED_NAMES = frozenset(LIMB_JOINTS + FACE_JOINTS)

MATCH_FRACTION = 0.10  # a built person recalls a label within 10 % of the label's size
MIN_LABELLED = 5  # keypoints a labelled person needs
MIN_SHARED = 4  # joints two people must share to be compared
LEG_REACH_TORSOS = 1.8  # hip to ankle of a straight leg, in torso lengths (shoulder-hip midpoints)
LEG_MATCH_FRACTION = 0.25  # legs are measured on the body nearest a label, up to 25 % off
SEATED_KNEE_DROP = 0.4  # a labelled knee this close below its hip (torso lengths, along the torso): sitting
TORSO_SHOULDER_WIDTHS = 1.3  # shoulders' midpoint to hips' midpoint, in shoulder widths
RESERVED = ("h36m", "ochuman")  # an independent check's data: never read here


# --- scoring (pure numpy; tests/benchmarks/test_bench_real.py) -------------------------------
def similarity_align(pred: np.ndarray, truth: np.ndarray) -> np.ndarray:
    """``pred`` [N,3] moved onto ``truth`` by the best rotation, translation and scale (Umeyama,
    no reflection): the fit's own (inference_server/fit/alignment.py), tested here too."""
    from inference_server.fit.alignment import similarity_onto

    return similarity_onto(np.asarray(pred, np.float64), np.asarray(truth, np.float64))


def pa_mpjpe(pred, truth) -> float:
    """Mean joint distance after the similarity alignment (units of ``truth``)."""
    truth = np.asarray(truth, np.float64)
    return float(np.linalg.norm(similarity_align(pred, truth) - truth, axis=1).mean())


def root_relative_mpjpe(pred, truth, root=HIPS) -> float:
    """Mean joint distance with both skeletons' root (the midpoint of the ``root`` joints) at the
    origin; no rotation, no scale."""
    pred = np.asarray(pred, np.float64)
    truth = np.asarray(truth, np.float64)
    p = pred - pred[list(root)].mean(0)
    t = truth - truth[list(root)].mean(0)
    return float(np.linalg.norm(p - t, axis=1).mean())


def project(xyz, intrinsics) -> np.ndarray:
    """Camera-frame points [N,3] (x right, y down, z forward) -> pixels [N,2] with K [3,3]."""
    xyz = np.asarray(xyz, np.float64)
    k = np.asarray(intrinsics, np.float64)
    z = np.where(np.abs(xyz[:, 2]) < 1e-9, 1e-9, xyz[:, 2])
    return np.stack([k[0, 0] * xyz[:, 0] / z + k[0, 2], k[1, 1] * xyz[:, 1] / z + k[1, 2]], -1)


def box_size(box) -> float:
    """A person's size in pixels: sqrt(w * h) of the box (x, y, w, h)."""
    return float(np.sqrt(max(float(box[2]), 0.0) * max(float(box[3]), 0.0)))


def person_error(points: dict, label: dict, size: float) -> tuple[float, int]:
    """(mean pixel distance / size, joints compared) of a person's 2D ``points`` {name: (x, y)}
    against a label's {name: (x, y)}; (inf, n) when fewer than MIN_SHARED are shared."""
    names = [n for n in label if n in points]
    if len(names) < MIN_SHARED or size <= 0:
        return float("inf"), len(names)
    d = np.linalg.norm(np.array([points[n] for n in names], np.float64)
                       - np.array([label[n] for n in names], np.float64), axis=1)
    return float(d.mean() / size), len(names)


def error_matrix(people: list[dict], labels: list[dict], sizes: list[float]) -> np.ndarray:
    """[len(people), len(labels)] of person_error."""
    m = np.full((len(people), len(labels)), np.inf)
    for i, p in enumerate(people):
        for j, (lab, size) in enumerate(zip(labels, sizes)):
            m[i, j] = person_error(p, lab, size)[0]
    return m


def match_people(cost: np.ndarray, threshold: float = MATCH_FRACTION) -> list[tuple[int, int, float]]:
    """One-to-one (person, label, cost) pairs, lowest cost first, each within ``threshold``."""
    cost = np.asarray(cost, np.float64)
    pairs: list[tuple[int, int, float]] = []
    if cost.size == 0:
        return pairs
    used_p, used_l = set(), set()
    for flat in np.argsort(cost, axis=None, kind="stable"):
        i, j = divmod(int(flat), cost.shape[1])
        c = float(cost[i, j])
        if not np.isfinite(c) or c > threshold:
            break
        if i in used_p or j in used_l:
            continue
        pairs.append((i, j, c))
        used_p.add(i)
        used_l.add(j)
    return pairs


def _unit(v: np.ndarray) -> np.ndarray:
    return v / max(float(np.linalg.norm(v)), 1e-12)


def leg_flexion(joints: dict, side: str) -> tuple[float, float]:
    """(hip flexion, knee flexion) in degrees of one leg (``side`` 'left'/'right') of a 3D
    skeleton {name: xyz} in the camera frame (x right, y down, z forward).

    Body frame from the skeleton: left = right hip -> left hip, up = hips' midpoint ->
    shoulders' midpoint made orthogonal to left, forward = left x up. Hip flexion is the
    thigh's angle from -up within the sagittal plane (up, forward), positive forward; knee
    flexion is the angle between thigh and shin (0 = straight)."""
    j = {k: np.asarray(v, np.float64) for k, v in joints.items()}
    left = _unit(j["left_hip"] - j["right_hip"])
    up = (j["left_shoulder"] + j["right_shoulder"]) / 2 - (j["left_hip"] + j["right_hip"]) / 2
    up = _unit(up - left * (up @ left))
    forward = np.cross(left, up)
    thigh = j[f"{side}_knee"] - j[f"{side}_hip"]
    shin = j[f"{side}_ankle"] - j[f"{side}_knee"]
    hip = float(np.degrees(np.arctan2(thigh @ forward, -(thigh @ up))))
    cosk = float(_unit(thigh) @ _unit(shin))
    knee = float(np.degrees(np.arccos(np.clip(cosk, -1.0, 1.0))))
    return hip, knee


def legs_out_of_frame(label: dict, hw: tuple[int, int]) -> list[dict]:
    """The legs of a 2D label {name: (x, y)} (labelled keypoints only) that leave the picture.

    With a hip labelled in the picture: the ankle unlabelled or outside it, where a straight
    leg continuing the torso (hip + LEG_REACH_TORSOS x the shoulders-to-hips vector of the
    labels' midpoints: a standing leg for an upright torso) would end outside the picture.
    With no hip labelled (a portrait cut at the chest): both shoulders labelled in the picture
    and the hips, TORSO_SHOULDER_WIDTHS shoulder widths straight below them, outside it; such a
    torso counts as upright when the shoulders are within 30 deg of level. Per leg: side,
    whether the knee is seen, whether the hip is seen, the torso's lean (degrees from the
    image's vertical; None when estimated from the shoulders) and ``upright`` (lean <= 45)."""
    h, w = hw
    inside = lambda p: 0 <= p[0] < w and 0 <= p[1] < h  # noqa: E731
    shoulders = [np.asarray(label[n], float) for n in ("left_shoulder", "right_shoulder") if n in label]
    hips = [np.asarray(label[n], float) for n in ("left_hip", "right_hip") if n in label]
    if not shoulders:
        return []
    s = np.mean(shoulders, 0)
    if not hips:
        if len(shoulders) < 2 or not all(inside(p) for p in shoulders):
            return []
        across = shoulders[0] - shoulders[1]
        width = float(np.linalg.norm(across))
        tilt = float(np.degrees(np.arctan2(abs(across[1]), abs(across[0]) + 1e-9)))
        if width < 1.0 or inside(s + [0.0, TORSO_SHOULDER_WIDTHS * width]):
            return []
        return [{"side": side, "knee_seen": False, "hip_seen": False, "torso_lean_deg": None,
                 "upright": tilt <= 30.0, "seated": False, "standing": tilt <= 30.0} for side in ("left", "right")]
    hp = np.mean(hips, 0)
    torso = hp - s
    if float(np.linalg.norm(torso)) < 1.0:
        return []
    lean = float(np.degrees(np.arctan2(abs(torso[0]), torso[1])))
    out = []
    for side in ("left", "right"):
        hip = label.get(f"{side}_hip")
        if hip is None or not inside(hip):
            continue
        ankle = label.get(f"{side}_ankle")
        if ankle is not None and inside(ankle):
            continue
        if inside(np.asarray(hip, float) + LEG_REACH_TORSOS * torso):
            continue  # a leg continuing the torso would end in the picture: hidden, not cut off
        knee = label.get(f"{side}_knee")
        knee_seen = knee is not None and inside(knee)
        # how far the knee lies below the hip along the torso, in torso lengths
        seated = knee_seen and float((np.asarray(knee, float) - np.asarray(hip, float)) @ torso) / float(torso @ torso) < SEATED_KNEE_DROP
        out.append({"side": side, "knee_seen": knee_seen, "hip_seen": True, "torso_lean_deg": round(lean, 1),
                    "upright": lean <= 45.0, "seated": bool(seated), "standing": lean <= 45.0 and not seated})
    return out


# --- data ----------------------------------------------------------------------------------
@dataclass
class Label:
    ident: str
    points: dict  # name -> (x, y), labelled keypoints only, original photo pixels
    box: tuple  # x, y, w, h
    size: float


@dataclass
class Photo:
    dataset: str
    path: Path
    key: str  # unique name for the outputs
    hw: tuple[int, int]
    labels: list[Label] = field(default_factory=list)
    other_boxes: list[tuple] = field(default_factory=list)  # annotated people without keypoints
    complete_labels: bool = True
    truth3d: np.ndarray | None = None  # [12,3] metres, camera frame (3D frames)
    truth2d: np.ndarray | None = None  # [12,2] pixels
    focal: float | None = None  # the dataset camera's focal length, px (3D frames)
    build_key: str | None = None  # the name the photo is built under when labelled people share it


def built_name(photo: Photo) -> str:
    """The outputs' base name: one build per image, also when several people in it are scored."""
    return photo.build_key or photo.key


def data_root(data: Path) -> Path:
    for cand in (data, data / "tests" / "data", data / "data"):
        if any((cand / d).is_dir() for d in ("coco", "mpi_inf_3dhp", *EXTRA_3D_SETS.values())):
            return cand
    raise SystemExit(f"error: {data} holds none of the samples (coco/, mpi_inf_3dhp/, humanm3_demo/, ...)")


def load_3dhp(root: Path) -> list[Photo]:
    d = root / "mpi_inf_3dhp"
    photos = []
    cameras = {}
    for pkl in ("cameras_test.pkl", "cameras_train.pkl"):
        if (d / pkl).is_file():
            import pickle

            with open(d / pkl, "rb") as fh:
                cameras.update(pickle.load(fh))  # the dataset's own files, from mmpose's tests/data
    for npz in ("test_3dhp_test.npz", "test_3dhp_train.npz"):
        if not (d / npz).is_file():
            continue
        z = np.load(d / npz)
        for i, name in enumerate(z["imgname"]):
            path = d / str(name)
            if not path.is_file():
                continue
            s = np.asarray(z["S"][i, :, :3], np.float64)
            part = np.asarray(z["part"][i, :, :2], np.float64)
            lo, hi = part.min(0), part.max(0)
            box = (float(lo[0]), float(lo[1]), float(hi[0] - lo[0]), float(hi[1] - lo[1]))
            cam = cameras.get(path.stem.rsplit("_", 1)[0], {}).get("f")
            photos.append(Photo("mpi_inf_3dhp", path, f"mpi_inf_3dhp__{path.stem}", _hw(path),
                                [Label("1", {n: part[k] for n, k in zip(LIMB_JOINTS, MPI3DHP_LIMB_INDEX)},
                                       box, box_size(box))],
                                truth3d=s[list(MPI3DHP_LIMB_INDEX)], truth2d=part[list(MPI3DHP_LIMB_INDEX)],
                                focal=None if cam is None else float(np.mean(cam))))
    return photos


def _plain_unpickler(fh):
    """An unpickler for a third-party file that may hold only builtins and numpy arrays."""
    import pickle

    allowed = {("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
               ("numpy.core.multiarray", "scalar"), ("numpy._core.multiarray", "scalar"),
               ("numpy", "ndarray"), ("numpy", "dtype")}

    class Plain(pickle.Unpickler):
        def find_class(self, module, name):
            if (module, name) not in allowed:
                raise pickle.UnpicklingError(f"refused: {module}.{name}")
            return super().find_class(module, name)

    return Plain(fh)


def _label_from_3d(xyz: np.ndarray, uv_all: np.ndarray, limb_index) -> tuple[Label, np.ndarray]:
    """A labelled person from 3D joints only: its 2D points are the limb joints projected with the
    dataset's camera (``uv_all``: every joint it has, projected), its box spans all of them."""
    lo, hi = uv_all.min(0), uv_all.max(0)
    box = (float(lo[0]), float(lo[1]), float(hi[0] - lo[0]), float(hi[1] - lo[1]))
    uv = uv_all[list(limb_index)]
    return Label("1", {n: tuple(map(float, p)) for n, p in zip(LIMB_JOINTS, uv)}, box, box_size(box)), uv


# Human-M3's basketball1 sequence, its camera_1 (the one SMPLify-3D's demo frame is from): the
# intrinsics its datasets/demo.py gives; the demo's pose3d is already in this camera's frame
HUMANM3_INTRINSICS = {"basketball1": ((1208.95178, 0.0, 1012.43334), (0.0, 1209.42656, 762.148531), (0.0, 0.0, 1.0))}


def load_humanm3(root: Path) -> list[Photo]:
    """Human-M3's frame in guidodumont/SMPLify-3D's ``data/demo``: one photo, a 3D label per
    person (``data.pkl``: a list of dicts with ``pose3d`` [15,3] metres, camera frame). Every
    labelled person is a 3D frame of its own; the photo is built once."""
    d = root / EXTRA_3D_SETS["humanm3"]
    if not (d / "data.pkl").is_file():
        return []
    with open(d / "data.pkl", "rb") as fh:
        items = _plain_unpickler(fh).load()  # a list of dicts of strings and numpy arrays
    photos = []
    for it in items:
        path = d / str(it["img_file"])
        k = HUMANM3_INTRINSICS.get(str(it["sequence"]))
        if not path.is_file() or k is None:
            continue
        xyz = np.asarray(it["pose3d"], np.float64).reshape(15, 3)
        label, uv = _label_from_3d(xyz, project(xyz, k), HUMANM3_LIMB_INDEX)
        label.ident = str(it["tracking_id"])
        build_key = f"humanm3__{it['sequence']}_{it['time']}"
        photos.append(Photo("humanm3", path, f"{build_key}_person{it['tracking_id']}", _hw(path), [label],
                            truth3d=xyz[list(HUMANM3_LIMB_INDEX)], truth2d=uv,
                            focal=float(np.mean([k[0][0], k[1][1]])), build_key=build_key))
    return photos


# simon-schaefer/vhop's data/test/samples: sample_32 and sample_33 are the frames right after
# sample_31 (the same pose within 0.04 rad), left out so that one pose does not count three times
ZJU_FRAMES = ("sample", "sample_31")


def load_zju_mocap(root: Path) -> list[Photo]:
    """ZJU-MoCap frames as vhop's preprocess_zju.py saved them (``<name>.npz`` beside
    ``<name>.jpg``): ``joints_3d_wo_translation`` [45,3] (SMPL's joints first) in the body frame,
    ``T_C_B`` [4,4] body to camera, ``intrinsics`` [3,3] and ``distortion`` [1,5] (OpenCV's)."""
    d = root / EXTRA_3D_SETS["zju_mocap"]
    photos = []
    for name in ZJU_FRAMES:
        path, npz = d / f"{name}.jpg", d / f"{name}.npz"
        if not (path.is_file() and npz.is_file()):
            continue
        import cv2

        with np.load(npz) as z:
            t = np.asarray(z["T_C_B"], np.float64)
            k = np.asarray(z["intrinsics"], np.float64)
            dist = np.asarray(z["distortion"], np.float64).ravel()
            xyz = np.asarray(z["joints_3d_wo_translation"], np.float64)[:24] @ t[:3, :3].T + t[:3, 3]
        # the photo is not undistorted: its labels are the joints projected through the lens
        uv_all = cv2.projectPoints(xyz, np.zeros(3), np.zeros(3), k, dist)[0].reshape(-1, 2)
        label, uv = _label_from_3d(xyz, uv_all, SMPL_LIMB_INDEX)
        photos.append(Photo("zju_mocap", path, f"zju_mocap__{name}", _hw(path), [label],
                            truth3d=xyz[list(SMPL_LIMB_INDEX)], truth2d=uv,
                            focal=float(np.mean([k[0, 0], k[1, 1]]))))
    return photos


def turned(photo: Photo, folder: Path) -> Photo:
    """``photo`` turned a quarter clockwise (written into ``folder``), its labels with it: the
    camera held on its side, the person lying across the picture. The 3D truth turns about the
    optical axis alike (PA-MPJPE does not see the turn; the root's distance does)."""
    import cv2

    h, w = photo.hw
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{photo.key}.turned{photo.path.suffix}"
    if not path.is_file():
        image = cv2.imread(str(photo.path), cv2.IMREAD_UNCHANGED)
        if image is None:
            raise SystemExit(f"error: cannot read {photo.path}")
        cv2.imwrite(str(path), cv2.rotate(image, cv2.ROTATE_90_CLOCKWISE))

    def pt(x, y):  # a pixel of the photo -> the turned photo's
        return (h - 1 - float(y), float(x))

    def box(b):
        x, y, bw, bh = b
        return (h - 1 - float(y) - float(bh), float(x), float(bh), float(bw))

    labels = [Label(lb.ident, {n: pt(*p) for n, p in lb.points.items()}, box(lb.box), lb.size) for lb in photo.labels]
    turn = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # X' = -Y, Y' = X
    return Photo(photo.dataset, path, f"{photo.key}__turned", (w, h), labels, [box(b) for b in photo.other_boxes],
                 photo.complete_labels,
                 None if photo.truth3d is None else photo.truth3d @ turn.T,
                 None if photo.truth2d is None else np.array([pt(*p) for p in photo.truth2d]),
                 photo.focal, None if photo.build_key is None else f"{photo.build_key}__turned")


# 3D sets beyond mmpose's samples: set name -> folder under --data (see the docstring)
EXTRA_3D_SETS = {"humanm3": "humanm3_demo", "zju_mocap": "zju_mocap"}
SETS_3D = ("mpi_inf_3dhp", *EXTRA_3D_SETS)
_LOADERS_3D = {"mpi_inf_3dhp": load_3dhp, "humanm3": load_humanm3, "zju_mocap": load_zju_mocap}
DEFAULT_SETS = ("mpi_inf_3dhp", "coco", "crowdpose", "mhp", "humanart", "posetrack18")


def _hw(path: Path) -> tuple[int, int]:
    import cv2

    im = cv2.imread(str(path), cv2.IMREAD_UNCHANGED)
    if im is None:
        raise SystemExit(f"error: cannot read {path}")
    return int(im.shape[0]), int(im.shape[1])


def load_coco_style(root: Path, dataset: str, ann_file: str, image_dir: str, names_map=None,
                    complete: bool = True, file_name=None, art_filter=None) -> list[Photo]:
    """Photos of a COCO-format keypoint file; ``names_map`` renames the dataset's keypoints."""
    f = root / ann_file
    if not f.is_file():
        return []
    d = json.loads(f.read_text())
    kp_names = d["categories"][0]["keypoints"]
    ours = [(names_map or {}).get(n, n) for n in kp_names]
    photos = {}
    for im in d["images"]:
        rel = file_name(im["file_name"]) if file_name else im["file_name"]
        path = root / image_dir / rel
        if not path.is_file():
            continue
        ds = art_filter(rel) if art_filter else dataset
        photos[im["id"]] = Photo(ds, path, f"{ds}__{rel.replace('/', '__').rsplit('.', 1)[0]}",
                                 (int(im["height"]), int(im["width"])), complete_labels=complete)
    for a in d["annotations"]:
        p = photos.get(a["image_id"])
        if p is None:
            continue
        kp = np.asarray(a.get("keypoints") or [], np.float64).reshape(-1, 3)
        pts = {n: (float(x), float(y)) for n, (x, y, v) in zip(ours, kp) if v > 0 and n in SCORED_NAMES}
        labelled = int((kp[:, 2] > 0).sum()) if len(kp) else 0
        box = tuple(float(v) for v in a["bbox"])
        if a.get("iscrowd") or labelled < MIN_LABELLED:
            p.other_boxes.append(box)
            continue
        p.labels.append(Label(str(a["id"]), pts, box, box_size(box)))
    return list(photos.values())


def load_2d_sets(root: Path) -> list[Photo]:
    photos = []
    photos += load_coco_style(root, "coco", "coco/test_coco.json", "coco")
    photos += load_coco_style(root, "crowdpose", "crowdpose/test_crowdpose.json", "crowdpose")
    photos += load_coco_style(root, "mhp", "mhp/test_mhp.json", "mhp", names_map=_MPII_NAMES)
    photos += load_coco_style(
        root, "humanart", "humanart/test_humanart.json", "humanart",
        file_name=lambda n: n.split("images/", 1)[1],
        art_filter=lambda rel: "humanart" if rel.startswith("real_human/") else "humanart-art")
    photos += load_coco_style(root, "posetrack18", "posetrack18/annotations/test_posetrack18_val.json",
                              "posetrack18", complete=False)
    return [p for p in photos if p.labels]


# --- the product: build through the CLI ----------------------------------------------------
def cli_path(explicit: str | None) -> str:
    if explicit:
        return explicit
    here = Path(sys.executable).parent / "sapiens-blender"
    return str(here) if here.exists() else (shutil.which("sapiens-blender") or "sapiens-blender")


class SharedServer:
    """``sapiens-blender serve`` for the run (its ready line gives the port)."""

    def __init__(self, cli: str, log: Path):
        self.token = secrets.token_hex(16)
        self.ready = log.with_suffix(".ready")
        self._log = open(log, "w")
        self._out = open(self.ready, "w")
        self.proc = subprocess.Popen([cli, "serve"], stdout=self._out, stderr=self._log,
                                     env={**os.environ, "SAPIENS_TOKEN": self.token})
        deadline = time.monotonic() + 180
        self.url = None
        while time.monotonic() < deadline and self.proc.poll() is None:
            text = self.ready.read_text().strip()
            if text:
                info = json.loads(text.splitlines()[0])
                self.url = f"http://{info['host']}:{info['port']}"
                break
            time.sleep(0.2)
        if self.url is None:
            self.stop()
            raise SystemExit(f"error: the inference server did not start (see {log})")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()  # serve forwards SIGTERM to its server
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._log.close()
        self._out.close()


def build(photo: Photo, out: Path, cli: str, server: tuple[str, str] | None, reuse: bool) -> dict:
    """Run the product on one photo; the files it wrote and how it went (``<key>.build.json``)."""
    base = out / built_name(photo)
    files = {"joints": base.with_suffix(".joints.json"), "maps": base.with_suffix(".npz"),
             "report": base.with_suffix(".report.json"), "log": base.with_suffix(".log")}
    status = base.with_suffix(".build.json")
    glb = base.with_suffix(".glb")
    if reuse and status.is_file():
        return {**json.loads(status.read_text()), "files": files, "reused": True}
    for f in (*files.values(), glb, status):
        f.unlink(missing_ok=True)
    cmd = [cli, "build", str(photo.path), "--body", "-o", str(glb), "--save-joints", str(files["joints"]),
           "--save-maps", str(files["maps"]), "--report", str(files["report"])]
    if server:
        cmd += ["--server", server[0], "--token", server[1]]
    t0 = time.perf_counter()
    run = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - t0
    files["log"].write_text(run.stdout + run.stderr)
    glb.unlink(missing_ok=True)  # not scored; keeps the output folder small
    error = ""
    if run.returncode != 0:
        lines = [ln for ln in (run.stdout + run.stderr).splitlines() if ln.strip()]
        error = next((ln for ln in reversed(lines) if "error" in ln.lower()), lines[-1] if lines else "")
        if server:
            error = error.replace(server[1], "TOKEN")
    result = {"rc": run.returncode, "seconds": round(seconds, 2), "error": error}
    status.write_text(json.dumps(result))
    return {**result, "files": files, "reused": False}


def read_outputs(photo: Photo, built: dict) -> dict:
    """The fitted bodies (3D joints, projected to the photo's pixels) and the backend's people
    (their 2D keypoints), from the joints file and the maps."""
    files = built["files"]
    bodies, backend, k, scale, image, k3d, shapes = [], [], None, (1.0, 1.0), None, None, {}
    if files["maps"].is_file():
        with np.load(files["maps"]) as m:
            image = m["image"]
            if "fit_phenotypes" in m.files and "fit_person_ids" in m.files:  # the fitted shapes
                shapes = {int(i): [float(x) for x in ph] for i, ph in zip(m["fit_person_ids"], m["fit_phenotypes"])}
            k = np.asarray(m["intrinsics"], np.float64)
            kps = np.asarray(m["keypoints"], np.float64)
            if "keypoints_3d" in m.files:
                k3d = np.asarray(m["keypoints_3d"], np.float64)
        hm, wm = image.shape[:2]
        scale = (photo.hw[1] / wm, photo.hw[0] / hm)
        for pid, row in enumerate(kps, start=1):
            pts = {n: (row[i, 0] * scale[0], row[i, 1] * scale[1])
                   for n, i in GOLIATH_INDEX.items() if row[i, 2] > 0}
            person = {"id": pid, "points": pts}
            if k3d is not None and len(k3d) >= pid:
                # the 3D the fit was given (hips at 0, metres): the floor the fit must clear
                xyz = k3d[pid - 1, [GOLIATH_INDEX[n] for n in LIMB_JOINTS], :3]
                if np.isfinite(xyz).all():
                    person["joints3d"] = xyz
            backend.append(person)
    if files["joints"].is_file() and k is not None:
        for person in json.loads(files["joints"].read_text()).get("people", []):
            joints = {n: np.asarray(v["xyz"], np.float64) for n, v in person["joints"].items()}
            names = [n for n in joints if n in SCORED_NAMES]
            uv = project(np.array([joints[n] for n in names]), k) * np.array(scale)
            bodies.append({"id": person["id"], "joints": joints, "phenotypes": shapes.get(int(person["id"])),
                           "estimated": sorted(n for n, v in person["joints"].items()
                                               if v.get("estimated") and n in SCORED_NAMES),
                           "points": dict(zip(names, map(tuple, uv)))})
    # the maps' camera in the photo's pixels
    k_photo = None if k is None else np.diag([scale[0], scale[1], 1.0]) @ k
    return {"bodies": bodies, "backend": backend, "image": image, "intrinsics": k_photo}


# --- MediaPipe's world landmarks (the backend does not keep them) ------------------------------
class WorldLandmarks:
    """One MediaPipe Holistic pass, with the offline backend's settings."""

    def __init__(self):
        from mediapipe.python.solutions import holistic

        self.graph = holistic.Holistic(static_image_mode=True, model_complexity=1,
                                       enable_segmentation=True, refine_face_landmarks=False)
        self.graph.process(np.full((64, 64, 3), 127, np.uint8))  # as the backend's load()

    def __call__(self, rgb: np.ndarray):
        """(world [33,3] m, image [33,3] px + visibility) or None when no person is found."""
        res = self.graph.process(np.ascontiguousarray(rgb))
        if res.pose_landmarks is None or res.pose_world_landmarks is None:
            return None
        h, w = rgb.shape[:2]
        world = np.array([(p.x, p.y, p.z) for p in res.pose_world_landmarks.landmark], np.float64)
        image = np.array([(p.x * w, p.y * h, p.visibility) for p in res.pose_landmarks.landmark], np.float64)
        return world, image

    def close(self):
        self.graph.close()


# --- scoring one photo ---------------------------------------------------------------------
def _r(x, nd=1):
    return None if x is None or not np.isfinite(x) else round(float(x), nd)


def _on_person(points: dict, box, grow: float = 0.2) -> bool:
    """Whether the centre of a person's 2D ``points`` lies in ``box`` (x, y, w, h) grown by
    ``grow`` of its size on every side."""
    if not points:
        return False
    c = np.mean(np.array(list(points.values()), np.float64), 0)
    x, y, w, h = box
    return (x - grow * w <= c[0] <= x + (1 + grow) * w) and (y - grow * h <= c[1] <= y + (1 + grow) * h)


def nearest(people: list[dict], label: Label) -> tuple[dict | None, float]:
    """(the person of ``people`` whose 2D points lie nearest ``label``, their error), or (None, inf)."""
    errs = [person_error(p["points"], label.points, label.size)[0] for p in people]
    return (people[int(np.argmin(errs))], min(errs)) if people else (None, float("inf"))


def legs_over_45(legs: list[dict]) -> int:
    """How many of ``legs`` (legs_out_of_frame's, scored on a body) bend over 45 degrees at the
    hip or the knee: the target's failures."""
    return sum(max(abs(leg["hip_flexion_deg"] or 0.0), abs(leg["knee_flexion_deg"] or 0.0)) > 45 for leg in legs)


def backend_on_label(out: dict, label: Label) -> dict | None:
    """The backend person nearest ``label`` in 2D, when they stand on it and the maps give their
    own keypoints_3d (the fit's input), else None."""
    near = nearest(out["backend"], label)[0]
    return near if near is not None and "joints3d" in near and _on_person(near["points"], label.box) else None


def score_3d(photo: Photo, out: dict, mp: WorldLandmarks | None) -> dict:
    """One labelled person per frame: the body nearest the label in 2D is scored when it stands
    on the person (its centre inside the labelled joints' box, grown by 20 %), whatever its 2D
    error (reported beside); no such body is a miss. MediaPipe's world landmarks alike."""
    label = photo.labels[0]
    truth = photo.truth3d
    rec = {"bodies": len(out["bodies"]), "backend_people": len(out["backend"])}
    best, best_err = nearest(out["bodies"], label)
    rec["fit_2d_pct"] = _r(100 * best_err)
    if best is not None and _on_person(best["points"], label.box):
        pred = np.array([best["joints"][n] for n in LIMB_JOINTS])
        rec.update(fit_pa_mm=_r(1000 * pa_mpjpe(pred, truth)),
                   fit_rr_mm=_r(1000 * root_relative_mpjpe(pred, truth)),
                   fit_root_mm=_r(1000 * np.linalg.norm(pred[list(HIPS)].mean(0) - truth[list(HIPS)].mean(0))),
                   fit_body=best["id"])
    else:
        rec["fit_miss"] = "no body built" if best is None else "no body on the person"
    near = backend_on_label(out, label)
    if near is not None:
        rec.update(input_pa_mm=_r(1000 * pa_mpjpe(near["joints3d"], truth)),
                   input_rr_mm=_r(1000 * root_relative_mpjpe(near["joints3d"], truth)))
    else:
        rec["input_miss"] = "no keypoints_3d on the person"
    if mp is not None:
        for tag, rgb in (("mp", out["image"]), ("mp_full", None)):
            if rgb is None:
                if tag == "mp":
                    rec["mp_miss"] = "no maps"
                    continue
                import cv2

                rgb = cv2.cvtColor(cv2.imread(str(photo.path)), cv2.COLOR_BGR2RGB)
            got = mp(rgb)
            if got is None:
                rec[f"{tag}_miss"] = "no person found"
                continue
            world, image = got
            s = photo.hw[1] / rgb.shape[1], photo.hw[0] / rgb.shape[0]
            pts = {n: (image[i, 0] * s[0], image[i, 1] * s[1]) for n, i in MEDIAPIPE_INDEX.items()}
            rec[f"{tag}_2d_pct"] = _r(100 * person_error(pts, label.points, label.size)[0])
            if tag == "mp" and out["backend"]:
                kp = out["backend"][0]["points"]
                rec["mp_is_backend_person1"] = bool(max(np.hypot(*(np.subtract(kp[n], pts[n])))
                                                        for n in LIMB_JOINTS if n in kp) < 1.0)
            if not _on_person(pts, label.box):
                rec[f"{tag}_miss"] = "found someone else"
                continue
            pred = world[[MEDIAPIPE_INDEX[n] for n in LIMB_JOINTS]]
            rec[f"{tag}_pa_mm"] = _r(1000 * pa_mpjpe(pred, truth))
            rec[f"{tag}_rr_mm"] = _r(1000 * root_relative_mpjpe(pred, truth))
    return rec


def _inside_any(points: dict, boxes: list) -> bool:
    if not points:
        return False
    c = np.mean(np.array(list(points.values())), 0)
    return any(b[0] <= c[0] <= b[0] + b[2] and b[1] <= c[1] <= b[1] + b[3] for b in boxes)


def score_2d(photo: Photo, out: dict) -> dict:
    labels, sizes = [lb.points for lb in photo.labels], [lb.size for lb in photo.labels]
    rec = {"labelled": len(labels), "bodies": len(out["bodies"]), "backend_people": len(out["backend"]),
           "complete_labels": photo.complete_labels}
    people = []
    for source in ("bodies", "backend"):
        cost = error_matrix([p["points"] for p in out[source]], labels, sizes)
        pairs = match_people(cost)
        rec[f"{source}_recalled"] = len(pairs)
        rec[f"{source}_matches"] = [{"person": out[source][i]["id"], "label": photo.labels[j].ident,
                                     "err_pct": _r(100 * c)} for i, j, c in pairs]
        matched = {i for i, _, _ in pairs}
        rec[f"{source}_unmatched"] = [
            {"person": p["id"],
             "nearest_label_err_pct": _r(100 * float(cost[i].min())) if cost.shape[1] else None,
             "inside_an_annotated_box": _inside_any(p["points"], [lb.box for lb in photo.labels] + photo.other_boxes)}
            for i, p in enumerate(out[source]) if i not in matched]
        if source == "bodies":
            people = match_people(cost, LEG_MATCH_FRACTION)
    legs = []
    for i, j, c in people:
        body = out["bodies"][i]
        for leg in legs_out_of_frame(photo.labels[j].points, photo.hw):
            if all(f"{leg['side']}_{n}" in body["joints"] for n in ("hip", "knee", "ankle")):
                hip, knee = leg_flexion(body["joints"], leg["side"])
                legs.append({**leg, "label": photo.labels[j].ident, "body": body["id"], "body_err_pct": _r(100 * c),
                             "hip_flexion_deg": _r(hip), "knee_flexion_deg": _r(knee),
                             "estimated": [n for n in body["estimated"]
                                           if n in (f"{leg['side']}_hip", f"{leg['side']}_knee", f"{leg['side']}_ankle")]})
    rec["legs_out_of_frame"] = legs
    return rec


# --- overlays -------------------------------------------------------------------------------
_BONES = (("left_shoulder", "right_shoulder"), ("left_hip", "right_hip"), ("left_shoulder", "left_hip"),
          ("right_shoulder", "right_hip"), ("left_shoulder", "left_elbow"), ("left_elbow", "left_wrist"),
          ("right_shoulder", "right_elbow"), ("right_elbow", "right_wrist"), ("left_hip", "left_knee"),
          ("left_knee", "left_ankle"), ("right_hip", "right_knee"), ("right_knee", "right_ankle"))


def draw(photo: Photo, out: dict, path: Path) -> None:
    """Labels (green), fitted bodies (red, with their id) and the backend's keypoints (blue)."""
    import cv2

    im = cv2.imread(str(photo.path))
    t = max(1, round(max(photo.hw) / 500))
    groups = [(lb.points, (0, 200, 0), lb.ident[-4:]) for lb in photo.labels]
    groups += [(b["points"], (0, 0, 255), f"#{b['id']}") for b in out["bodies"]]
    groups += [(b["points"], (255, 80, 0), f"mp{b['id']}") for b in out["backend"]]
    for pts, colour, tag in groups:
        for a, b in _BONES:
            if a in pts and b in pts:
                pa = tuple(int(round(v)) for v in pts[a])
                pb = tuple(int(round(v)) for v in pts[b])
                cv2.line(im, pa, pb, colour, t, cv2.LINE_AA)
        for n, p in pts.items():
            cv2.circle(im, tuple(int(round(v)) for v in p), 2 * t, colour, -1, cv2.LINE_AA)
        if pts:
            c = np.array(list(pts.values())).min(0)
            cv2.putText(im, tag, (int(c[0]), int(c[1]) - 4), cv2.FONT_HERSHEY_SIMPLEX, 0.4 * t, colour, t)
    cv2.imwrite(str(path), im)


# --- tables --------------------------------------------------------------------------------
def _f(x, nd=1, unit=""):
    if x is None:
        return "-"
    return f"{x:.{nd}f}{unit}" if isinstance(x, float) else f"{x}{unit}"


def _mean(xs):
    xs = [x for x in xs if x is not None]
    return round(float(np.mean(xs)), 1) if xs else None


def _agg_3d(r3: list[dict]) -> dict:
    both = [r["score"] for r in r3 if r["score"].get("fit_pa_mm") is not None
            and r["score"].get("mp_pa_mm") is not None]
    return {
        "frames": len(r3),
        "fit_found": sum(r["score"].get("fit_pa_mm") is not None for r in r3),
        "mp_found": sum(r["score"].get("mp_pa_mm") is not None for r in r3),
        "fit_pa_mean_mm": _mean([r["score"].get("fit_pa_mm") for r in r3]),
        "mp_pa_mean_mm": _mean([r["score"].get("mp_pa_mm") for r in r3]),
        "input_pa_mean_mm": _mean([r["score"].get("input_pa_mm") for r in r3]),
        "input_rr_mean_mm": _mean([r["score"].get("input_rr_mm") for r in r3]),
        "fit_below_input_every_frame": all(
            r["score"].get("fit_pa_mm") is not None and r["score"].get("input_pa_mm") is not None
            and r["score"]["fit_pa_mm"] < r["score"]["input_pa_mm"] for r in r3),
        "fit_rr_mean_mm": _mean([r["score"].get("fit_rr_mm") for r in r3]),
        "mp_rr_mean_mm": _mean([r["score"].get("mp_rr_mm") for r in r3]),
        "both_found": len(both),
        "fit_pa_mean_mm_where_both": _mean([s["fit_pa_mm"] for s in both]),
        "mp_pa_mean_mm_where_both": _mean([s["mp_pa_mm"] for s in both]),
    }


def tables(results: list[dict]) -> tuple[str, dict]:
    lines = []
    agg: dict = {}
    r3 = [r for r in results if r["dataset"] in SETS_3D]
    if r3:
        sets3 = list(dict.fromkeys(r["dataset"] for r in r3))
        lines += [f"### 3D frames ({', '.join(sets3)}): 12 limb joints, mm",
                  "", "| frame | bodies | fit PA-MPJPE | input keypoints_3d PA-MPJPE | MP world PA-MPJPE | "
                  "MP world (full-res photo) PA | fit root-rel MPJPE | input root-rel | MP world root-rel | "
                  "fit root position | fit 2D err | MP 2D err | build s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in r3:
            s = r["score"]
            fit = _f(s.get("fit_pa_mm")) if "fit_miss" not in s else f"miss ({s['fit_miss']})"
            mpv = _f(s.get("mp_pa_mm")) if "mp_miss" not in s else f"none ({s['mp_miss']})"
            mpf = _f(s.get("mp_full_pa_mm")) if "mp_full_miss" not in s else f"none ({s['mp_full_miss']})"
            inp = _f(s.get("input_pa_mm")) if "input_miss" not in s else f"none ({s['input_miss']})"
            lines.append(f"| {r['key'].split('__', 1)[-1]} | {s['bodies']} | {fit} | {inp} | {mpv} | {mpf} | "
                         f"{_f(s.get('fit_rr_mm'))} | {_f(s.get('input_rr_mm'))} | {_f(s.get('mp_rr_mm'))} | {_f(s.get('fit_root_mm'))} | "
                         f"{_f(s.get('fit_2d_pct'), 1, ' %')} | {_f(s.get('mp_2d_pct'), 1, ' %')} | "
                         f"{_f(r['build'].get('seconds'))} |")
        agg["3d"] = _agg_3d(r3)
        if len(sets3) > 1:
            agg["3d_by_set"] = {name: _agg_3d([r for r in r3 if r["dataset"] == name]) for name in sets3}
        a = agg["3d"]
        lines.append(f"| **mean** | | {_f(a['fit_pa_mean_mm'])} ({a['fit_found']}/{a['frames']}) | "
                     f"{_f(a['input_pa_mean_mm'])} | "
                     f"{_f(a['mp_pa_mean_mm'])} ({a['mp_found']}/{a['frames']}) | | {_f(a['fit_rr_mean_mm'])} | "
                     f"{_f(a['input_rr_mean_mm'])} | {_f(a['mp_rr_mean_mm'])} | | | | |")
        lines.append(f"| **mean, frames both found** ({a['both_found']}) | | {_f(a['fit_pa_mean_mm_where_both'])} | | "
                     f"{_f(a['mp_pa_mean_mm_where_both'])} | | | | | | | | |")
        for name, a in agg.get("3d_by_set", {}).items():
            lines.append(f"| mean, {name} | | {_f(a['fit_pa_mean_mm'])} ({a['fit_found']}/{a['frames']}) | "
                         f"{_f(a['input_pa_mean_mm'])} | {_f(a['mp_pa_mean_mm'])} ({a['mp_found']}/{a['frames']}) | | "
                         f"{_f(a['fit_rr_mean_mm'])} | {_f(a['input_rr_mean_mm'])} | {_f(a['mp_rr_mean_mm'])} | | | | |")
        lines.append("")
    r2 = [r for r in results if r["dataset"] not in SETS_3D]
    if r2:
        lines += ["### 2D photos: people recalled within 10 % of the person's size (sqrt of box area)", "",
                  "| set | photo | labelled | backend people | bodies | recalled: bodies | recalled: backend | "
                  "2D err bodies % | 2D err backend % | bodies matching no label | build s |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in r2:
            s = r["score"]
            un = "; ".join(f"#{u['person']} (nearest {_f(u['nearest_label_err_pct'])} %"
                           f"{', in a box' if u['inside_an_annotated_box'] else ''})" for u in s["bodies_unmatched"])
            if un and not s["complete_labels"]:
                un += " [labels incomplete]"
            lines.append(
                f"| {r['dataset']} | {r['key'].split('__', 1)[1]} | {s['labelled']} | {s['backend_people']} | "
                f"{s['bodies']} | {s['bodies_recalled']} | {s['backend_recalled']} | "
                f"{_f(_mean([m['err_pct'] for m in s['bodies_matches']]))} | "
                f"{_f(_mean([m['err_pct'] for m in s['backend_matches']]))} | {un or '-'} | "
                f"{_f(r['build'].get('seconds'))} |")
        lines += ["", "| set | photos | labelled | backend people | bodies | recalled: bodies | recalled: backend | "
                  "2D err bodies % | 2D err backend % | bodies matching no label |", "|---|---|---|---|---|---|---|---|---|---|"]
        sets = list(dict.fromkeys(r["dataset"] for r in r2))
        agg["2d"] = {}
        real = [s for s in sets if s != "humanart-art"]
        for name, members in [(s, [s]) for s in sets] + [("all real photos", real)]:
            rs = [r["score"] for r in r2 if r["dataset"] in members]
            a = {"photos": len(rs), "labelled": sum(s["labelled"] for s in rs),
                 "backend_people": sum(s["backend_people"] for s in rs), "bodies": sum(s["bodies"] for s in rs),
                 "bodies_recalled": sum(s["bodies_recalled"] for s in rs),
                 "backend_recalled": sum(s["backend_recalled"] for s in rs),
                 "bodies_err_pct": _mean([m["err_pct"] for s in rs for m in s["bodies_matches"]]),
                 "backend_err_pct": _mean([m["err_pct"] for s in rs for m in s["backend_matches"]]),
                 "bodies_unmatched": sum(len(s["bodies_unmatched"]) for s in rs if s["complete_labels"]),
                 "bodies_unmatched_incomplete_labels": sum(len(s["bodies_unmatched"]) for s in rs
                                                           if not s["complete_labels"])}
            agg["2d"][name] = a
            extra = (f" (+{a['bodies_unmatched_incomplete_labels']} where labels are incomplete)"
                     if a["bodies_unmatched_incomplete_labels"] else "")
            lines.append(f"| {'**' + name + '**' if name == 'all real photos' else name} | {a['photos']} | "
                         f"{a['labelled']} | {a['backend_people']} | {a['bodies']} | "
                         f"{a['bodies_recalled']} ({_pct(a['bodies_recalled'], a['labelled'])}) | "
                         f"{a['backend_recalled']} ({_pct(a['backend_recalled'], a['labelled'])}) | "
                         f"{_f(a['bodies_err_pct'])} | {_f(a['backend_err_pct'])} | {a['bodies_unmatched']}{extra} |")
        lines.append("")
        legs = [(r, leg) for r in r2 for leg in r["score"]["legs_out_of_frame"]]
        lines += ["### Legs out of the frame (fitted body, degrees)", ""]
        if legs:
            lines += ["| set | photo | label | body (2D err %) | leg | hip seen | knee seen | torso lean | upright | "
                      "seated | hip flexion | knee flexion | leg joints estimated |",
                      "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
            for r, leg in legs:
                lines.append(f"| {r['dataset']} | {r['key'].split('__', 1)[1]} | {leg['label']} | #{leg['body']} "
                             f"({_f(leg['body_err_pct'])}) | "
                             f"{leg['side']} | {'yes' if leg['hip_seen'] else 'no'} | {'yes' if leg['knee_seen'] else 'no'} | "
                             f"{_f(leg['torso_lean_deg'])} | "
                             f"{'yes' if leg['upright'] else 'no'} | {'yes' if leg['seated'] else 'no'} | "
                             f"{_f(leg['hip_flexion_deg'])} | "
                             f"{_f(leg['knee_flexion_deg'])} | {', '.join(leg['estimated']) or '-'} |")
            up = [leg for _, leg in legs if leg["upright"]]
            st = [leg for _, leg in legs if leg["standing"]]
            agg["legs_out_of_frame"] = {
                "legs": len(legs), "upright": len(up), "upright_over_45_deg": legs_over_45(up), "standing": len(st),
                "max_hip_flexion_deg_standing": max((abs(leg["hip_flexion_deg"]) for leg in st), default=None),
                "max_knee_flexion_deg_standing": max((leg["knee_flexion_deg"] for leg in st), default=None),
                "standing_over_45_deg": legs_over_45(st)}
            a = agg["legs_out_of_frame"]
            lines.append(f"\n{a['legs']} legs, {a['upright']} of an upright torso ({a['upright_over_45_deg']} over 45 deg), "
                         f"{a['standing']} of them standing (not seated): max hip flexion "
                         f"{_f(a['max_hip_flexion_deg_standing'])}, max knee flexion {_f(a['max_knee_flexion_deg_standing'])}, "
                         f"{a['standing_over_45_deg']} over 45 deg")
        else:
            lines.append("(none among the matched people)")
        lines.append("")
    shapes = body_shapes(results)
    if shapes:
        agg["shapes"] = shapes
        lines += ["### Fitted body shapes (real photos, each body once)", "",
                  f"{shapes['bodies']} bodies: weight mean {shapes['weight_mean']:.2f} ({shapes['weight_over_0.8']} over 0.8, "
                  f"{shapes['weight_under_0.2']} under 0.2), muscle mean {shapes['muscle_mean']:.2f} "
                  f"(anny's phenotypes, 0-1; 0.5 is the average build)", ""]
    return "\n".join(lines), agg


def body_shapes(results: list[dict]) -> dict | None:
    """The fitted bodies' build over the real photos (each build's bodies once; the artworks
    apart): most real people are of middling weight, and a silhouette of loose clothing read as
    the body pushes it up (docs/body_fit.md, "Body shapes on real photos")."""
    seen, rows = set(), []
    for r in results:
        if r["dataset"] == "humanart-art" or r.get("build_name") in seen:
            continue
        seen.add(r.get("build_name"))
        rows += [p for p in r.get("bodies_phenotypes", {}).values() if p]
    if not rows:
        return None
    ph = np.array(rows, np.float64)  # gender, age, muscle, weight, height, proportions
    return {"bodies": len(ph), "weight_mean": round(float(ph[:, 3].mean()), 3),
            "weight_over_0.8": int((ph[:, 3] > 0.8).sum()), "weight_under_0.2": int((ph[:, 3] < 0.2).sum()),
            "muscle_mean": round(float(ph[:, 2].mean()), 3)}


def _pct(a, b):
    return f"{100 * a / b:.0f} %" if b else "-"


# --- main ----------------------------------------------------------------------------------
def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", required=True, type=Path, help="mmpose's tests/data samples (see above)")
    ap.add_argument("--out", type=Path, default=None, help="where the builds' files go (default: a temporary folder)")
    ap.add_argument("--json-out", type=Path, default=None, help="write every number as JSON")
    ap.add_argument("--sets", default=None,
                    help=f"comma-separated sets to score (default: {','.join(DEFAULT_SETS)}, and "
                         f"{', '.join(EXTRA_3D_SETS)} where their folders are under --data)")
    ap.add_argument("--cli", default=None, help="the sapiens-blender command (default: next to this Python)")
    ap.add_argument("--server", default=None, help="use this running server (URL) for every build")
    ap.add_argument("--token", default=None, help="its token (with --server)")
    ap.add_argument("--server-per-photo", action="store_true",
                    help="let each build start its own local server, as a lone `build` does")
    ap.add_argument("--reuse", action="store_true", help="score existing outputs in --out instead of building again")
    ap.add_argument("--draw", action="store_true", help="write an overlay PNG per photo into --out")
    ap.add_argument("--turned", action="store_true",
                    help="score every photo turned a quarter clockwise (written into --out/turned): "
                         "a camera held on its side, people lying across the picture")
    ap.add_argument("--focal-scales", default=None,
                    help="comma-separated factors, e.g. 0.6,0.8,1,1.25,1.6: also fit the 3D frames' maps again "
                         "at each times the assumed focal (real_focal.py)")
    args = ap.parse_args(argv)

    wanted = [s.strip() for s in (args.sets or "").split(",") if s.strip()]
    if any(s in RESERVED for s in wanted):
        print(f"error: {', '.join(RESERVED)} are reserved for an independent check", file=sys.stderr)
        return 2
    root = data_root(args.data)
    if not wanted:
        wanted = list(DEFAULT_SETS) + [s for s, folder in EXTRA_3D_SETS.items() if (root / folder).is_dir()]
    photos = [p for s in SETS_3D if s in wanted for p in _LOADERS_3D[s](root)] + \
        [p for p in load_2d_sets(root) if p.dataset.split("-")[0] in wanted]
    if not photos:
        print(f"error: no labelled photos under {root} for {wanted}", file=sys.stderr)
        return 1
    if args.out is None:
        import tempfile

        args.out = Path(tempfile.mkdtemp(prefix="bench_real_"))
    args.out.mkdir(parents=True, exist_ok=True)
    if args.turned:
        photos = [turned(p, args.out / "turned") for p in photos]
    cli = cli_path(args.cli)
    print(f"{len(photos)} photos from {root}; outputs in {args.out}", flush=True)

    shared = None
    server = (args.server, args.token or os.environ.get("SAPIENS_TOKEN", "")) if args.server else None
    needs_build = not (args.reuse and all((args.out / f"{built_name(p)}.build.json").is_file() for p in photos))
    if server is None and not args.server_per_photo and needs_build:
        shared = SharedServer(cli, args.out / "server.log")
        server = (shared.url, shared.token)
    results, builds = [], {}
    mp = None
    t_start = time.perf_counter()
    try:
        for n, photo in enumerate(photos, 1):
            # people labelled in one photo share its build
            built = builds.get(built_name(photo)) or build(photo, args.out, cli, server, args.reuse)
            builds[built_name(photo)] = built
            out = read_outputs(photo, built)
            if photo.truth3d is not None:
                mp = mp or WorldLandmarks()
                score = score_3d(photo, out, mp)
            else:
                score = score_2d(photo, out)
            if args.draw:
                draw(photo, out, args.out / f"{photo.key}.overlay.png")
            status = "ok" if built["rc"] == 0 else f"build failed: {built.get('error')}"
            print(f"[{n}/{len(photos)}] {photo.key}: {len(out['bodies'])} bodies, "
                  f"{len(out['backend'])} backend people, {status} ({_f(built.get('seconds'))} s)", flush=True)
            shown = photo.path.relative_to(root) if photo.path.is_relative_to(root) else photo.path  # --turned: in --out
            results.append({"dataset": photo.dataset, "key": photo.key, "photo": str(shown),
                            "build": {"rc": built["rc"], "seconds": built.get("seconds"),
                                      "error": built.get("error", ""), "reused": built.get("reused", False)},
                            "bodies_estimated_joints": {b["id"]: b["estimated"] for b in out["bodies"]},
                            "build_name": built_name(photo),
                            "bodies_phenotypes": {b["id"]: b["phenotypes"] for b in out["bodies"] if b.get("phenotypes")},
                            "score": score})
    finally:
        if shared is not None:
            shared.stop()
        if mp is not None:
            mp.close()
    table, agg = tables(results)
    elapsed = time.perf_counter() - t_start
    source = ""
    reports = sorted(args.out.glob("*.report.json"))
    if reports:
        source = json.loads(reports[0].read_text()).get("source", "")
    print()
    print(f"model: {source or 'default'}; {len(photos)} photos in {elapsed:.0f} s")
    print()
    print(table)
    focal = None
    if args.focal_scales:
        from real_focal import sweep

        focal_table, focal = sweep(photos, args.out, [float(c) for c in args.focal_scales.split(",")])
        print(f"\n### Focal sensitivity (3D frames' maps refitted; PA-MPJPE mm / 2D error)\n\n{focal_table}")
    if args.json_out:
        args.json_out.parent.mkdir(parents=True, exist_ok=True)
        args.json_out.write_text(json.dumps(
            {"command": " ".join([Path(sys.argv[0]).name] + (argv if argv is not None else sys.argv[1:])),
             "model": source, "seconds": round(elapsed, 1), "aggregate": agg, "photos": results, "focal": focal},
            indent=1, default=lambda o: o.tolist() if hasattr(o, "tolist") else str(o)))
        print(f"wrote {args.json_out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
