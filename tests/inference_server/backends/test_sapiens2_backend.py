# SPDX-License-Identifier: GPL-3.0-or-later
"""Sapiens2 backend end to end in-process: tiny random-weight models in a real hub-cache layout,
loaded by the real loader offline; weights errors; devices; lifecycle."""

import shutil
import subprocess
import sys

import numpy as np
import pytest
from tiny_models import PLANE_Z, as_maps, offline_hub, photo, tiny_hub, tiny_hub_empty_photo  # noqa: F401

from inference_server.dataplane import base
from inference_server.dataplane.base import AnalyzeOptions, BackendError, Cancelled, CancelToken

pytest.importorskip("torch")
pytest.importorskip("transformers")
from inference_server.backends import sapiens2  # noqa: E402

pytestmark = [pytest.mark.torch]


@pytest.fixture
def backend(tiny_hub, offline_hub):
    offline_hub(tiny_hub)
    b = sapiens2.Sapiens2Backend("0.4b", device="cpu", precision="fp32")
    yield b
    b.unload()


def test_importing_the_backends_does_not_import_torch():
    code = ("import sys, inference_server.backends.sapiens2 as a, inference_server.backends.sapiens_v1 as b;"
            "a.register_all(); b.register_all(); assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_registered_names_and_lazy_load():
    sapiens2.register_all()
    assert {f"sapiens2-{s}" for s in sapiens2.SIZES} <= set(base.registered_names())
    b = base.create("sapiens2-1b")
    assert not b.loaded and b.describe()["repos"][0] == "facebook/sapiens2-seg-1b"


def test_full_analysis_gives_valid_canonical_maps(backend):
    events = []
    out = backend.analyze(photo(), AnalyzeOptions(flip_test=True), progress=lambda *e: events.append(e))
    maps = as_maps(out)
    assert maps.person_ids == [1] and maps.metric and maps.source.startswith("sapiens2-0.4b")
    assert len(maps.part_names) == 29 and maps.part_names[2] == "Eyeglass"
    fg = maps.mask > 0
    assert np.allclose(maps.depth[fg], PLANE_Z, atol=1e-3) and np.isnan(maps.depth[~fg]).all()
    assert np.allclose(maps.pointmap[fg][:, 2], PLANE_Z, atol=1e-3)
    assert np.allclose(np.linalg.norm(maps.normal[fg], axis=-1), 1.0, atol=1e-4)
    assert maps.keypoints.shape == (1, 308, 3)
    # the constant-plane pointmap cannot give a focal length: the documented default is used
    assert maps.intrinsics[0, 0] == pytest.approx(0.75 * 120) and "default field of view" in str(out["notes"][0])
    stages = [e[0] for e in events]
    assert stages[0] == "load" and {"seg", "depth", "normal", "pose", "done"} <= set(stages)
    assert backend.describe()["device"] == "cpu fp32"


def test_tasks_run_back_to_back_without_reloading(backend):
    backend.load()
    models = dict(backend.models)
    out = backend.analyze(photo(), AnalyzeOptions(tasks=("seg",)))
    maps = as_maps(out)
    assert np.isnan(maps.normal).all() and np.isnan(maps.depth).all() and maps.pointmap is None
    assert maps.keypoints.shape == (1, 308, 3) and not maps.keypoints.any()
    backend.analyze(photo(seed=1), AnalyzeOptions(tasks=("pose", "normal")))
    assert all(backend.models[t] is models[t] for t in models)
    backend.unload()
    assert not backend.loaded
    backend.analyze(photo(), AnalyzeOptions(tasks=("seg",)))
    assert backend.loaded


@pytest.mark.parametrize("hw, max_side, expect", [((30, 20), 1024, (30, 20)), ((1500, 1000), 256, (256, 171))])
def test_tiny_and_huge_photos(backend, hw, max_side, expect):
    out = backend.analyze(photo(*hw), AnalyzeOptions(max_side=max_side, tasks=("seg", "depth")))
    assert out["image"].shape[:2] == expect and as_maps(out).depth.shape == expect


def test_photo_without_people_gives_empty_maps_and_a_message(tiny_hub_empty_photo, offline_hub):
    offline_hub(tiny_hub_empty_photo)
    b = sapiens2.Sapiens2Backend("0.4b", device="cpu", precision="fp32")
    out = b.analyze(photo(), AnalyzeOptions())
    maps = as_maps(out)
    assert maps.person_ids == [] and maps.keypoints.shape == (0, 308, 3)
    assert not maps.parts.any() and np.isnan(maps.depth).all()
    assert "no person" in str(out["notes"][0])


def test_offline_without_cache_says_which_repo_and_where(tmp_path, offline_hub):
    offline_hub(tmp_path / "empty-cache")
    assert not sapiens2.weights_available("0.4b")
    b = sapiens2.Sapiens2Backend("0.4b", device="cpu")
    with pytest.raises(BackendError) as err:
        b.load()
    msg = str(err.value)
    assert err.value.status == 503
    assert "facebook/sapiens2-seg-0.4b" in msg and "config.json" in msg and str(tmp_path) in msg
    assert "hf download" in msg and "SAPIENS_WEIGHTS_DIR" in msg


def test_weights_available_per_size(tiny_hub, offline_hub, monkeypatch):
    offline_hub(tiny_hub)
    assert sapiens2.weights_available("0.4b") and sapiens2.weights_available("0.4b", "pose")
    assert not sapiens2.weights_available("1b") and not sapiens2.weights_available("7b")
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    assert sapiens2.weights_available("1b")  # downloadable (nothing is fetched by the check)
    assert sapiens2.accelerator_available() is None  # this machine has no GPU


def test_truncated_weights_are_reported_as_corrupt(tiny_hub, tmp_path, offline_hub):
    cache = tmp_path / "cache"
    shutil.copytree(tiny_hub, cache, symlinks=True)
    snap = next((cache / "models--facebook--sapiens2-seg-0.4b" / "snapshots").iterdir())
    blob = (snap / "model.safetensors").resolve()
    data = blob.read_bytes()
    blob.write_bytes(data[: len(data) // 2])
    offline_hub(cache)
    with pytest.raises(BackendError, match="corrupt or truncated") as err:
        sapiens2.Sapiens2Backend("0.4b", device="cpu").load()
    assert "model.safetensors" in str(err.value) or "sapiens2-seg-0.4b" in str(err.value)


def test_local_weights_folder(tiny_hub, tmp_path, offline_hub):
    offline_hub(tmp_path / "no-cache")
    local = tmp_path / "weights"
    for task in ("seg", "pointmap", "normal", "pose"):
        snap = next((tiny_hub / f"models--facebook--sapiens2-{task}-0.4b" / "snapshots").iterdir())
        shutil.copytree(snap, local / f"sapiens2-{task}-0.4b")  # symlinks followed: real files
    b = sapiens2.Sapiens2Backend("0.4b", device="cpu", weights_dir=local)
    assert as_maps(b.analyze(photo(), AnalyzeOptions(tasks=("seg", "depth")))).person_ids == [1]


def test_int8_cpu_path_and_bad_device(tiny_hub, offline_hub):
    offline_hub(tiny_hub)
    b = sapiens2.Sapiens2Backend("0.4b", device="cpu", precision="int8")
    maps = as_maps(b.analyze(photo(), AnalyzeOptions(tasks=("seg", "depth"))))
    assert maps.person_ids == [1] and b.placement.precision == "int8"
    with pytest.raises(BackendError, match="CUDA") as err:
        sapiens2.Sapiens2Backend("0.4b", device="cuda").load()
    assert err.value.status == 400


def test_cancel_stops_the_analysis(backend):
    token = CancelToken()
    token.cancel()
    with pytest.raises(Cancelled):
        backend.analyze(photo(), AnalyzeOptions(), cancel=token)


def test_unknown_task_is_a_clear_400(backend):
    with pytest.raises(BackendError, match="unknown task") as err:
        backend.analyze(photo(), AnalyzeOptions(tasks=("seg", "albedo")))
    assert err.value.status == 400


def test_hub_errors_become_actionable_messages(monkeypatch, tmp_path):
    import errno

    import httpx2
    from huggingface_hub import errors

    from inference_server.backends.weights import _hub_error

    monkeypatch.setenv("HF_HUB_OFFLINE", "0")
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    url = "https://huggingface.co/facebook/sapiens2-seg-5b/resolve/main/config.json"
    response = httpx2.Response(401, request=httpx2.Request("GET", url))
    gated = _hub_error(errors.GatedRepoError("gated", response=response), "facebook/sapiens2-seg-5b",
                       "config.json", None)
    assert gated.status == 403 and "HF_TOKEN" in str(gated) and "licence" in str(gated)
    full = _hub_error(OSError(errno.ENOSPC, "No space left on device"), "facebook/sapiens2-seg-5b",
                      "model.safetensors", None)
    assert full.status == 507 and "disk full" in str(full) and str(tmp_path) in str(full)


def test_half_resolution_preview(tiny_hub, offline_hub):
    offline_hub(tiny_hub)
    b = sapiens2.Sapiens2Backend("0.4b", device="cpu", input_scale=0.5)
    maps = as_maps(b.analyze(photo(200, 150), AnalyzeOptions()))
    assert b.input_hw("seg") == (32, 32) and b.input_hw("depth") == (64, 48)
    assert maps.person_ids == [1] and maps.image.shape[:2] == (200, 150)


def test_model_input_size_comes_from_the_repo(tmp_path):
    import json

    import transformers

    config = transformers.Sapiens2Config()  # image_size left at the library default (224)
    assert sapiens2.native_input_hw(None, config) == (1024, 768)
    (tmp_path / "preprocessor_config.json").write_text(json.dumps({"size": {"height": 512, "width": 384}}))
    assert sapiens2.native_input_hw(tmp_path, config) == (512, 384)
    config.image_size = [64, 48]
    assert sapiens2.native_input_hw(None, config) == (64, 48)


def test_fast_cpu_layout_keeps_the_outputs(tiny_hub, offline_hub):
    import copy

    import torch
    import transformers

    from inference_server.backends import devices

    norm = torch.nn.InstanceNorm2d(8)
    x = torch.randn(2, 8, 10, 6)
    assert torch.allclose(devices._channel_norm_class()(norm.eps)(x), norm(x), atol=1e-5)
    offline_hub(tiny_hub)
    folder = next((tiny_hub / "models--facebook--sapiens2-normal-0.4b" / "snapshots").iterdir())
    model = transformers.Sapiens2ForNormalEstimation.from_pretrained(str(folder)).eval()
    fast = devices.prepare_model(copy.deepcopy(model), devices.Placement("cpu", "fp32"))
    assert not any(isinstance(m, torch.nn.InstanceNorm2d) for m in fast.modules())
    pixels = torch.randn(1, 3, 64, 48)
    with torch.inference_mode():
        assert torch.allclose(fast(pixel_values=pixels).normals, model(pixel_values=pixels).normals, atol=1e-4)


def test_out_of_memory_becomes_advice(backend):
    import torch

    class ExhaustsMemory(torch.nn.Module):
        def forward(self, pixel_values):
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")

    backend.load()
    failing = ExhaustsMemory()
    failing.config = backend.models["seg"].config
    backend.models["seg"] = failing
    with pytest.raises(BackendError, match="out of memory") as err:
        backend.analyze(photo(), AnalyzeOptions(tasks=("seg",)))
    assert err.value.status == 503 and "smaller" in str(err.value) and "SAPIENS_DEVICE=cpu" in str(err.value)


def test_config_naming_the_original_weights_file(tiny_hub, tmp_path, offline_hub):
    """Repos may keep the original ``sapiens2_<size>_<task>.safetensors`` and point config.json's
    ``transformers_weights`` at it (no model.safetensors): only that file is fetched and loaded."""
    import json

    from tiny_models import install_in_hub_cache

    snap = next((tiny_hub / "models--facebook--sapiens2-seg-0.4b" / "snapshots").iterdir())
    files = tmp_path / "files"
    files.mkdir()
    config = json.loads((snap / "config.json").read_text())
    config["transformers_weights"] = "sapiens2_0.4b_seg.safetensors"
    (files / "config.json").write_text(json.dumps(config))
    shutil.copyfile(snap / "model.safetensors", files / "sapiens2_0.4b_seg.safetensors")
    install_in_hub_cache(tmp_path / "cache", "facebook/sapiens2-seg-0.4b", files)
    offline_hub(tmp_path / "cache")
    b = sapiens2.Sapiens2Backend("0.4b", device="cpu", tasks=("seg",))
    maps = as_maps(b.analyze(photo(), AnalyzeOptions(tasks=("seg",))))
    assert maps.person_ids == [1] and b.input_hw("seg") == (64, 48)  # config size: no preprocessor file


def _z_steps(z) -> float:
    """Median spacing between the distinct values of a smooth field (its quantisation step)."""
    values = np.unique(np.asarray(z, np.float64).ravel())
    return float(np.median(np.diff(values)))


def test_bf16_backbone_keeps_the_regression_heads_in_float32(tiny_hub, offline_hub):
    """In bf16 the pointmap terraced (steps of 2^-7 of the value: 1.6 cm at 2-4 m). The pointmap
    (with its scale branch) and normal heads run in float32 on the bf16 backbone's features."""
    import torch

    offline_hub(tiny_hub)
    b = sapiens2.Sapiens2Backend("0.4b", device="cpu", precision="bf16", tasks=("seg", "depth", "normal"))
    b.load()
    depth = b.models["depth"]
    assert next(depth.model.parameters()).dtype == torch.bfloat16
    for head in (depth.decode_head, depth.scale_head, b.models["normal"].decode_head):
        assert {p.dtype for p in head.parameters()} == {torch.float32}
    with torch.no_grad():  # a smooth, varying pointmap around PLANE_Z instead of the constant plane
        depth.decode_head.predictor.weight.normal_(0.0, 0.02)
    outputs = []
    depth.register_forward_hook(lambda m, a, out: outputs.append(out))
    b.analyze(photo(), AnalyzeOptions(tasks=("seg", "depth")))
    z = outputs[-1].pointmaps[:, 2]
    assert outputs[-1].pointmaps.dtype == torch.float32 and outputs[-1].scales.dtype == torch.float32
    assert float(z.min()) > 1.0 and _z_steps(z) < 1e-4  # no terraces (bf16 would give 2^-7 = 0.0078)
    # the same head in bf16 (as before): the check above would have failed
    import copy

    half_head = copy.deepcopy(depth.decode_head).to(torch.bfloat16)
    half_head._forward_pre_hooks.clear()
    with torch.inference_mode():
        feats = torch.randn(1, depth.config.hidden_size, 4, 3)
        terraced = half_head(feats.to(torch.bfloat16))[:, 2]
    assert _z_steps(terraced.float()) >= 2 ** -8
    b.unload()


def test_mixed_heads_run_the_upsampling_in_bf16_and_the_last_layers_in_float32(tiny_hub, offline_hub):
    """heads=mixed (the CUDA default): the heads' convolutions at the backbone's bf16, their
    predictors and the pointmap's scale branch in float32 fed float32, so the pointmap still has
    no bf16 terraces."""
    import torch

    from inference_server.backends.settings import SapiensSettings

    offline_hub(tiny_hub)
    settings = SapiensSettings(device="cpu", precision="bf16", heads="mixed", compile="off")
    b = sapiens2.Sapiens2Backend("0.4b", tasks=("seg", "depth", "normal"), settings=settings)
    b.load()
    assert b.placement.heads == "mixed" and "mixed heads" in b.placement.describe()
    depth = b.models["depth"]
    for head in (depth.decode_head, b.models["normal"].decode_head):
        assert {p.dtype for p in head.predictor.parameters()} == {torch.float32}
        rest = {p.dtype for n, p in head.named_parameters() if not n.startswith("predictor.")}
        assert rest == {torch.bfloat16}
    assert {p.dtype for p in depth.scale_head.parameters()} == {torch.float32}
    with torch.no_grad():
        depth.decode_head.predictor.weight.normal_(0.0, 0.02)
    outputs = []
    depth.register_forward_hook(lambda m, a, out: outputs.append(out))
    b.analyze(photo(), AnalyzeOptions(tasks=("seg", "depth", "normal")))
    z = outputs[-1].pointmaps[:, 2]
    assert outputs[-1].pointmaps.dtype == torch.float32 and outputs[-1].scales.dtype == torch.float32
    assert float(z.min()) > 1.0 and _z_steps(z) < 1e-4
    b.unload()


def test_compiled_placement_compiles_the_backbone_alone_and_gives_the_eager_maps(tiny_hub, offline_hub):
    """compile=on (the CUDA default under auto) wraps the backbone in torch.compile, not the heads
    (their compile cost ~24 s for 6 ms per photo on an H200); the maps are the eager ones."""
    from inference_server.backends.settings import SapiensSettings

    offline_hub(tiny_hub)
    maps = {}
    for mode in ("off", "on"):
        settings = SapiensSettings(device="cpu", precision="fp32", compile=mode)
        b = sapiens2.Sapiens2Backend("0.4b", tasks=("seg", "depth"), settings=settings)
        b.load()
        depth = b.models["depth"]
        wrapped = [type(m).__name__ == "Guard" for m in (depth.model, depth.decode_head, depth.scale_head)]
        assert wrapped == [mode == "on", False, False]
        maps[mode] = b.analyze(photo(), AnalyzeOptions(tasks=("seg", "depth")))
        if mode == "on":
            assert type(depth.model).failed is None  # compiled, not fallen back to eager
        b.unload()
    dense = [k for k, v in maps["off"].items() if isinstance(v, np.ndarray) and v.dtype.kind == "f" and v.ndim >= 2]
    assert "depth" in dense
    for k in dense:
        np.testing.assert_allclose(maps["on"][k], maps["off"][k], atol=1e-4, equal_nan=True)
