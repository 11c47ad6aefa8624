# SPDX-License-Identifier: GPL-3.0-or-later
"""Hostile body tensors against the real HTTP server (issue 37): every input of body_fit and
body_motion is checked against protocol/contract.json (datatype, shape, finiteness, range, form)
and the parameters parsed strictly, once at the boundary: a 400 with one line naming the tensor
and why, never a 500 or a 200 with nonsense. The reports are strict JSON."""

import json

import numpy as np
import pytest

from sapiens_blender.core.errors import SapiensServerError
from sapiens_blender.core.remote.client import V2Client

pytestmark = [pytest.mark.torch, pytest.mark.anny]


def _strict(text: str):
    def refuse(constant):
        raise ValueError(f"{constant} is not JSON")

    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def client(fit_server):
    with V2Client(f"http://{fit_server.url}", fit_server.token) as c:
        yield c


@pytest.fixture(scope="module")
def good(client, body_model_scene):
    """Inputs both models accept (checked by fitting and posing them once), to spoil one by one."""
    m = body_model_scene.maps
    fit_in = {"mask": m.mask, "parts": m.parts, "keypoints": np.asarray(m.keypoints, np.float32),
              "part_names": np.asarray([n.encode() for n in m.part_names], object),
              "intrinsics": np.asarray(m.intrinsics, np.float32), "metric": np.asarray([True]),
              "depth": np.asarray(m.depth, np.float32)}
    fit = client.infer("body_fit", fit_in)
    assert _strict(fit["reports"][0].decode())["reprojection_px"] < 5
    names = [n.decode() for n in client.infer("body_template", {"version": np.asarray([b"?"], object)})["joint_names"]]
    motion_in = {"phenotypes": fit["phenotypes"][0], "reference_bone_matrices": fit["bone_matrices"][0],
                 "reference_placement": fit["placement"][0], "reference_frame": np.array([0], np.int32),
                 "targets": np.repeat(fit["joints"][:, :12], 3, axis=0),
                 "target_names": np.array([n.encode() for n in names[:12]], object),
                 "weights": np.ones((3, 12), np.float32), "smoothing": np.array([b"causal"], object)}
    motion = client.infer("body_motion", motion_in)
    assert _strict(motion["report"][0].decode())["frames"] == 3
    return fit_in, motion_in


def _k(scale=None, at=None, value=None):
    def make(fit_in):
        k = fit_in["intrinsics"].copy()
        if scale is not None:
            k = (k * np.float32(scale)).astype(np.float32)
        if at is not None:
            k[at] = value
        return k
    return make


def _grid(value, dtype=np.float32):
    return lambda fit_in: np.full(fit_in["mask"].shape, value, dtype)


def _kp(column, value):
    def make(fit_in):
        kp = fit_in["keypoints"].copy()
        kp[..., column] = value
        return kp
    return make


FIT_CASES = {  # name: (input, its value from the good inputs), parameters, words of the answer
    "zero intrinsics": (("intrinsics", lambda f: np.zeros((3, 3), np.float32)), None, "'intrinsics' is not a pinhole"),
    "NaN intrinsics": (("intrinsics", _k(at=(0, 2), value=np.nan)), None, "'intrinsics' holds NaN"),
    "Inf intrinsics": (("intrinsics", _k(at=(1, 1), value=np.inf)), None, "'intrinsics' holds NaN or infinite"),
    "extreme intrinsics": (("intrinsics", _k(scale=1e30)), None, "'intrinsics' holds"),
    "negative focal": (("intrinsics", _k(at=(0, 0), value=-500)), None, "'intrinsics' is not a pinhole"),
    "depth 1e30": (("depth", _grid(1e30)), None, "'depth' holds 1e+30, outside"),
    "negative depth": (("depth", _grid(-2.0)), None, "'depth' holds -2"),
    "Inf depth": (("depth", _grid(np.inf)), None, "'depth' holds inf"),
    "pointmap 1e30": (("pointmap", lambda f: np.full((*f["mask"].shape, 3), 1e30, np.float32)), None, "'pointmap'"),
    "NaN mask": (("mask", _grid(np.nan)), None, "'mask' must be UINT8"),
    "BYTES mask": (("mask", _grid(b"1", object)), None, "'mask' must be UINT8"),
    "BYTES keypoints": (("keypoints", lambda f: np.full(f["keypoints"].shape, b"1", object)), None,
                        "'keypoints' must be FP32"),
    "Inf scores": (("keypoints", _kp(2, np.inf)), None, "'keypoints'[..., 2] holds inf"),
    "Inf keypoint x": (("keypoints", _kp(0, -np.inf)), None, "'keypoints'[..., 0] holds -inf"),
    "Inf keypoints_3d": (("keypoints_3d", lambda f: np.full((1, 308, 4), np.inf, np.float32)), None, "'keypoints_3d'"),
    "people not ids": (None, {"people": "a,b"}, "parameter 'people' must be mask ids"),
    "people floats": (None, {"people": [1.5]}, "parameter 'people' must be mask ids"),
    "people object": (None, {"people": {"a": 1}}, "parameter 'people' must be mask ids"),
    "people true": (None, {"people": [True]}, "parameter 'people' must be mask ids"),
    "people repeated": (None, {"people": [1, 1]}, "names person [1] more than once"),
}


