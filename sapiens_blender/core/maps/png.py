# SPDX-License-Identifier: GPL-3.0-or-later
"""A minimal PNG writer (zlib + struct): previews without an image library in Blender's Python."""

from __future__ import annotations

import os
import struct
import zlib
from pathlib import Path

import numpy as np

from ..files.atomic import atomic_write_bytes

_COLOUR_TYPES = {1: 0, 2: 4, 3: 2, 4: 6}  # channels -> PNG colour type (grey, grey+alpha, RGB, RGBA)


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)


def encode_png(pixels: np.ndarray, level: int = 6) -> bytes:
    """PNG bytes of uint8 [H,W] (grey), [H,W,1|2|3|4] pixels; 8 bits per channel."""
    arr = np.asarray(pixels)
    if arr.dtype != np.uint8:
        raise ValueError(f"PNG pixels must be uint8, got {arr.dtype}")
    if arr.ndim == 2:
        arr = arr[..., None]
    if arr.ndim != 3 or arr.shape[2] not in _COLOUR_TYPES or arr.shape[0] < 1 or arr.shape[1] < 1:
        raise ValueError(f"PNG pixels must be [H,W] or [H,W,1..4], got shape {arr.shape}")
    h, w, c = arr.shape
    rows = np.concatenate([np.zeros((h, 1), np.uint8), np.ascontiguousarray(arr).reshape(h, w * c)], axis=1)
    header = struct.pack(">IIBBBBB", w, h, 8, _COLOUR_TYPES[c], 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", header)
            + _chunk(b"IDAT", zlib.compress(rows.tobytes(), level)) + _chunk(b"IEND", b""))


def write_png(path: str | os.PathLike, pixels: np.ndarray) -> Path:
    """Write atomically (temp file + rename)."""
    return atomic_write_bytes(path, encode_png(pixels))
