# SPDX-License-Identifier: GPL-3.0-or-later
"""Sapiens2 repos holding only the original ``sapiens2_{size}_{task}.safetensors`` (no transformers
config.json) load with a config rebuilt from the file; unknown files fail clearly. Tiny models in
the original key layout (what transformers' save_pretrained writes for Sapiens2), nothing downloaded."""

import shutil

import numpy as np
import pytest
from tiny_models import (  # noqa: F401
    SAPIENS2_SIZE,
    SAPIENS2_TASKS,
    build_sapiens2_task,
    install_in_hub_cache,
    offline_hub,
    photo,
    tiny_hub,
)

from inference_server.dataplane.base import AnalyzeOptions, BackendError

pytest.importorskip("torch")
pytest.importorskip("transformers")
from inference_server.backends import sapiens2, sapiens2_original  # noqa: E402

pytestmark = [pytest.mark.torch]


@pytest.fixture(scope="module")
def original_hub(tmp_path_factory):
    """A hub cache whose four Sapiens2 repos hold only the original file (+ the preprocessor size)."""
    from safetensors import safe_open

    cache = tmp_path_factory.mktemp("original-hub")
    for task in SAPIENS2_TASKS:
        folder = tmp_path_factory.mktemp(f"original-{task}")
        build_sapiens2_task(task, folder)
        with safe_open(str(folder / "model.safetensors"), "pt") as f:
            assert any(k.startswith("backbone.blocks.") for k in f.keys())  # the original key names
        (folder / "model.safetensors").rename(folder / sapiens2_original.original_filename(task, SAPIENS2_SIZE))
        (folder / "config.json").unlink()
        install_in_hub_cache(cache, f"facebook/sapiens2-{task}-{SAPIENS2_SIZE}", folder)
    return cache


def _analyze(cache, offline_hub):
    offline_hub(cache)
    b = sapiens2.Sapiens2Backend("0.4b", device="cpu", precision="fp32")
    out = b.analyze(photo(), AnalyzeOptions(max_side=96))
    return b, out


def test_original_files_load_and_give_the_same_maps(original_hub, tiny_hub, offline_hub):
    b, out = _analyze(original_hub, offline_hub)
    for task, model in b.models.items():
        assert model.config.transformers_weights.startswith("sapiens2_0.4b_")
    _, reference = _analyze(tiny_hub, offline_hub)  # the same weights in the transformers format
    for key in ("mask", "parts", "depth", "normal", "keypoints", "intrinsics"):
        np.testing.assert_allclose(np.asarray(out[key], np.float64), np.asarray(reference[key], np.float64),
                                   rtol=1e-4, atol=1e-4, equal_nan=True, err_msg=key)


def test_config_from_the_file_matches_the_architecture(original_hub, tiny_hub):
    import json

    snapshot = next((original_hub / "models--facebook--sapiens2-pointmap-0.4b" / "snapshots").iterdir())
    config = sapiens2_original.config_for(snapshot / "sapiens2_0.4b_pointmap.safetensors",
                                          "Sapiens2ForPointmapEstimation", "0.4b", (64, 48))
    truth_dir = next((tiny_hub / "models--facebook--sapiens2-pointmap-0.4b" / "snapshots").iterdir())
    truth = json.loads((truth_dir / "config.json").read_text())
    for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                "num_register_tokens", "patch_size", "num_key_value_heads_per_layer"):
        assert getattr(config, key) == truth[key], key
    for key in ("upsample_out_channels", "upsample_kernel_sizes", "conv_out_channels", "conv_kernel_sizes",
                "scale_conv_out_channels", "scale_final_hidden_sizes"):
        assert getattr(config.head_config, key) == truth["head_config"][key], key


def test_an_unknown_file_fails_clearly(tmp_path, offline_hub):
    import torch
    from safetensors.torch import save_file

    folder = tmp_path / "files"
    folder.mkdir()
    save_file({"encoder.weight": torch.zeros(2, 2)}, str(folder / "sapiens2_0.4b_seg.safetensors"))
    cache = tmp_path / "hub"
    install_in_hub_cache(cache, "facebook/sapiens2-seg-0.4b", folder)
    offline_hub(cache)
    b = sapiens2.Sapiens2Backend("0.4b", device="cpu", tasks=("seg",))
    with pytest.raises(BackendError, match="not an original Sapiens2 Sapiens2ForSemanticSegmentation checkpoint"):
        b.load()
    (folder / "sapiens2_0.4b_seg.safetensors").write_bytes(b"not safetensors")
    shutil.rmtree(cache)
    install_in_hub_cache(cache, "facebook/sapiens2-seg-0.4b", folder)
    with pytest.raises(BackendError, match="not a readable safetensors file"):
        sapiens2.Sapiens2Backend("0.4b", device="cpu", tasks=("seg",)).load()
