# SPDX-License-Identifier: GPL-3.0-or-later
import importlib.util

import numpy as np
import pytest

from maps_samples import make_maps
from repo_paths import REPO

from sapiens_blender.core.maps import goliath
from sapiens_blender.core.maps.canonical import Maps, MapsError


def test_roundtrip(tmp_path):
    maps = make_maps()
    path = maps.save(tmp_path / "a.npz")
    back = Maps.load(path)
    for key, value in maps.to_arrays().items():
        np.testing.assert_array_equal(back.to_arrays()[key], value)
    assert back.part_names == goliath.PART_NAMES_SAPIENS2
    assert back.person_ids == [1]
    assert list(tmp_path.iterdir()) == [path]  # no temp file left behind


def test_array_extras_survive_save_and_load(tmp_path):
    maps = make_maps()
    maps.extras = {"normal_agreement_deg": np.asarray([12.5], np.float32),
                   "notes": np.asarray(["flipped axes y"], dtype=object)}
    back = Maps.load(maps.save(tmp_path / "a.npz"))
    assert back.extras["normal_agreement_deg"].tolist() == [12.5]
    assert back.extras["notes"].tolist() == ["flipped axes y"]  # text without pickles


def test_rejects_mismatched_shapes():
    maps = make_maps()
    maps.depth = np.zeros((3, 3), np.float32)
    with pytest.raises(MapsError, match="depth must have shape"):
        maps.validate()


def test_rejects_bad_scores_and_missing_keys(tmp_path):
    maps = make_maps()
    maps.keypoints[0, 0, 2] = 2.0
    with pytest.raises(MapsError, match="scores"):
        maps.validate()
    with pytest.raises(MapsError, match="missing required keys: .*depth"):
        Maps.from_arrays({k: v for k, v in make_maps().to_arrays().items() if k != "depth"})


def test_corrupt_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.npz"
    bad.write_bytes(b"not a zip")
    with pytest.raises(MapsError, match="not a readable maps"):
        Maps.load(bad)


def test_out_of_memory_is_not_called_a_corrupt_file(tmp_path, monkeypatch):
    """A clip skips a frame whose maps file is unreadable: running out of memory while reading
    a good file must stop with that error, not drop the frame as a bad file."""
    path = make_maps().save(tmp_path / "good.npz")

    def no_memory(*args, **kwargs):
        raise MemoryError("simulated")

    monkeypatch.setattr(np, "load", no_memory)
    with pytest.raises(MemoryError):
        Maps.load(path)


def test_server_copy_of_goliath_data_matches():
    spec = importlib.util.spec_from_file_location("g2", REPO / "inference_server/processing/goliath.py")
    server = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(server)
    assert server.KEYPOINT_NAMES == goliath.KEYPOINT_NAMES
    assert server.FLIP_PAIRS == goliath.FLIP_PAIRS
    assert server.PART_NAMES_SAPIENS2 == goliath.PART_NAMES_SAPIENS2
    assert goliath.KEYPOINT_INDEX["right_wrist"] == 41 and goliath.KEYPOINT_INDEX["left_hip"] == 9
    assert len(goliath.PART_NAMES_SAPIENS1) == 28 and goliath.PART_NAMES_SAPIENS1[2] == "Face_Neck"


def test_keypoints_3d_round_trip_and_are_checked(tmp_path):
    """The backend's own 3D pose (optional): saved and loaded with the maps, its shape and
    values checked like the rest of the contract."""
    m = make_maps(people=2)
    k3 = np.full((2, 308, 4), np.nan, np.float32)
    k3[:, :17] = [0.1, -0.2, 0.05, 0.9]
    m.keypoints_3d = k3
    m.validate()
    back = Maps.load(m.save(tmp_path / "m.npz"))
    assert np.array_equal(back.keypoints_3d, k3, equal_nan=True) and "keypoints_3d" not in back.extras
    assert make_maps().keypoints_3d is None and Maps.load(make_maps().save(tmp_path / "n.npz")).keypoints_3d is None
    for bad, why in ((k3[:1], r"\[P,308,4\] with the keypoints' 2 rows"), (k3[..., :3], r"\[P,308,4\]"),
                     (np.where(np.isnan(k3), np.inf, k3), "finite or NaN"),
                     (np.where(np.isnan(k3), 2.0, k3), r"confidences in \[0, 1\]")):
        m.keypoints_3d = bad
        with pytest.raises(MapsError, match=why):
            m.validate()


def test_part_names_are_checked_where_maps_are_read():
    """A 100,000-character part name in a 2 MB maps file made a build allocate ~40 GiB (a
    per-vertex text array sized by the longest name): names are 1-64 plain characters."""
    m = make_maps()
    names = list(m.part_names)
    for bad, why in (("x" * 100_000, "100000 characters long"), ("", "0 characters long"),
                     ("Arm/../..", r"characters other than letters"), ("Arm\u202e", r"characters other than letters")):
        m.part_names = tuple([bad] + names[1:])
        with pytest.raises(MapsError, match=why):
            m.validate()
    m.part_names = tuple(names + [f"extra_{i}" for i in range(300)])
    with pytest.raises(MapsError, match="at most 256"):
        m.validate()
