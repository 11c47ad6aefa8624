# SPDX-License-Identifier: GPL-3.0-or-later
"""The offline `mediapipe` backend on a real photo: the bundled astronaut, mirrored, rotated by
EXIF and downscaled. The photo bytes go through the server's own decoder (EXIF applied)."""

from __future__ import annotations

import io

import cv2
import numpy as np
import pytest
from PIL import Image

from inference_server.dataplane.base import MAP_OUTPUTS, OPTIONAL_OUTPUTS, AnalyzeOptions
from inference_server.backends.mediapipe_cpu import MediaPipeBackend
from inference_server.backends.mediapipe_landmarks import FACE_SHARED, FACE_TO_GOLIATH
from inference_server.processing.goliath import FLIP_PAIRS, KEYPOINT_INDEX, KEYPOINT_NAMES, PART_NAMES_SAPIENS2
from inference_server.processing.image_io import decode_image
from sapiens_blender.core.maps.canonical import Maps
from sapiens_blender.data import sample_photo_path

# The astronaut's outline (the person and her suit, not the helmet she holds), drawn by hand on
# the 512x512 photo with a 16-px grid overlay: (x, y) pixel vertices, clockwise from the hair top.
ASTRONAUT_OUTLINE = [
    (225, 15), (190, 22), (165, 45), (155, 70), (153, 95), (163, 118), (178, 135), (186, 152),
    (150, 156), (125, 172), (113, 192), (100, 214), (75, 235), (50, 270), (35, 320), (25, 380),
    (20, 440), (22, 511), (279, 511), (282, 460), (290, 425), (300, 400), (315, 380), (340, 360),
    (362, 348), (360, 310), (350, 280), (335, 262), (308, 245), (305, 210), (295, 180),
    (280, 165), (268, 150), (272, 128), (285, 110), (298, 85), (300, 60), (285, 35), (260, 20),
]
PHOTO_SIDE = 512
BODY = ("nose", "left_eye", "right_eye", "left_ear", "right_ear", "left_shoulder",
        "right_shoulder", "left_elbow", "right_elbow", "left_wrist", "right_wrist", "left_hip",
        "right_hip")


def _jpeg(img: Image.Image, **save) -> bytes:
    buf = io.BytesIO()
    img.save(buf, format="JPEG", quality=95, **save)
    return buf.getvalue()


