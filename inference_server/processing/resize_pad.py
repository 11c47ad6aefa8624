# SPDX-License-Identifier: GPL-3.0-or-later
"""Model-input tensors from photos and model outputs back onto the photo's pixel grid (torch).

Two ways into a model's fixed input (H x W, 1024 x 768 for the released models), per task and
family (sapiens.md 2.3, 2.8):
- plain resize, aspect not kept (Sapiens2 seg; every Sapiens v1 dense task);
- aspect-preserving resize then centred zero padding (Sapiens2 normal and pointmap). The padding
  geometry is the one of transformers' Sapiens2ImageProcessor (int() of the scaled size, the odd
  pixel of padding at the bottom/right) so outputs can be cropped back exactly.
Padding is black *pixels* (added before normalisation), as in the reference pipeline.

torch is imported inside the functions: this module is importable without it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

# RGB, 0-255 scale. Sapiens2 = ImageNet statistics (transformers IMAGENET_DEFAULT_MEAN/STD x 255).
SAPIENS2_MEAN = (123.675, 116.28, 103.53)
SAPIENS2_STD = (58.395, 57.12, 57.375)
# Sapiens v1 lite demos use these rounded values (lite/demo/adhoc_image_dataset.py).
SAPIENS1_MEAN = (123.5, 116.5, 103.5)
SAPIENS1_STD = (58.5, 57.0, 57.5)


@dataclass(frozen=True)
class InputPlan:
    """Where the photo lands inside the model input: rows top..top+height, cols left..left+width."""

    source_hw: tuple[int, int]
    model_hw: tuple[int, int]
    content_hw: tuple[int, int]
    top: int = 0
    left: int = 0

    @property
    def padded(self) -> bool:
        return self.content_hw != self.model_hw


def plan_input(source_hw, model_hw, keep_aspect: bool) -> InputPlan:
    sh, sw = int(source_hw[0]), int(source_hw[1])
    mh, mw = int(model_hw[0]), int(model_hw[1])
    if not keep_aspect:
        return InputPlan((sh, sw), (mh, mw), (mh, mw))
    scale = min(mh / sh, mw / sw)
    nh, nw = max(1, min(mh, int(sh * scale))), max(1, min(mw, int(sw * scale)))
    return InputPlan((sh, sw), (mh, mw), (nh, nw), (mh - nh) // 2, (mw - nw) // 2)


def _resize(t, hw, mode: str = "bilinear"):
    import torch.nn.functional as F

    h, w = t.shape[-2:]
    if (h, w) == tuple(hw):
        return t
    # Antialias when shrinking: close to the reference's cv2.INTER_AREA, no aliasing on big photos.
    shrink = hw[0] < h or hw[1] < w
    return F.interpolate(t, size=tuple(hw), mode=mode, align_corners=False, antialias=shrink)


def normalize_pixels(t, mean, std):
    import torch

    m = torch.tensor(mean, dtype=t.dtype, device=t.device).view(1, 3, 1, 1)
    s = torch.tensor(std, dtype=t.dtype, device=t.device).view(1, 3, 1, 1)
    return (t - m) / s


def photo_tensor(image: np.ndarray, device="cpu"):
    """uint8 RGB [H,W,3] -> float32 [1,3,H,W] on ``device`` (0-255 scale)."""
    import torch

    arr = np.ascontiguousarray(image)
    if not arr.flags.writeable:  # torch.from_numpy warns on read-only buffers (decoded photos)
        arr = arr.copy()
    pixels = torch.from_numpy(arr)
    if str(device).startswith("cuda"):  # pinned + non-blocking: the copy overlaps queued GPU work
        pixels = pixels.pin_memory().to(device, non_blocking=True)
    else:
        pixels = pixels.to(device)
    return pixels.permute(2, 0, 1).unsqueeze(0).float()


def to_model_input(photo, plan: InputPlan, mean, std):
    """Photo tensor [1,3,H,W] (0-255) -> normalised model input [1,3,mh,mw] laid out as ``plan``."""
    import torch.nn.functional as F

    t = _resize(photo, plan.content_hw)
    if plan.padded:
        mh, mw = plan.model_hw
        bottom = mh - plan.content_hw[0] - plan.top
        right = mw - plan.content_hw[1] - plan.left
        t = F.pad(t, (plan.left, right, plan.top, bottom), value=0.0)
    return normalize_pixels(t, mean, std)


def to_photo_grid(maps, plan: InputPlan, out_hw):
    """Model outputs [B,C,h,w] (any resolution proportional to the input) -> [B,C,*out_hw]:
    remove the padding, then bilinear resampling (align_corners=False) onto the photo grid.

    With padding, every photo pixel centre is mapped through the exact (possibly fractional)
    padding geometry: cropping whole output pixels would shift coarse outputs by half a pixel.
    At the model's own resolution this equals crop-then-resize, the reference post-processing.
    """
    import torch
    import torch.nn.functional as F

    if not plan.padded:
        return _resize_up_or_down(maps, out_hw)
    oh, ow = int(out_hw[0]), int(out_hw[1])
    mh, mw = maps.shape[-2:]
    sy, sx = mh / plan.model_hw[0], mw / plan.model_hw[1]
    dev = maps.device
    # photo pixel centre -> model-input coordinate -> output-map coordinate (pixel edges at 0..mh)
    ys = (plan.top + (torch.arange(oh, device=dev, dtype=torch.float32) + 0.5) * plan.content_hw[0] / oh) * sy
    xs = (plan.left + (torch.arange(ow, device=dev, dtype=torch.float32) + 0.5) * plan.content_hw[1] / ow) * sx
    gy, gx = torch.meshgrid(2.0 * ys / mh - 1.0, 2.0 * xs / mw - 1.0, indexing="ij")
    grid = torch.stack([gx, gy], -1).unsqueeze(0).expand(maps.shape[0], -1, -1, -1)
    return F.grid_sample(maps, grid.to(maps.dtype), mode="bilinear", padding_mode="border", align_corners=False)


def _resize_up_or_down(t, hw):
    import torch.nn.functional as F

    if tuple(t.shape[-2:]) == tuple(hw):
        return t
    # Model outputs are smooth fields: plain bilinear, as the reference post-processing does.
    return F.interpolate(t, size=tuple(hw), mode="bilinear", align_corners=False)


def crop_people(photo, centres: np.ndarray, sizes: np.ndarray, model_hw, mean, std, flip: bool = False):
    """Top-down crops [N,3,mh,mw] of a photo tensor [1,3,H,W] (0-255), normalised.

    The crop window of person i has centre ``centres[i]`` and size ``sizes[i]`` (w, h) in
    pixel-index coordinates; it maps to the model input with the UDP convention (window corners
    to the input's first/last pixel centres, align_corners=True), bilinear when shrinking and
    bicubic when enlarging, zeros outside the photo -- the reference top-down affine warp.
    """
    import torch
    import torch.nn.functional as F

    mh, mw = int(model_hw[0]), int(model_hw[1])
    _, _, ih, iw = photo.shape
    dev = photo.device
    c = torch.as_tensor(np.asarray(centres, np.float32), device=dev)
    s = torch.as_tensor(np.asarray(sizes, np.float32), device=dev)
    n = c.shape[0]
    gy, gx = torch.meshgrid(torch.arange(mh, dtype=torch.float32, device=dev),
                            torch.arange(mw, dtype=torch.float32, device=dev), indexing="ij")
    scale_x = (mw - 1) / s[:, 0]
    scale_y = (mh - 1) / s[:, 1]
    in_x = gx / scale_x[:, None, None] + c[:, 0, None, None] - 0.5 * s[:, 0, None, None]
    in_y = gy / scale_y[:, None, None] + c[:, 1, None, None] - 0.5 * s[:, 1, None, None]
    grid = torch.stack([2.0 * in_x / max(iw - 1, 1) - 1.0, 2.0 * in_y / max(ih - 1, 1) - 1.0], -1)
    out = torch.empty((n, 3, mh, mw), dtype=photo.dtype, device=dev)
    shrink = torch.minimum(scale_x, scale_y) < 1.0
    enlarge_mode = "bilinear" if dev.type == "mps" else "bicubic"  # MPS lacks bicubic grid_sample
    for sel, mode in ((shrink, "bilinear"), (~shrink, enlarge_mode)):
        if bool(sel.any()):
            k = int(sel.sum())
            out[sel] = F.grid_sample(photo.expand(k, -1, -1, -1), grid[sel], mode=mode,
                                     padding_mode="zeros", align_corners=True)
    if flip:
        out = out.flip(-1)
    return normalize_pixels(out, mean, std)


def class_labels(logits) -> np.ndarray:
    """uint8 class ids [H,W] (host numpy) from logits [1,C,H,W] on any device: argmax there and a
    1-byte-per-pixel copy back; on the CPU numpy's argmax (about twice as fast as torch's over
    the channel axis). Ties and NaN: the first, as both libraries do."""
    import torch

    if logits.device.type == "cpu":
        return logits[0].float().numpy().argmax(0).astype(np.uint8)
    return logits[0].argmax(0).to(torch.uint8).cpu().numpy()
