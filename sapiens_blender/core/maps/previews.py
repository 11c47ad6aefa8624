# SPDX-License-Identifier: GPL-3.0-or-later
"""Preview images of the maps (numpy only): part colours, normals, depth colours, skeletons."""

from __future__ import annotations

import numpy as np

from .canonical import Maps

KEYPOINT_THRESHOLD = 0.3  # the Sapiens demos' visual threshold

# Goliath-308 skeleton for drawing: body, head, feet, then each finger from its wrist.
_BODY = [(13, 11), (11, 9), (14, 12), (12, 10), (9, 10), (5, 9), (6, 10), (5, 6), (5, 7), (6, 8), (7, 62),
         (8, 41), (1, 2), (0, 1), (0, 2), (1, 3), (2, 4), (3, 5), (4, 6), (13, 15), (13, 16), (13, 17),
         (14, 18), (14, 19), (14, 20)]


def _finger_links(wrist: int, first: int) -> list[tuple[int, int]]:
    links = []
    for finger in range(5):  # each finger: knuckle (first+4f+3) -> ... -> tip (first+4f)
        chain = [wrist] + [first + 4 * finger + j for j in (3, 2, 1, 0)]
        links += list(zip(chain[:-1], chain[1:]))
    return links


SKELETON = _BODY + _finger_links(62, 42) + _finger_links(41, 21)


def palette(count: int) -> np.ndarray:
    """Distinct uint8 RGB colours [count,3]; class 0 (background) black."""
    i = np.arange(count, dtype=np.float64)
    hue = (i * 0.61803398875) % 1.0
    h6 = hue * 6.0
    x = 1.0 - np.abs(h6 % 2.0 - 1.0)
    sector = h6.astype(int) % 6
    table = np.array([[1, 0, 2], [0, 1, 2], [2, 1, 0], [2, 0, 1], [0, 2, 1], [1, 2, 0]])  # 0=1, 1=x, 2=0
    vals = np.stack([np.ones_like(x), x, np.zeros_like(x)], -1)
    rgb = np.take_along_axis(vals, table[sector], axis=1) * np.where(i % 2 == 0, 0.95, 0.7)[:, None]
    out = (rgb * 255).astype(np.uint8)
    if count:
        out[0] = 0
    return out


def parts_preview(maps: Maps, alpha: float = 0.6) -> np.ndarray:
    colours = palette(len(maps.part_names))[maps.parts]
    fg = (maps.parts > 0)[..., None]
    blend = maps.image * (1 - alpha) + colours * alpha
    return np.where(fg, blend, maps.image * 0.4).astype(np.uint8)


def normal_preview(maps: Maps) -> np.ndarray:
    """(n + 1) / 2 of the camera-frame normals as RGB; black where unknown."""
    n = maps.normal
    ok = np.isfinite(n).all(-1, keepdims=True)
    return np.where(ok, (np.nan_to_num(n) + 1.0) * 127.5, 0).clip(0, 255).astype(np.uint8)


def _inferno_like(t: np.ndarray) -> np.ndarray:
    """A perceptual dark-purple -> orange -> pale-yellow ramp for t in [0,1] (uint8 RGB)."""
    stops = np.array([[0, 0, 4], [87, 16, 110], [188, 55, 84], [249, 142, 9], [252, 255, 164]], np.float64)
    pos = np.clip(t, 0, 1) * (len(stops) - 1)
    lo = np.floor(pos).astype(int).clip(0, len(stops) - 2)
    frac = (pos - lo)[..., None]
    return (stops[lo] * (1 - frac) + stops[lo + 1] * frac).astype(np.uint8)


def depth_preview(maps: Maps) -> np.ndarray:
    """Near = bright, far = dark (as the Sapiens demos); black where unknown."""
    d = maps.depth
    ok = np.isfinite(d)
    out = np.zeros(d.shape + (3,), np.uint8)
    if ok.any():
        lo, hi = np.percentile(d[ok], [1, 99])
        t = 1.0 - (d - lo) / (hi - lo if hi > lo else 1.0)
        out[ok] = _inferno_like(t[ok])
    return out


def _draw_line(img, p, q, colour, width=1):
    n = int(max(abs(q[0] - p[0]), abs(q[1] - p[1]))) + 1
    xs = np.linspace(p[0], q[0], n)
    ys = np.linspace(p[1], q[1], n)
    _stamp(img, xs, ys, colour, width)


def _stamp(img, xs, ys, colour, radius):
    h, w = img.shape[:2]
    for dy in range(-radius + 1, radius):
        for dx in range(-radius + 1, radius):
            x = np.floor(xs + dx).astype(int)
            y = np.floor(ys + dy).astype(int)
            ok = (x >= 0) & (x < w) & (y >= 0) & (y < h)
            img[y[ok], x[ok]] = colour


def keypoints_preview(maps: Maps, threshold: float = KEYPOINT_THRESHOLD) -> np.ndarray:
    """The photo with each person's skeleton (links whose ends both pass ``threshold``) and points."""
    img = maps.image.copy()
    width = max(1, round(max(maps.height, maps.width) / 400))
    colours = palette(len(SKELETON) + 1)[1:]
    for person in maps.keypoints:
        ok = person[:, 2] >= threshold
        for (a, b), colour in zip(SKELETON, colours):
            if ok[a] and ok[b]:
                _draw_line(img, person[a, :2], person[b, :2], colour, width)
        pts = person[ok]
        _stamp(img, pts[:, 0], pts[:, 1], (255, 255, 255), width + 1)
    return img


def all_previews(maps: Maps) -> dict[str, np.ndarray]:
    """name suffix -> uint8 RGB image."""
    return {"parts": parts_preview(maps), "normal": normal_preview(maps), "depth": depth_preview(maps),
            "keypoints": keypoints_preview(maps)}
