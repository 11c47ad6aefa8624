# SPDX-License-Identifier: GPL-3.0-or-later
"""The body fit through the real server and the real client: maps in, bodies out."""

import json

import numpy as np
import pytest

from inference_server.fit.guessed import LIMBS  # noqa: E402

from sapiens_blender.core.remote.analysis import body_template, fit_body  # noqa: E402
from sapiens_blender.core.remote.client import V2Client  # noqa: E402
from sapiens_blender.core.errors import SapiensServerError  # noqa: E402

pytestmark = [pytest.mark.torch, pytest.mark.anny]


@pytest.fixture(scope="module")
def client(fit_server):
    with V2Client(f"http://{fit_server.url}", fit_server.token) as c:
        yield c


@pytest.mark.slow
def test_fit_and_template_round_trip(client, body_model_scene):
    scene = body_model_scene
    stages = []
    out = fit_body(client, scene.maps, progress=lambda s, f, m: stages.append(m))
    assert out["person_ids"].tolist() == [1]
    template = body_template(client)
    assert str(template["body_version"]) == str(out["body_version"])
    v = out["vertices"]
    assert v.shape == (1, len(template["weight_bones"]), 3) and v.dtype == np.float32
    assert out["bone_matrices"].shape == (1, len(template["bone_names"]), 4, 4)
    assert template["faces"].shape[1] == 3 and template["faces"].max() < v.shape[1]
    report = json.loads(str(out["reports"][0]))
    assert report["depth"] == "metric" and report["reprojection_px"] < 5
    # Per limb, what the photo showed and what was guessed (fit/guessed.py): a whole person
    # in the frame shows the big limbs' joints.
    assert set(report["guessed"]) == set(LIMBS)
    assert all(report["guessed"][limb]["source"] in ("seen", "partly seen") for limb in ("left_arm", "right_leg"))
    names = [str(n) for n in template["joint_names"]]
    wrist = out["joints"][0, names.index("left_wrist")]
    assert np.linalg.norm(wrist - scene.body.joints["left_wrist"]) < 0.08
    assert any("body" in m for m in stages)  # progress reached the client


def test_bad_maps_are_a_clear_400(client, body_model_scene):
    import copy

    maps = copy.deepcopy(body_model_scene.maps)
    maps.mask[:] = 0
    with pytest.raises(SapiensServerError) as err:
        fit_body(client, maps)
    assert "no person" in str(err.value)
    with pytest.raises(SapiensServerError) as err:
        fit_body(client, body_model_scene.maps, people=[7])
    assert "no person [7]" in str(err.value)
    # A 100,000-character part name (past the client's own check): refused, not carried along.
    long = copy.deepcopy(body_model_scene.maps)
    long.part_names = ("x" * 100_000,) + long.part_names[1:]
    with pytest.raises(SapiensServerError) as err:
        fit_body(client, long)
    assert "part_names" in str(err.value) and "64 characters" in str(err.value)
    # The contract checked once on the way in: a tensor of the wrong datatype, or NaN intrinsics.
    good = {"mask": maps.mask, "parts": body_model_scene.maps.parts, "keypoints": body_model_scene.maps.keypoints,
            "part_names": np.asarray([n.encode() for n in body_model_scene.maps.part_names], object),
            "intrinsics": np.asarray(body_model_scene.maps.intrinsics, np.float32)}
    with pytest.raises(SapiensServerError) as err:
        client.infer("body_fit", {**good, "depth": np.zeros(maps.mask.shape, np.float64)})
    assert err.value.status == 400 and "'depth' must be FP32, got float64" in str(err.value)
    with pytest.raises(SapiensServerError) as err:
        client.infer("body_fit", {**good, "intrinsics": np.full((3, 3), np.nan, np.float32)})
    assert err.value.status == 400 and "'intrinsics' holds NaN" in str(err.value)


def test_fit_device_choice(monkeypatch):
    """auto is the GPU where torch sees one (its steps replay as CUDA graphs), else the CPU;
    cuda on request gets a clear error where torch sees none; the setting reads its variable."""
    import torch

    from inference_server.dataplane.base import BackendError
    from inference_server.fit.serving import fit_device
    from inference_server.fit.settings import FitServerSettings

    assert fit_device(" CPU ") == "cpu"
    assert fit_device("auto") == ("cuda" if torch.cuda.is_available() else "cpu")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)  # what a GPU box answers
    assert fit_device("auto") == fit_device("") == "cuda" and fit_device("cpu") == "cpu"
    monkeypatch.undo()
    with pytest.raises(BackendError, match="cpu or cuda"):
        fit_device("mps")
    if not torch.cuda.is_available():
        with pytest.raises(BackendError, match="no CUDA GPU"):
            fit_device("cuda:0")
    assert FitServerSettings.from_env({"SAPIENS_FIT_DEVICE": "CUDA"}).device == "cuda"
    assert FitServerSettings.from_env({}).device == "auto"


def test_fit_compile_setting(monkeypatch):
    """Off by default (compiling costs minutes once: for batches); the flag and its variable
    turn it on, and the fit backend hands it to the fit's settings. The fit's settings are its
    own: the Sapiens backends' settings know nothing of them."""
    from inference_server.__main__ import _fit_settings, _model_settings, parse_args
    from inference_server.fit.serving import BodyFitBackend
    from inference_server.fit.settings import FitServerSettings

    monkeypatch.delenv("SAPIENS_FIT_COMPILE", raising=False)
    monkeypatch.setenv("SAPIENS_FIT_DEVICE", "cpu")
    assert FitServerSettings.from_env({}).compile is False
    assert FitServerSettings.from_env({"SAPIENS_FIT_COMPILE": "1"}).compile is True
    assert _fit_settings(parse_args(["--fit-compile"])).compile is True
    assert _fit_settings(parse_args(["--fit-device", "cuda:1"])).device == "cuda:1"
    assert _fit_settings(parse_args([])) == FitServerSettings(device="cpu", compile=False)
    assert not hasattr(_model_settings(parse_args([])), "fit_compile")
    assert BodyFitBackend(_fit_settings(parse_args([]))).fit_settings().compile is False
    assert BodyFitBackend(FitServerSettings(compile=True)).fit_settings().compile is True
    assert BodyFitBackend().fit_settings().compile is False


def test_models_are_served_by_their_type():
    """The fit models are tensor models (no photo method to refuse), the backends photo models."""
    from inference_server.dataplane import base
    from inference_server.dataplane.models import ModelSlot
    from inference_server.fit.serving import BodyFitBackend, BodyMotionBackend, BodyTemplateBackend

    for cls in (BodyFitBackend, BodyMotionBackend, BodyTemplateBackend):
        assert issubclass(cls, base.TensorModel) and not hasattr(cls, "analyze")
    base.register("body_fit (type test)", BodyFitBackend)
    slot = ModelSlot("body_fit (type test)")
    assert slot.tensor_model and not slot.batching