def _variant_bytes(name: str) -> bytes:
    photo = Image.open(sample_photo_path()).convert("RGB")
    if name == "original":
        return sample_photo_path().read_bytes()
    if name == "mirrored":
        return _jpeg(photo.transpose(Image.Transpose.FLIP_LEFT_RIGHT))
    if name == "exif_rotated":
        # Stored turned 90 deg counter-clockwise; Orientation 6 tells viewers to turn it back.
        exif = Image.Exif()
        exif[0x0112] = 6
        return _jpeg(photo.transpose(Image.Transpose.ROTATE_90), exif=exif.tobytes())
    if name == "downscaled":
        return _jpeg(photo.resize((PHOTO_SIDE // 2, PHOTO_SIDE // 2), Image.Resampling.LANCZOS))
    raise KeyError(name)


def _outline_mask(name: str, hw: tuple[int, int]) -> np.ndarray:
    pts = np.array(ASTRONAUT_OUTLINE, np.float64)
    if name == "mirrored":
        pts[:, 0] = PHOTO_SIDE - pts[:, 0]
    pts *= np.array([hw[1], hw[0]]) / PHOTO_SIDE
    out = np.zeros(hw, np.uint8)
    cv2.fillPoly(out, [np.round(pts).astype(np.int32)], 1)
    return out.astype(bool)


@pytest.fixture(scope="module")
def backend():
    b = MediaPipeBackend()
    b.load()
    yield b
    b.unload()


@pytest.fixture(scope="module")
def results(backend):
    cache = {}

    def get(name):
        if name not in cache:
            image = decode_image(_variant_bytes(name))
            cache[name] = backend.analyze(image, AnalyzeOptions())
        return cache[name]

    return get


def _kp(maps, name):
    return maps["keypoints"][0, KEYPOINT_INDEX[name]]


def test_exif_variant_decodes_upright():
    upright = decode_image(_variant_bytes("original")).astype(np.int16)
    rotated = decode_image(_variant_bytes("exif_rotated")).astype(np.int16)
    assert rotated.shape == upright.shape
    assert np.abs(rotated - upright).mean() < 4  # JPEG noise only


@pytest.mark.parametrize("variant", ["original", "mirrored", "exif_rotated", "downscaled"])
def test_mask_covers_the_person(results, variant):
    maps = results(variant)
    mask = maps["mask"]
    side = PHOTO_SIDE // 2 if variant == "downscaled" else PHOTO_SIDE
    assert mask.shape == (side, side)
    assert sorted(np.unique(mask).tolist()) == [0, 1], "one person, instance id 1"
    truth = _outline_mask(variant, mask.shape)
    found = mask > 0
    iou = (truth & found).sum() / (truth | found).sum()
    assert iou >= 0.8, f"{variant}: IoU {iou:.3f} against the hand-drawn outline"


@pytest.mark.parametrize("variant", ["original", "mirrored", "exif_rotated", "downscaled"])
def test_skeleton_is_anatomically_ordered(results, variant):
    maps = results(variant)
    assert maps["keypoints"].shape == (1, 308, 3)
    y = {n: _kp(maps, n)[1] for n in KEYPOINT_INDEX}
    s = {n: _kp(maps, n)[2] for n in KEYPOINT_INDEX}
    for head in ("nose", "left_eye", "right_eye", "left_ear", "right_ear"):
        assert s[head] > 0.5
        for shoulder in ("left_shoulder", "right_shoulder"):
            assert s[shoulder] > 0.5 and y[head] < y[shoulder]
    for side in ("left", "right"):
        if s[f"{side}_hip"] > 0.5:  # "where visible": the hips sit at the photo's bottom edge
            assert y[f"{side}_shoulder"] < y[f"{side}_hip"]
    assert y["left_eye"] < y["nose"] < y["center_of_cupid_bow"] < y["tip_of_chin"]
    # She faces the camera: her left shoulder, eye and mouth corner are on the image's right.
    for left, right in (("left_shoulder", "right_shoulder"), ("left_eye", "right_eye"),
                        ("l_outer_corner_of_mouth", "r_outer_corner_of_mouth")):
        assert _kp(maps, left)[0] > _kp(maps, right)[0], (variant, left)
    # Slots MediaPipe has no counterpart for stay empty.
    assert s["left_olecranon"] == 0 and s["l_center_of_iris"] == 0


def test_mirrored_photo_shows_a_mirrored_person(results):
    """The mirrored photo shows a person whose LEFT is the original's RIGHT: each keypoint of the
    mirrored person must land at the mirror image of its flip partner in the original."""
    orig, mirr = results("original"), results("mirrored")
    ko, km = orig["keypoints"][0], mirr["keypoints"][0]
    width = orig["image"].shape[1]
    face_slots = {KEYPOINT_INDEX[n] for n in FACE_TO_GOLIATH.values()} | {
        KEYPOINT_INDEX[n] for n in FACE_SHARED}
    checked = {"body": 0, "face": 0}
    for a, b in FLIP_PAIRS:
        for i, j in ((a, b), (b, a)):
            if ko[i, 2] < 0.8 or km[j, 2] < 0.8:  # occluded joints are guesses, not measurements
                continue
            kind = "face" if i in face_slots else "body"
            # Face mesh points are precise; body landmarks come from a 256-px pose crop placed
            # by the detector's tiles and refined, so the two crops differ (shoulders inside the
            # suit by up to ~7 % of the width). Handedness: the flip partner's mirror is nearer
            # than the same joint's mirror.
            tol = (0.01 if kind == "face" else 0.08) * width
            mirrored = np.array([width - ko[i, 0], ko[i, 1]])
            assert np.abs(mirrored - km[j, :2]).max() < tol, (KEYPOINT_NAMES[i], KEYPOINT_NAMES[j])
            if kind == "body":
                same = np.array([width - ko[j, 0], ko[j, 1]])
                assert np.linalg.norm(mirrored - km[j, :2]) < np.linalg.norm(same - km[j, :2]), KEYPOINT_NAMES[j]
            checked[kind] += 1
    assert checked["body"] >= 6 and checked["face"] >= 20, checked
    # And the mask is the mirror image of the original's.
    iou = ((orig["mask"][:, ::-1] > 0) & (mirr["mask"] > 0)).sum() / (
        (orig["mask"][:, ::-1] > 0) | (mirr["mask"] > 0)).sum()
    assert iou > 0.9


def test_maps_follow_the_contract(results):
    maps = results("original")
    assert set(maps) == set(MAP_OUTPUTS) - OPTIONAL_OUTPUTS | {"keypoints_3d"}
    m = Maps.from_arrays(dict(maps)).validate()
    # MediaPipe's own 3D pose, hips at the origin, in the camera's axes: the head above the
    # hips (y down), the shoulders about a shoulder width apart; no hands or face in it.
    k3 = m.keypoints_3d[0]
    at = {n: k3[KEYPOINT_NAMES.index(n)] for n in ("left_hip", "right_hip", "nose", "left_shoulder",
                                                   "right_shoulder", "left_wrist")}
    assert np.allclose((at["left_hip"][:3] + at["right_hip"][:3]) / 2, 0, atol=0.02)
    assert at["nose"][1] < -0.4 and 0.2 < np.linalg.norm(at["left_shoulder"][:3] - at["right_shoulder"][:3]) < 0.5
    assert np.isnan(k3[KEYPOINT_NAMES.index("left_thumb4")]).all() and 0 <= at["left_wrist"][3] <= 1
    assert m.metric and m.source.startswith("mediapipe-0.10.21")
    person = m.mask > 0
    assert np.isfinite(m.depth[person]).all() and np.isnan(m.depth[~person]).all()
    n = m.normal[person]
    assert np.allclose(np.linalg.norm(n, axis=1), 1, atol=1e-3)
    # Towards the camera: n . ray < 0 for (almost) every pixel of the person.
    k = m.intrinsics
    rows, cols = np.nonzero(person)
    rays = np.stack([(cols + 0.5 - k[0, 2]) / k[0, 0], (rows + 0.5 - k[1, 2]) / k[1, 1],
                     np.ones(len(rows))], 1)
    assert ((n * rays).sum(1) < 0).mean() > 0.98
    assert np.isnan(m.normal[~person]).all()
    # Default camera: focal 0.75 x long side, principal point at the centre.
    assert np.allclose(k, [[384, 0, 256], [0, 384, 256], [0, 0, 1]])


def test_depth_is_metric_and_body_shaped(results):
    maps = results("original")
    depth, k = maps["depth"], maps["intrinsics"]
    ls, rs = _kp(maps, "left_shoulder"), _kp(maps, "right_shoulder")

    def point(kp):
        u, v = kp[:2]
        z = np.nanmedian(depth[int(v) - 3:int(v) + 4, int(u) - 3:int(u) + 4])
        return np.array([(u - k[0, 2]) * z / k[0, 0], (v - k[1, 2]) * z / k[1, 1], z])

    width = np.linalg.norm(point(ls) - point(rs))
    assert 0.25 < width < 0.5, f"shoulder span {width:.3f} m is not a human's"
    # Inflation: the middle of the chest is nearer the camera than the silhouette's edge.
    chest = (ls[:2] + rs[:2]) / 2 + np.array([0, 60])
    z_chest = depth[int(chest[1]), int(chest[0])]
    row = int(chest[1])
    inside = np.nonzero(maps["mask"][row] > 0)[0]
    assert z_chest < depth[row, inside[0] + 2] and z_chest < depth[row, inside[-1] - 2]
    assert 0.3 < np.nanmin(depth) and np.nanmax(depth) < 5.0


def test_parts_are_coarse_body_parts(results):
    maps = results("original")
    parts, mask = maps["parts"], maps["mask"]
    assert list(maps["part_names"]) == list(PART_NAMES_SAPIENS2)
    assert ((parts > 0) == (mask > 0)).all()
    pid = {n: i for i, n in enumerate(PART_NAMES_SAPIENS2)}

    def part_at(name, dy=0):
        x, y, _ = _kp(maps, name)
        return PART_NAMES_SAPIENS2[parts[int(y) + dy, int(x)]]

    assert part_at("nose") == "Face_Neck"
    assert part_at("left_elbow") in ("Left_Upper_Arm", "Left_Lower_Arm")
    assert part_at("right_elbow") in ("Right_Upper_Arm", "Right_Lower_Arm")
    assert part_at("neck", dy=60) == "Torso"
    hair_top = np.nonzero(parts[:, 225] > 0)[0][0]
    assert parts[hair_top + 5, 225] == pid["Hair"]


def test_two_people_get_two_instances(backend):
    photo = decode_image(sample_photo_path().read_bytes())
    pair = np.ascontiguousarray(np.hstack([photo, photo[:, ::-1]]))
    maps = backend.analyze(pair, AnalyzeOptions(max_side=768))
    mask, kp = maps["mask"], maps["keypoints"]
    assert mask.shape == (384, 768)
    assert sorted(np.unique(mask).tolist()) == [0, 1, 2] and kp.shape[0] == 2
    for k in (1, 2):
        nose = kp[k - 1, KEYPOINT_INDEX["nose"]]
        assert mask[int(nose[1]), int(nose[0])] == k, "each person's keypoints sit on their own mask"
        area = (mask == k).mean()
        assert 0.1 < area < 0.3


@pytest.mark.parametrize("max_side", [160, 256, 384])
def test_objects_beside_a_person_are_not_people(backend, max_side):
    """After painting the astronaut out, the pose detector 'finds' a person in the helmet she
    holds; that ghost has no face and must not become person 2."""
    photo = decode_image(sample_photo_path().read_bytes())
    maps = backend.analyze(photo, AnalyzeOptions(max_side=max_side))
    assert sorted(np.unique(maps["mask"]).tolist()) == [0, 1]
    assert maps["keypoints"].shape[0] == 1
