# SPDX-License-Identifier: GPL-3.0-or-later
"""Top-down pose geometry and heatmap decoding: numpy + scipy.ndimage (the reference), and the
same decoding in torch on the model's device (``*_torch``; torch is imported only there).

Coordinates here are *pixel-index* coordinates (pixel centres at integers), the UDP convention the
Sapiens pose models are trained with. The canonical maps put pixel centres at +0.5; the caller adds
that offset once, when it writes ``keypoints``.

The decode reproduces Sapiens2's reference post-processing (argmax, Gaussian blur that keeps the
maximum, log, one Newton step on the Hessian = DARK with UDP) and its back-projection
``kp / (heatmap_size - 1) * crop_scale + centre - crop_scale / 2``.
"""

from __future__ import annotations

import numpy as np

CROP_PADDING = 1.25  # box enlargement around a person before cropping (Sapiens' bbox padding)
BLUR_KERNEL = 11  # DARK refinement blur, as in the reference decoder


def crop_params(boxes_xyxy: np.ndarray, aspect_wh: float, padding: float = CROP_PADDING):
    """Centre [N,2] and crop size [N,2] (w, h) of each box, enlarged by ``padding`` and widened or
    heightened to the model's aspect ratio ``aspect_wh`` = input width / input height (3:4 for
    1024x768), never shrunk. Boxes are inclusive pixel-index extents (x0, y0, x1, y1)."""
    boxes = np.asarray(boxes_xyxy, np.float64).reshape(-1, 4)
    x0, y0, x1, y1 = boxes.T
    centre = np.stack([(x0 + x1) / 2.0, (y0 + y1) / 2.0], axis=-1)
    w = (x1 - x0 + 1.0) * padding
    h = (y1 - y0 + 1.0) * padding
    wider = w > h * aspect_wh
    size = np.where(wider[:, None], np.stack([w, w / aspect_wh], -1), np.stack([h * aspect_wh, h], -1))
    return centre, size


def gaussian_blur_keep_max(heatmaps: np.ndarray, kernel: int = BLUR_KERNEL) -> np.ndarray:
    """Separable Gaussian blur of [..., H, W] maps with zero borders, rescaled so each map keeps its
    original maximum (cv2.GaussianBlur's sigma rule for ``sigma=0``)."""
    taps = _blur_taps(kernel)
    from scipy.ndimage import correlate1d

    hm = np.asarray(heatmaps, np.float64)
    # Zero borders (mode="constant"), as the reference pads with zeros before blurring.
    out = correlate1d(hm, taps, axis=-1, mode="constant", cval=0.0)
    out = correlate1d(out, taps, axis=-2, mode="constant", cval=0.0)
    old_max = hm.max(axis=(-2, -1), keepdims=True)
    new_max = out.max(axis=(-2, -1), keepdims=True)
    scale = np.where(new_max > 0, old_max / np.where(new_max > 0, new_max, 1.0), 1.0)
    return out * scale


def decode_heatmaps(heatmaps: np.ndarray, kernel: int = BLUR_KERNEL):
    """Sub-pixel keypoints from heatmaps [N,K,H,W] -> (xy [N,K,2] in heatmap pixels, score [N,K]).

    Score is the raw heatmap maximum (the models' confidence); a map whose maximum is <= 0 gives
    location (-1, -1). Refinement: one Newton step of the log of the blurred heatmap around the
    argmax (DARK), which is exact for a Gaussian peak. numpy in float64: the reference for
    :func:`decode_heatmaps_torch`, which the pipeline runs on the model's device.
    """
    hm = np.asarray(heatmaps, np.float64)
    n, k, h, w = hm.shape
    flat = hm.reshape(n, k, -1)
    score = flat.max(-1)
    idx = flat.argmax(-1)
    if h < 3 or w < 3:
        return _no_refinement(idx, score, w)
    blurred = gaussian_blur_keep_max(hm, kernel)
    ys, xs = np.divmod(idx, w)
    rows = np.clip(ys[..., None, None] + np.arange(-1, 2)[:, None], 0, h - 1)  # edge padding
    cols = np.clip(xs[..., None, None] + np.arange(-1, 2)[None, :], 0, w - 1)
    patch = np.take_along_axis(blurred.reshape(n, k, -1), (rows * w + cols).reshape(n, k, 9), -1)
    return _refine(idx, score, patch.reshape(n, k, 3, 3), w)


