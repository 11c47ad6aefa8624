# SPDX-License-Identifier: GPL-3.0-or-later
"""A real clip with a known motion: the bundled astronaut photo panned along a smooth path
(a few pixels per frame), each frame with brightness flicker and saved as JPEG (quality 80).
The person is still in the photo, so her joints must follow the pan exactly."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from sapiens_blender.data import sample_photo_path


def pan_path(frames: int) -> np.ndarray:
    """[T,2] image shift (dx, dy) in pixels at each frame: up to ~4.7 px/frame."""
    t = np.arange(frames) / frames
    return np.stack([30.0 * np.sin(2 * np.pi * t), 10.0 * (1 - np.cos(2 * np.pi * t))], axis=1)


def write_clip(folder: Path, frames: int = 40, side: int = 512, seed: int = 0) -> np.ndarray:
    """Frames frame000.jpg... in ``folder``; returns the shift of each frame."""
    import cv2

    folder.mkdir(parents=True, exist_ok=True)
    photo = cv2.imread(str(sample_photo_path()))
    if photo.shape[:2] != (side, side):
        photo = cv2.resize(photo, (side, side), interpolation=cv2.INTER_AREA)
    rng = np.random.default_rng(seed)
    shifts = pan_path(frames)
    for i, (dx, dy) in enumerate(shifts):
        m = np.float32([[1, 0, dx], [0, 1, dy]])
        frame = cv2.warpAffine(photo, m, (side, side), flags=cv2.INTER_LINEAR, borderMode=cv2.BORDER_REPLICATE)
        gain = 1.0 + rng.uniform(-0.08, 0.08)
        frame = np.clip(frame.astype(np.float32) * gain, 0, 255).astype(np.uint8)
        cv2.imwrite(str(folder / f"frame{i:03d}.jpg"), frame, [cv2.IMWRITE_JPEG_QUALITY, 80])
    return shifts


def follow_error_px(animation, shifts: np.ndarray, min_measured: float = 0.9) -> tuple[float, list[str]]:
    """Mean distance (px) of the projected joints from the known motion (each joint's constant
    offset removed), over joints measured in at least ``min_measured`` of the frames."""
    track = max(animation.tracks, key=lambda t: int(t.seen.sum()))
    k = np.asarray(animation.intrinsics, np.float64)
    xyz = track.joints
    uv = np.stack([k[0, 0] * xyz[..., 0] / xyz[..., 2] + k[0, 2], k[1, 1] * xyz[..., 1] / xyz[..., 2] + k[1, 2]], -1)
    steady = uv - shifts[track.frames][:, None, :]
    measured = (~track.estimated).mean(axis=0) >= min_measured
    dev = np.linalg.norm(steady - steady.mean(axis=0, keepdims=True), axis=-1)[:, measured]
    names = [n for n, m in zip(animation.joint_names, measured) if m]
    return float(dev.mean()), names
