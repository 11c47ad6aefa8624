# SPDX-License-Identifier: GPL-3.0-or-later
"""Sapiens-lite demo outputs -> canonical Maps (bpy-free)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sapiens_blender.core.maps.goliath import KEYPOINT_INDEX, PART_NAMES_SAPIENS1
from sapiens_blender.core.maps.lite_files import (
    ASSUMED_HEIGHT_M, LiteFilesError, find_lite_files, load_lite_maps,
)

H, W = 60, 80


def write_lite(folder, people=((20, 30),), n_kp=308, normal_sign=-1.0):
    """Two blobs of foreground (one per person), relative depth, seg, normals and pose files."""
    for sub in ("depth", "normal", "seg", "pose"):
        (folder / sub).mkdir(parents=True, exist_ok=True)
    fg = np.zeros((H, W), bool)
    for cx, half in people:
        fg[10:50, cx - 5: cx + 5] = True
    rel = np.where(fg, np.linspace(0, 1, W)[None, :].repeat(H, 0), -1).astype(np.float32)
    np.save(folder / "depth/img.npy", rel)
    n = np.zeros((H, W, 3), np.float32)
    n[..., 2] = normal_sign  # facing the camera when -1 (contract), away when +1
    np.save(folder / "normal/img.npy", n)
    np.save(folder / "seg/img_seg.npy", np.where(fg, PART_NAMES_SAPIENS1.index("Torso"), 0))
    np.save(folder / "seg/img.npy", fg)
    instances = []
    for cx, _ in people:
        kp = np.zeros((n_kp, 2))
        kp[:, 0], kp[:, 1] = cx, 30
        instances.append({"keypoints": kp.tolist(), "keypoint_scores": [0.9] * n_kp})
    (folder / "pose/img.json").write_text(json.dumps({"instance_info": instances}))
    return fg


def test_files_are_found_by_content_anywhere(tmp_path):
    write_lite(tmp_path)
    found = find_lite_files(tmp_path, "img")
    assert {k: p.parent.name for k, p in found.items()} == {
        "depth": "depth", "normal": "normal", "seg": "seg", "fg": "seg", "pose": "pose"}


def test_relative_depth_becomes_plausible_metres_and_normals_face_the_camera(tmp_path):
    fg = write_lite(tmp_path, normal_sign=+1.0)
    maps = load_lite_maps(tmp_path, "img", np.zeros((H, W, 3), np.uint8))
    assert maps.metric is False and maps.person_ids == [1]
    f = maps.intrinsics[0, 0]
    z = maps.depth[fg]
    assert np.median(z) == pytest.approx(f * ASSUMED_HEIGHT_M / 40, rel=0.05)  # 40 px tall person
    assert np.isnan(maps.depth[~fg]).all()
    assert np.allclose(maps.normal[fg], [0, 0, -1])  # flipped towards the camera
    assert maps.part_names == PART_NAMES_SAPIENS1 and (maps.parts[fg] == PART_NAMES_SAPIENS1.index("Torso")).all()
    assert maps.keypoints[0, KEYPOINT_INDEX["neck"], 2] == pytest.approx(0.9)


def test_two_people_are_split_by_their_keypoints(tmp_path):
    write_lite(tmp_path, people=((20, 5), (60, 5)))
    maps = load_lite_maps(tmp_path, "img", np.zeros((H, W, 3), np.uint8))
    assert maps.person_ids == [1, 2]
    assert (maps.mask[:, :40][maps.mask[:, :40] > 0] == 1).all() and (maps.mask[:, 40:][maps.mask[:, 40:] > 0] == 2).all()


def test_missing_or_unusable_files_say_what(tmp_path):
    write_lite(tmp_path, n_kp=17)
    with pytest.raises(LiteFilesError, match="17 keypoints"):
        load_lite_maps(tmp_path, "img", np.zeros((H, W, 3), np.uint8))
    with pytest.raises(LiteFilesError, match="no Sapiens-lite depth, pose"):
        load_lite_maps(tmp_path, "other", np.zeros((H, W, 3), np.uint8))
    with pytest.raises(LiteFilesError, match="photo is"):
        write_lite(tmp_path)
        load_lite_maps(tmp_path, "img", np.zeros((H + 1, W, 3), np.uint8))


# ---- hostile or broken lite files: a clear LiteFilesError, never a traceback or a hang ----------

def _photo():
    return np.zeros((H, W, 3), np.uint8)


def test_a_pickled_npy_is_refused(tmp_path):
    write_lite(tmp_path)
    np.save(tmp_path / "depth/img.npy", np.array([object()] * (H * W), dtype=object).reshape(H, W),
            allow_pickle=True)
    with pytest.raises(LiteFilesError, match="pickle"):
        load_lite_maps(tmp_path, "img", _photo())


def test_a_truncated_or_lying_npy_is_refused(tmp_path):
    write_lite(tmp_path)
    data = (tmp_path / "depth/img.npy").read_bytes()
    (tmp_path / "depth/img.npy").write_bytes(data[:200])
    with pytest.raises(LiteFilesError, match="shorter"):
        load_lite_maps(tmp_path, "img", _photo())
    (tmp_path / "depth/img.npy").write_bytes(b"not an array at all")
    with pytest.raises(LiteFilesError, match="not a .npy"):
        load_lite_maps(tmp_path, "img", _photo())


@pytest.mark.parametrize("content, words", [
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"instance_info": [\xff]}', "not UTF-8"),
    (b'{"instance_info": [{"keypoints": 5, "keypoint_scores": []}]}', "not a Sapiens-lite pose"),
])
def test_broken_pose_json_is_a_clear_error(tmp_path, content, words):
    write_lite(tmp_path)
    (tmp_path / "pose/img.json").write_bytes(content)
    with pytest.raises(LiteFilesError, match=words):
        load_lite_maps(tmp_path, "img", _photo())


def test_uneven_keypoints_between_people_are_a_clear_error(tmp_path):
    write_lite(tmp_path, people=((20, 30), (60, 30)))
    doc = json.loads((tmp_path / "pose/img.json").read_text())
    doc["instance_info"][1]["keypoints"] = doc["instance_info"][1]["keypoints"][:17]
    doc["instance_info"][1]["keypoint_scores"] = doc["instance_info"][1]["keypoint_scores"][:17]
    (tmp_path / "pose/img.json").write_text(json.dumps(doc))
    with pytest.raises(LiteFilesError, match="instance 1 has 17 keypoints"):
        load_lite_maps(tmp_path, "img", _photo())


@pytest.mark.parametrize("name", ["depth/img.npy", "pose/img.json"])
def test_a_fifo_named_like_a_lite_file_does_not_hang(tmp_path, name):
    import os
    import threading

    write_lite(tmp_path)
    (tmp_path / name).unlink()
    os.mkfifo(tmp_path / name)
    outcome = []

    def attempt():
        try:
            load_lite_maps(tmp_path, "img", _photo())
        except LiteFilesError as exc:
            outcome.append(exc)

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(5)
    assert outcome and "regular file" in str(outcome[0])
