# SPDX-License-Identifier: GPL-3.0-or-later
"""The maps/body contract is one file shipped in both packages: the copies are identical, and
both sides read their names, datatypes and shapes from it."""

import importlib.util

import numpy as np
from repo_paths import REPO

from sapiens_blender.core.maps import contract
from sapiens_blender.core.remote.analysis import FIT_OUTPUTS, decode_outputs

SERVER_COPY = REPO / "inference_server" / "protocol" / "contract.json"


def test_the_server_copy_is_identical():
    assert SERVER_COPY.read_bytes() == (REPO / "sapiens_blender" / "core" / "maps" / "contract.json").read_bytes()


def test_the_server_reads_the_contract():
    spec = importlib.util.spec_from_file_location("server_contract", SERVER_COPY.with_suffix(".py"))
    server = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(server)
    assert server.MAPS == contract.MAPS and server.FIT == contract.FIT
    assert set(FIT_OUTPUTS) == set(contract.FIT) and not set(contract.FIT) & set(contract.MAPS)
    assert server.problem("depth", np.zeros((2, 2), np.float64), server.MAPS["depth"]) == \
        "'depth' must be FP32, got float64"
    assert "shape [3]" in server.problem("intrinsics", np.zeros(3, np.float32), server.MAPS["intrinsics"])
    k = np.eye(3, dtype=np.float32)
    k[0, 0] = np.nan
    assert "NaN" in server.problem("intrinsics", k, server.MAPS["intrinsics"])
    assert server.problem("depth", np.full((2, 2), np.nan, np.float32), server.MAPS["depth"]) is None


def test_one_decoding_for_maps_and_bodies():
    out = decode_outputs({"source": np.asarray([b"x"], object), "metric": np.asarray([True]),
                          "body_version": np.asarray([b"anny-1"], object),
                          "part_names": np.asarray([b"a", b"b"], object), "reports": np.asarray([b"{}"], object),
                          "depth": np.zeros((2, 2), np.float32)})
    assert out["source"].shape == out["metric"].shape == out["body_version"].shape == ()
    assert str(out["body_version"]) == "anny-1" and bool(out["metric"]) is True
    assert out["part_names"].tolist() == ["a", "b"] and out["reports"].dtype.kind == "U"
    assert out["depth"].dtype == np.float32