def _no_refinement(idx, score, w):
    xy = np.stack([idx % w, idx // w], -1).astype(np.float64)
    return np.where(score[..., None] > 0, xy, -1.0).astype(np.float32), np.asarray(score, np.float32)


def _refine(idx: np.ndarray, score: np.ndarray, patch: np.ndarray, w: int):
    """The DARK step from the blurred (max-kept) heatmap's 3x3 patch [N,K,3,3] around each argmax
    (edge-replicated at the borders), in float64."""
    xy = np.stack([idx % w, idx // w], -1).astype(np.float64)
    logs = np.log(np.clip(np.asarray(patch, np.float64), 1e-3, 50.0))

    def at(dy, dx):
        return logs[..., 1 + dy, 1 + dx]

    c = at(0, 0)
    gx = 0.5 * (at(0, 1) - at(0, -1))
    gy = 0.5 * (at(1, 0) - at(-1, 0))
    hxx = at(0, 1) - 2 * c + at(0, -1)
    hyy = at(1, 0) - 2 * c + at(-1, 0)
    hxy = 0.5 * (at(1, 1) - at(0, 1) - at(1, 0) + 2 * c - at(0, -1) - at(-1, 0) + at(-1, -1))
    eps = np.finfo(np.float32).eps  # the reference adds float32 eps to the Hessian diagonal
    hxx = hxx + eps
    hyy = hyy + eps
    det = hxx * hyy - hxy * hxy
    safe = np.abs(det) > 1e-12
    det = np.where(safe, det, 1.0)
    dx = np.where(safe, (hyy * gx - hxy * gy) / det, 0.0)
    dy = np.where(safe, (-hxy * gx + hxx * gy) / det, 0.0)
    # A Newton step longer than a pixel means the peak is not Gaussian-like there: keep the argmax.
    step_ok = (np.abs(dx) <= 1.0) & (np.abs(dy) <= 1.0)
    refined = xy - np.where(step_ok[..., None], np.stack([dx, dy], -1), 0.0)
    refined = np.where(score[..., None] > 0, refined, -1.0)
    return refined.astype(np.float32), np.asarray(score, np.float32)


def _blur_taps(kernel: int) -> np.ndarray:
    if kernel % 2 == 0 or kernel <= 1:
        raise ValueError("blur kernel must be an odd integer > 1")
    sigma = 0.3 * ((kernel - 1) * 0.5 - 1) + 0.8  # cv2.GaussianBlur's rule for sigma=0
    half = kernel // 2
    taps = np.exp(-0.5 * (np.arange(-half, half + 1) / sigma) ** 2)
    return taps / taps.sum()


def _blur_torch(hm, kernel: int, banded: bool | None = None):
    """Separable zero-border Gaussian blur of float32 [..., H, W] on hm's device, in plain float32
    arithmetic. CPU: one banded (Toeplitz) matrix per axis, two matmuls (MKL, several times faster
    than a depthwise convolution). Elsewhere: shifted multiply-adds, which a GPU does in well
    under a millisecond and which, unlike cuDNN convolutions or matmuls, never run in TF32."""
    import torch

    weights = _blur_taps(kernel)
    half = kernel // 2
    h, w = hm.shape[-2:]
    if banded if banded is not None else hm.device.type == "cpu":
        def band(size):
            i = torch.arange(size, device=hm.device)
            offset = i[:, None] - i[None, :]  # [src, dst] = taps[src - dst + half]: zero borders
            taps = torch.as_tensor(weights, dtype=torch.float32, device=hm.device)
            return torch.where(offset.abs() <= half, taps[(offset + half).clamp(0, kernel - 1)], 0.0)

        return band(h).T @ (hm @ band(w))
    out = torch.zeros_like(hm)
    padded = torch.nn.functional.pad(hm, (half, half))
    for t in range(kernel):
        out.add_(padded[..., t:t + w], alpha=float(weights[t]))  # host floats: no device syncs
    rows = torch.zeros_like(hm)
    padded = torch.nn.functional.pad(out, (0, 0, half, half))
    for t in range(kernel):
        rows.add_(padded[..., t:t + h, :], alpha=float(weights[t]))
    return rows


def decode_heatmaps_torch(heatmaps, kernel: int = BLUR_KERNEL):
    """:func:`decode_heatmaps` for a torch tensor [N,K,H,W], run where the tensor lives (the GPU):
    argmax, the max-keeping blur and the 3x3 patches there, then only [N,K,12] numbers come to
    the host for the Newton step (float64, shared with the numpy decoder). The blur runs in
    float32 (numpy: float64): keypoints agree to ~1e-5 heatmap pixels."""
    import torch

    with torch.inference_mode():
        return _decode_torch(heatmaps.float(), kernel)


def _decode_torch(hm, kernel: int):
    import torch

    n, k, h, w = hm.shape
    flat = hm.reshape(n, k, -1)
    idx = flat.argmax(-1)
    score = flat.gather(-1, idx[..., None])
    if h < 3 or w < 3:
        small = torch.cat([score, idx[..., None].float()], -1).cpu().numpy()
        return _no_refinement(small[..., 1].astype(np.int64), small[..., 0].astype(np.float64), w)
    blurred = _blur_torch(hm, kernel).reshape(n, k, -1)
    new_max = blurred.amax(-1, keepdim=True)
    steps = torch.arange(-1, 2, device=hm.device)
    rows = ((idx // w)[..., None, None] + steps[:, None]).clamp(0, h - 1)
    cols = ((idx % w)[..., None, None] + steps[None, :]).clamp(0, w - 1)
    patch = blurred.gather(-1, (rows * w + cols).reshape(n, k, 9))
    # one small copy (and one sync): score, argmax (exact in float32 below 2**24 pixels), max, patch
    small = torch.cat([score, idx[..., None].float(), new_max, patch], -1).cpu().numpy().astype(np.float64)
    score, idx, new_max, patch = small[..., 0], small[..., 1].astype(np.int64), small[..., 2], small[..., 3:]
    scale = np.where(new_max > 0, score / np.where(new_max > 0, new_max, 1.0), 1.0)
    return _refine(idx, score, (patch * scale[..., None]).reshape(n, k, 3, 3), w)


def heatmap_to_image(xy_heatmap: np.ndarray, centre: np.ndarray, size: np.ndarray, heatmap_hw) -> np.ndarray:
    """UDP back-projection of heatmap coordinates [N,K,2] into the photo (pixel-index coords)."""
    hh, hw = heatmap_hw
    denom = np.array([hw - 1.0, hh - 1.0])
    xy = np.asarray(xy_heatmap, np.float64)
    return (xy / denom * size[:, None, :] + centre[:, None, :] - 0.5 * size[:, None, :]).astype(np.float32)


def image_to_heatmap(xy_image: np.ndarray, centre: np.ndarray, size: np.ndarray, heatmap_hw) -> np.ndarray:
    """Inverse of :func:`heatmap_to_image` (used to build known-answer heatmaps in tests)."""
    hh, hw = heatmap_hw
    denom = np.array([hw - 1.0, hh - 1.0])
    xy = np.asarray(xy_image, np.float64)
    return ((xy - centre[:, None, :]) / size[:, None, :] + 0.5) * denom


def flip_back(heatmaps_of_flipped: np.ndarray, flip_pairs) -> np.ndarray:
    """Turn heatmaps predicted on a horizontally flipped crop back into the original crop's frame:
    mirror each map and swap every left/right keypoint pair (a mirrored left wrist is a right one)."""
    hm = np.asarray(heatmaps_of_flipped)[..., ::-1].copy()
    pairs = np.asarray(flip_pairs, np.int64).reshape(-1, 2)
    left, right = pairs[:, 0], pairs[:, 1]
    out = hm.copy()
    out[:, left] = hm[:, right]
    out[:, right] = hm[:, left]
    return out


def flip_back_torch(heatmaps_of_flipped, flip_pairs):
    """:func:`flip_back` for a torch tensor, on its device."""
    import torch

    k = heatmaps_of_flipped.shape[1]
    partner = np.arange(k)
    pairs = np.asarray(flip_pairs, np.int64).reshape(-1, 2)
    partner[pairs[:, 0]], partner[pairs[:, 1]] = pairs[:, 1], pairs[:, 0]
    index = torch.as_tensor(partner, device=heatmaps_of_flipped.device)
    return heatmaps_of_flipped.flip(-1).index_select(1, index)


def gaussian_heatmap(hw, centre_xy, sigma: float = 2.0) -> np.ndarray:
    """A unit-peak Gaussian map [H,W] centred at a sub-pixel (x, y): the training target's shape."""
    h, w = hw
    ys, xs = np.mgrid[0:h, 0:w].astype(np.float64)
    return np.exp(-((xs - centre_xy[0]) ** 2 + (ys - centre_xy[1]) ** 2) / (2.0 * sigma**2))