def _bones(value):
    return lambda m: np.full_like(m["reference_bone_matrices"], value)


MOTION_CASES = {
    "NaN bone matrices": ("reference_bone_matrices", _bones(np.nan), "'reference_bone_matrices' holds NaN"),
    "zero bone matrices": ("reference_bone_matrices", _bones(0.0), "'reference_bone_matrices' (matrix 0) is not a rigid"),
    "Inf weights": ("weights", lambda m: np.full_like(m["weights"], np.inf), "'weights' holds inf"),
    "negative weights": ("weights", lambda m: -m["weights"], "'weights' holds -1"),
    "placement x1e6": ("reference_placement", lambda m: (m["reference_placement"] * 1e6).astype(np.float32),
                       "'reference_placement'"),
    "scaled placement": ("reference_placement", lambda m: np.diag([2, 2, 2, 1]).astype(np.float32),
                         "'reference_placement' is not a rigid"),
    "FP32 reference_frame": ("reference_frame", lambda m: np.array([0.5], np.float32), "'reference_frame' must be INT32"),
    "empty reference_frame": ("reference_frame", lambda m: np.zeros(0, np.int32), "'reference_frame' has shape [0]"),
    "negative reference_frame": ("reference_frame", lambda m: np.array([-1], np.int32), "'reference_frame' holds -1"),
    "FP32 smoothing": ("smoothing", lambda m: np.array([1.0], np.float32), "'smoothing' must be BYTES"),
    "empty smoothing": ("smoothing", lambda m: np.zeros(0, object), "'smoothing' has shape [0]"),
    "phenotypes 5": ("phenotypes", lambda m: np.full(6, 5, np.float32), "'phenotypes' holds 5"),
    "targets 1e30": ("targets", lambda m: np.full_like(m["targets"], 1e30), "'targets' holds 1e+30"),
    "INT32 names": ("target_names", lambda m: np.arange(12, dtype=np.int32), "'target_names' must be BYTES"),
    "empty name": ("target_names", lambda m: np.array([b""] * 12, object), "target_names must be 1 to 64"),
}


def _refused(call) -> str:
    with pytest.raises(SapiensServerError) as err:
        call()
    text = str(err.value)
    assert err.value.status == 400, text
    assert "\n" not in text
    return text


@pytest.mark.parametrize("case", list(FIT_CASES))
def test_hostile_fit_inputs_are_a_one_line_400(client, good, case):
    change, parameters, words = FIT_CASES[case]
    inputs = dict(good[0])
    if change:
        inputs[change[0]] = change[1](good[0])
    assert words in _refused(lambda: client.infer("body_fit", inputs, parameters=parameters))


@pytest.mark.parametrize("case", list(MOTION_CASES))
def test_hostile_motion_inputs_are_a_one_line_400(client, good, case):
    name, make, words = MOTION_CASES[case]
    inputs = {**good[1], name: make(good[1])}
    assert words in _refused(lambda: client.infer("body_motion", inputs))
