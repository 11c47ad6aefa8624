# SPDX-License-Identifier: GPL-3.0-or-later
"""Sapiens2 repos that hold only the original ``sapiens2_{size}_{task}.safetensors`` (no
transformers ``config.json``): the config is rebuilt from the file itself.

The backbone and head dimensions are read from the tensor shapes in the safetensors header (no
tensor is loaded): hidden size, layers, heads and the grouped-query heads of every layer, MLP
size, register tokens, patch size, the head's upsampling/conv channels and kernels, the labels and
the pointmap's scale branch. What shapes cannot tell (RoPE base, norms, input size 1024x768) is
the released architecture's (shared reference sapiens.md 4.3; transformers' Sapiens2Config
defaults are those), and the backbone is checked against the known table of sizes. The original
key names are mapped onto the transformers classes by transformers itself (its Sapiens2 checkpoint
conversion mapping, applied when ``config.transformers_weights`` names the original file).
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from ..dataplane.base import BackendError

log = logging.getLogger(__name__)

# size -> (hidden, layers, heads) of the released backbones (sapiens.md 4.3)
ARCHITECTURES = {"0.1b": (768, 12, 12), "0.4b": (1024, 24, 16), "0.8b": (1280, 32, 16),
                 "1b": (1536, 40, 24), "5b": (2432, 56, 32)}
# transformers class -> (original predictor layer, pixel-shuffle head)
HEADS = {
    "Sapiens2ForSemanticSegmentation": ("conv_seg", False),
    "Sapiens2ForPoseEstimation": ("conv_pose", False),
    "Sapiens2ForNormalEstimation": ("conv_normal", True),
    "Sapiens2ForPointmapEstimation": ("conv_pointmap", True),
}


def original_filename(hub_task: str, size: str) -> str:
    """The original file of a Sapiens2 repo, e.g. ``sapiens2_0.4b_pointmap.safetensors``."""
    return f"sapiens2_{size}_{hub_task}.safetensors"


def _shapes(path: Path) -> dict[str, list[int]]:
    from safetensors import safe_open

    try:
        with safe_open(str(path), "pt") as f:
            return {k: list(f.get_slice(k).get_shape()) for k in f.keys()}
    except Exception as exc:  # not a safetensors file, truncated header, ...
        raise BackendError(f"{path} is not a readable safetensors file ({type(exc).__name__}: {exc}); "
                           "delete it and retry", status=500) from exc


def _indexed(shapes: dict, pattern: str) -> list[list[int]]:
    """Shapes of the keys matching ``pattern`` (one group: an index), in index order."""
    found = {}
    for key, shape in shapes.items():
        m = re.fullmatch(pattern, key)
        if m:
            found[int(m.group(1))] = shape
    return [found[i] for i in sorted(found)]


def config_for(path: Path, class_name: str, size: str, image_hw=(1024, 768)):
    """A transformers Sapiens2Config for the original checkpoint at ``path`` (BackendError when the
    file is not an original Sapiens2 ``class_name`` checkpoint)."""
    import transformers

    shapes = _shapes(path)
    predictor, pixel_shuffle = HEADS[class_name]

    def need(key):
        if key not in shapes:
            raise BackendError(f"{Path(path).name} is not an original Sapiens2 {class_name} checkpoint "
                               f"(no tensor {key}); expected the file of the facebook/sapiens2-* repo",
                               status=500)
        return shapes[key]

    hidden = need("backbone.cls_token")[-1]
    layers = len(_indexed(shapes, r"backbone\.blocks\.(\d+)\.attn\.wq\.weight"))
    head_dim = need("backbone.blocks.0.attn.q_norm.weight")[0]
    heads = hidden // head_dim
    kv_heads = [s[0] // head_dim for s in _indexed(shapes, r"backbone\.blocks\.(\d+)\.attn\.wk\.weight")]
    expected = ARCHITECTURES.get(size)
    if expected and expected != (hidden, layers, heads):
        log.warning("%s: backbone %s (hidden, layers, heads) differs from the released %s %s; using the file's",
                    path, (hidden, layers, heads), size, expected)
    head = {}
    if pixel_shuffle:
        ups = _indexed(shapes, r"decode_head\.upsample_blocks\.(\d+)\.0\.weight")  # conv [4*out, in, k, k]
        head.update(use_pixel_shuffle=True, upsample_out_channels=[s[0] // 4 for s in ups],
                    upsample_kernel_sizes=[s[-1] for s in ups])
    else:
        ups = _indexed(shapes, r"decode_head\.deconv_layers\.(\d+)\.weight")  # deconv [in, out, k, k]
        head.update(upsample_out_channels=[s[1] for s in ups], upsample_kernel_size=ups[0][-1] if ups else 4)
    convs = _indexed(shapes, r"decode_head\.conv_layers\.(\d+)\.weight")
    head.update(conv_out_channels=[s[0] for s in convs], conv_kernel_sizes=[s[-1] for s in convs])
    scale_convs = _indexed(shapes, r"decode_head\.scale_conv_layers\.(\d+)\.weight")
    if scale_convs:
        finals = _indexed(shapes, r"decode_head\.scale_final_layer\.(\d+)\.weight")
        head.update(scale_conv_out_channels=[s[0] for s in scale_convs],
                    scale_conv_kernel_sizes=[s[-1] for s in scale_convs],
                    scale_final_hidden_sizes=[s[0] for s in finals[:-1]])
    config = transformers.Sapiens2Config(
        hidden_size=hidden, num_hidden_layers=layers, num_attention_heads=heads,
        num_key_value_heads_per_layer=kv_heads,
        intermediate_size=need("backbone.blocks.0.ffn.w12.weight")[0] // 2,
        num_register_tokens=need("backbone.storage_tokens")[1],
        patch_size=need("backbone.patch_embed.projection.weight")[-1],
        image_size=list(image_hw), num_labels=need(f"decode_head.{predictor}.weight")[0],
        head_config=head)
    config.architectures = [class_name]
    config.transformers_weights = Path(path).name
    return config
