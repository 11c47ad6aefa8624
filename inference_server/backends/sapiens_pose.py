# SPDX-License-Identifier: GPL-3.0-or-later
"""The Sapiens pipeline's pose stage (sapiens_pipeline.py): top-down, on person crops cut from the
original photos, the flip test's mirrored crops beside them, the heatmaps decoded where the model
left them."""

from __future__ import annotations

import time

import numpy as np

from ..processing import heatmaps
from ..processing.goliath import FLIP_PAIRS

POSE_BATCH = 8  # people per pose forward pass
# The pose flip test's flipped crops in the same forward as the crops (a batch of 2n): None =
# on accelerators only (on the CPU two forwards of n keep the peak memory); True/False forces it.
FLIP_IN_ONE_FORWARD: bool | None = None


def run_pose(runner, photos: list, times) -> None:
    """Top-down pose: the person crops of ALL photos (sapiens_pipeline's photos, with their
    grid, image, boxes and options) go through the model together; each photo's ``keypoints``
    [P,308,3] are filled in place. ``times``: sapiens_pipeline.StageTimes."""
    if not photos:
        return
    import torch

    from ..processing.resize_pad import crop_people, photo_tensor

    mh, mw = runner.pose_input_hw
    owners, centres, sizes, crops, to_grid = [], [], [], [], []
    t0 = time.perf_counter()
    for i, p in enumerate(photos):
        # Crop from the ORIGINAL photo (not the maps grid): small people, faces and hands keep
        # their pixels. Boxes go grid -> photo, keypoints come back photo -> grid.
        (gh, gw), (ih, iw) = p.grid.shape[:2], p.image.shape[:2]
        scale = np.asarray([iw / gw, ih / gh])
        boxes = np.asarray(p.boxes, np.float64)[:, :4].reshape(-1, 4)
        edges = np.concatenate([boxes[:, :2], boxes[:, 2:] + 1.0], 1) * np.tile(scale, 2)  # continuous
        c, s = heatmaps.crop_params(np.concatenate([edges[:, :2], edges[:, 2:] - 1.0], 1), aspect_wh=mw / mh)
        if len(c):
            owners += [(i, j) for j in range(len(c))]
            centres.append(c)
            sizes.append(s)
            to_grid.append(np.broadcast_to(scale, (len(c), 2)))
            source = p.photo if (ih, iw) == (gh, gw) else photo_tensor(p.image, p.photo.device)
            crops.append(crop_people(source, c, s, runner.pose_input_hw, runner.mean, runner.std))
            del source
    times.add("preprocess", t0)
    if not crops:
        return
    centres, sizes, crops = np.concatenate(centres), np.concatenate(sizes), torch.cat(crops)
    to_grid = np.concatenate(to_grid)
    for start in range(0, len(owners), POSE_BATCH):
        sl = slice(start, start + POSE_BATCH)
        t0 = time.perf_counter()
        # Heatmaps stay on the model's device (308 maps of 256x192 per person): the flip-back,
        # the averaging and the decoding run there, and only the keypoints come back.
        flip = [photos[i].options.flip_test for i, _ in owners[sl]]
        one_forward = crops.device.type != "cpu" if FLIP_IN_ONE_FORWARD is None else FLIP_IN_ONE_FORWARD
        if any(flip) and one_forward:
            # On an accelerator the flipped crops share the forward (one batch of 2n: fuller
            # batches, one launch sequence, the same shape as the dense tasks' batches when
            # POSE_BATCH is half of them); on the CPU two forwards of n keep the peak memory.
            n = crops[sl].shape[0]
            both = torch.as_tensor(runner.pose(torch.cat([crops[sl], crops[sl].flip(-1)])))
            hm, flipped = both[:n], heatmaps.flip_back_torch(both[n:], FLIP_PAIRS)
            del both
        else:
            hm = torch.as_tensor(runner.pose(crops[sl]))
            flipped = (heatmaps.flip_back_torch(torch.as_tensor(runner.pose(crops[sl].flip(-1))), FLIP_PAIRS)
                       if any(flip) else None)
        if flipped is not None:
            averaged = 0.5 * (hm + flipped)
            hm = averaged if all(flip) else torch.where(
                torch.as_tensor(flip, device=hm.device)[:, None, None, None], averaged, hm)
            del flipped, averaged
        times.add("forward_pose", t0)
        t0 = time.perf_counter()
        xy, score = heatmaps.decode_heatmaps_torch(hm)
        xy_img = heatmaps.heatmap_to_image(xy, centres[sl], sizes[sl], hm.shape[-2:])
        del hm
        # photo pixel-index -> canonical (pixel centres at +0.5) -> maps grid
        xy_img = (xy_img + 0.5) / to_grid[sl][:, None, :]
        xy_img[score <= 0] = 0.0
        score = np.clip(np.nan_to_num(score, nan=0.0), 0.0, 1.0)
        for row, (i, j) in enumerate(owners[sl]):
            photos[i].keypoints[j, :, :2] = xy_img[row]
            photos[i].keypoints[j, :, 2] = score[row]
        times.add("postprocess", t0)
