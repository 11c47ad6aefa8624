# SPDX-License-Identifier: GPL-3.0-or-later
"""The dense post-processing of intrinsics.py and normals.py in torch, where the model's maps
already are (the GPU): the intrinsics fit, the depth-derived normals and the normal-sign
calibration reduce 1024x768 maps to a few numbers there, so a GPU server copies back only the
final maps. Same arithmetic as the numpy functions (their tests hold these to them): masks instead
of compaction (no host sync), sums in float64 (on the CPU where the device has no float64: MPS).

torch is imported lazily: importing this module is free.
"""

from __future__ import annotations

import itertools

import numpy as np

from .intrinsics import MIN_FIT_POINTS
from .normals import MIN_CALIBRATION_PIXELS, MIN_COSINE_GAIN, NormalCalibration


def as_device_tensor(array, device):
    """A runner's output (numpy or tensor) as a float32 tensor on ``device``."""
    import torch

    if isinstance(array, torch.Tensor):
        return array.to(device=device, dtype=torch.float32)
    arr = np.asarray(array, np.float32)
    if not arr.flags.writeable or not arr.flags.c_contiguous:  # torch needs its own writable buffer
        arr = np.array(arr, np.float32)
    return torch.from_numpy(arr).to(device)


def mask_tensor(mask: np.ndarray, device):
    """A bool mask onto ``device``. To CUDA from pinned memory, non-blocking: a pageable copy
    would wait for every kernel queued before it (the forwards the host is overlapping with)."""
    import torch

    t = torch.from_numpy(np.ascontiguousarray(mask, bool))
    if str(device).startswith("cuda"):
        return t.pin_memory().to(device, non_blocking=True)
    return t.to(device)


def masked_to_host(values, mask) -> np.ndarray:
    """float32 numpy copy of ``values`` [H,W] or [H,W,C] with NaN outside ``mask`` [H,W]."""
    import torch

    m = mask if values.dim() == mask.dim() else mask[..., None]
    return torch.where(m, values, torch.tensor(float("nan"), dtype=values.dtype, device=values.device)) \
        .cpu().numpy().astype(np.float32, copy=False)


def erode(mask, iterations: int):
    """scipy.ndimage.binary_erosion(mask, iterations=...) for a bool tensor [H,W]: the default
    cross-shaped structure, outside the image counts as background (border_value=0)."""
    import torch
    import torch.nn.functional as F

    out = mask
    for _ in range(iterations):
        p = F.pad(out.to(torch.uint8)[None], (1, 1, 1, 1))[0].bool()  # a background frame
        out = out & p[:-2, 1:-1] & p[2:, 1:-1] & p[1:-1, :-2] & p[1:-1, 2:]
    return out


def _wide(t):
    """float64 where the device has it (MPS has not: the CPU)."""
    import torch

    return (t.cpu() if t.device.type == "mps" else t).to(torch.float64)


def _finite_vectors(v):
    import torch

    return torch.isfinite(v).all(-1)


def fit_intrinsics(points, valid=None):
    """intrinsics.fit_intrinsics for a points tensor [H,W,3] (valid: bool tensor [H,W] or None)."""
    import torch

    with torch.inference_mode():
        pts = _wide(points)
        h, w = pts.shape[:2]
        x, y, z = pts.unbind(-1)
        ok = (z > 1e-6) & _finite_vectors(pts)
        if valid is not None:
            ok &= valid.to(ok.device)
        count = int(ok.sum())
        if count < MIN_FIT_POINTS:
            return None, float("nan")
        okf = ok.to(torch.float64)
        z_safe = torch.where(ok, z, 1.0)
        cols = (torch.arange(w, device=pts.device, dtype=torch.float64) + 0.5).expand(h, w)
        rows = (torch.arange(h, device=pts.device, dtype=torch.float64) + 0.5)[:, None].expand(h, w)
        fits = []
        for ray, pix in ((torch.where(ok, x / z_safe, 0.0), cols), (torch.where(ok, y / z_safe, 0.0), rows)):
            mean_ray = ray.sum() / count
            centred = (ray - mean_ray) * okf
            spread = (centred * centred).sum()
            mean_pix = (pix * okf).sum() / count
            slope = (centred * pix).sum() / spread
            intercept = mean_pix - slope * mean_ray
            resid = (pix - (slope * ray + intercept)) * okf
            fits.append(torch.stack([spread, slope, intercept, (resid * resid).sum()]))
        (spread_u, fx, cx, ru2), (spread_v, fy, cy, rv2) = torch.stack(fits).cpu().numpy()
    if np.sqrt(spread_u / count) < 1e-6 or np.sqrt(spread_v / count) < 1e-6:  # no spread of X/Z or Y/Z
        return None, float("nan")
    if not (fx > 0 and fy > 0):
        return None, float("nan")
    rms = float(np.sqrt((ru2 + rv2) / count))
    return np.array([[fx, 0.0, cx], [0.0, fy, cy], [0.0, 0.0, 1.0]], np.float32), rms


def normals_from_points(points, valid=None):
    """normals.normals_from_points for a points tensor [H,W,3] -> [H,W,3] float32 (NaN: none)."""
    import torch

    with torch.inference_mode():
        p = points.to(torch.float32)
        h, w = p.shape[:2]
        out = torch.full((h, w, 3), float("nan"), dtype=torch.float32, device=p.device)
        if h < 3 or w < 3:
            return out
        ok = _finite_vectors(p)
        if valid is not None:
            ok &= valid.to(ok.device)
        inner = ok[1:-1, 1:-1] & ok[1:-1, 2:] & ok[1:-1, :-2] & ok[2:, 1:-1] & ok[:-2, 1:-1]
        du = p[1:-1, 2:] - p[1:-1, :-2]
        dv = p[2:, 1:-1] - p[:-2, 1:-1]
        # -(du x dv), written out as normals.py does
        n = torch.stack([dv[..., 1] * du[..., 2] - dv[..., 2] * du[..., 1],
                         dv[..., 2] * du[..., 0] - dv[..., 0] * du[..., 2],
                         dv[..., 0] * du[..., 1] - dv[..., 1] * du[..., 0]], -1)
        norm = torch.sqrt(n[..., 0] * n[..., 0] + n[..., 1] * n[..., 1] + n[..., 2] * n[..., 2])
        keep = inner & torch.isfinite(norm) & (norm >= 1e-12)
        out[1:-1, 1:-1] = torch.where(keep[..., None], n / norm[..., None], float("nan"))
        return out


def calibrate_normal_signs(predicted, reference, valid=None) -> NormalCalibration:
    """normals.calibrate_normal_signs for tensors [H,W,3]: masked float64 sums on the device, the
    sign choice (8 candidates) on the host."""
    import torch

    with torch.inference_mode():
        pred, ref = _wide(predicted), _wide(reference)
        ok = _finite_vectors(pred) & _finite_vectors(ref)
        if valid is not None:
            ok &= valid.to(ok.device)
        count = int(ok.sum())
        if count < MIN_CALIBRATION_PIXELS:
            return NormalCalibration((1.0, 1.0, 1.0), float("nan"), float("nan"), count)
        products = torch.where(ok[..., None], pred * ref, 0.0)  # a_i * b_i per pixel and axis
        per_axis = products.sum((0, 1)).cpu().numpy() / count
        identity = float(per_axis.sum())
        best = max(itertools.product((1.0, -1.0), repeat=3), key=lambda s: float(np.dot(s, per_axis)))
        if float(np.dot(best, per_axis)) - identity < MIN_COSINE_GAIN:
            best = (1.0, 1.0, 1.0)

        def mean_angle(signs) -> float:
            dots = (products * torch.as_tensor(signs, dtype=products.dtype, device=products.device)).sum(-1)
            angles = torch.rad2deg(torch.arccos(dots.clamp(-1.0, 1.0)))
            return float(torch.where(ok, angles, 0.0).sum()) / count

        before = mean_angle((1.0, 1.0, 1.0))
        after = before if best == (1.0, 1.0, 1.0) else mean_angle(best)
    return NormalCalibration(tuple(best), after, before, count)
