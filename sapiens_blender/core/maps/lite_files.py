# SPDX-License-Identifier: GPL-3.0-or-later
"""Read the files the official Sapiens-lite (v1) demo scripts write, as canonical Maps.

Per image ``<stem>`` the lite scripts write, each into the output folder of its task:
depth ``<stem>.npy`` (float [H,W], relative), normal ``<stem>.npy`` (float [H,W,3], unit),
seg ``<stem>_seg.npy`` (class ids [H,W]) and ``<stem>.npy`` (bool foreground), pose
``<stem>.json`` (``instance_info[].keypoints`` [308,2] + ``keypoint_scores`` [308]). All are at
the photo's own resolution. Files are found anywhere under the given folder and told apart by
content (dtype and shape), so any folder layout works.

Conversions (documented in docs/cli.md, "Sapiens-lite files"):
- v1 depth is relative (per-image foreground min-max, larger = farther): it is mapped to
  Z = Z0 + EXTENT * (d - median) / spread, with Z0 = f * ASSUMED_HEIGHT_M / (person's pixel
  height) and EXTENT = ASSUMED_DEPTH_EXTENT_M front-to-back; ``metric`` is false.
- focal length unknown: fx = fy = 0.75 * long side (Sapiens' 768 px focal at 1024 px), centred.
- normals: v1's Y/Z signs are undocumented; when the foreground's median Z points away from the
  camera, Y and Z are negated (a 180° turn about X) so normals face the camera as the contract
  requires.
- instances: v1 segmentation is semantic; with several people each foreground pixel goes to
  the person whose confident keypoints are nearest.
numpy + stdlib only.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

import numpy as np

from .goliath import PART_NAMES_SAPIENS1
from .canonical import NUM_KEYPOINTS, Maps, MapsError
from ..files.safe_read import open_regular, read_json

ASSUMED_HEIGHT_M = 1.7
ASSUMED_DEPTH_EXTENT_M = 0.3
KEYPOINT_THRESHOLD = 0.3


class LiteFilesError(MapsError):
    """The lite output folder lacks a file we need or holds one we cannot read."""


def find_lite_files(folder: str | os.PathLike, stem: str) -> dict[str, Path]:
    """{'depth'|'normal'|'seg'|'fg'|'pose': path} for ``stem`` under ``folder`` (by content)."""
    found: dict[str, Path] = {}
    for path in sorted(Path(folder).rglob(f"{stem}*")):
        if path.name == f"{stem}_seg.npy":
            found["seg"] = path
        elif path.name == f"{stem}.json":
            found["pose"] = path
        elif path.name == f"{stem}.npy":
            shape, dtype = _npy_header(path)
            if dtype == bool:
                found["fg"] = path
            elif len(shape) == 2:
                found["depth"] = path
            elif len(shape) == 3 and 3 in (shape[0], shape[-1]):
                found["normal"] = path
    return found


def load_lite_maps(folder: str | os.PathLike, stem: str, image: np.ndarray) -> Maps:
    """Maps for the photo ``image`` (uint8 [H,W,3] RGB) from the lite files of ``stem``."""
    files = find_lite_files(folder, stem)
    missing = [k for k in ("depth", "pose") if k not in files]
    if "seg" not in files and "fg" not in files:
        missing.append("seg (or foreground mask)")
    if missing:
        raise LiteFilesError(f"no Sapiens-lite {', '.join(missing)} file for {stem!r} under {folder}")
    h, w = image.shape[:2]
    depth_rel = _grid(files["depth"], (h, w), "depth").astype(np.float32)
    parts = _grid(files["seg"], (h, w), "seg").astype(np.uint8) if "seg" in files else None
    fg = _grid(files["fg"], (h, w), "foreground").astype(bool) if "fg" in files else parts > 0
    if parts is None:
        parts = fg.astype(np.uint8) * PART_NAMES_SAPIENS1.index("Torso")
    fg &= np.isfinite(depth_rel)
    keypoints = _read_pose(files["pose"])
    mask = _instances(fg, keypoints)
    f = 0.75 * max(w, h)
    k = np.array([[f, 0, w / 2], [0, f, h / 2], [0, 0, 1]], np.float32)
    depth = _scale_relative_depth(depth_rel, mask, f)
    normal = np.full((h, w, 3), np.nan, np.float32)
    if "normal" in files:
        normal = _read_normals(files["normal"], (h, w), fg)
    maps = Maps(image=image, mask=mask, parts=np.where(fg, parts, 0).astype(np.uint8),
                part_names=PART_NAMES_SAPIENS1, normal=normal, depth=depth, intrinsics=k,
                keypoints=keypoints[: max(1, int(mask.max()))] if len(keypoints) else keypoints,
                metric=False, source="sapiens-lite-v1")
    return maps.validate()


def _npy_header(path: Path) -> tuple[tuple, np.dtype]:
    """Shape and dtype of a .npy file from its header alone, refusing pipes (they would block),
    pickles and files too short for what their header claims."""
    with open_regular(path, LiteFilesError, "Sapiens-lite .npy file") as fh:
        return _check_npy_header(path, fh)


def _check_npy_header(path: Path, fh) -> tuple[tuple, np.dtype]:
    try:
        version = np.lib.format.read_magic(fh)
        read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                else np.lib.format.read_array_header_2_0)
        shape, _, dtype = read(fh)
    except (ValueError, OSError, SyntaxError) as exc:
        raise LiteFilesError(f"{path.name} is not a .npy array file: {exc}") from None
    if dtype.hasobject:
        raise LiteFilesError(f"{path.name} holds Python objects (a pickle); Sapiens-lite writes "
                             f"plain arrays, and pickles are never loaded")
    needed = math.prod(shape) * dtype.itemsize
    if needed > os.fstat(fh.fileno()).st_size:
        raise LiteFilesError(f"{path.name} claims {list(shape)} of {dtype} but the file is shorter")
    return tuple(shape), dtype


def _load_npy(path: Path) -> np.ndarray:
    with open_regular(path, LiteFilesError, "Sapiens-lite .npy file") as fh:
        _check_npy_header(path, fh)
        fh.seek(0)
        try:
            return np.load(fh, allow_pickle=False)
        except (ValueError, OSError, EOFError) as exc:
            raise LiteFilesError(f"{path.name} is not a readable .npy file: {exc}") from None


def _grid(path: Path, shape, what: str) -> np.ndarray:
    found, _ = _npy_header(path)
    if tuple(found[:2]) != tuple(shape):  # checked before loading: a wrong file may be huge
        raise LiteFilesError(f"{path.name}: {what} is {tuple(found[:2])}, the photo is {shape}")
    return _load_npy(path)


def _read_pose(path: Path) -> np.ndarray:
    data = read_json(path, LiteFilesError, "Sapiens-lite pose JSON file")
    try:
        rows = []
        for inst in data["instance_info"]:
            xy = np.asarray(inst["keypoints"], np.float32).reshape(-1, 2)
            score = np.asarray(inst["keypoint_scores"], np.float32).reshape(-1)
            rows.append(np.concatenate([xy, np.clip(score, 0, 1)[:, None]], 1))
    except (ValueError, KeyError, TypeError, OverflowError, RecursionError) as exc:
        raise LiteFilesError(f"{path.name} is not a Sapiens-lite pose file: {exc}") from None
    for i, row in enumerate(rows):
        if row.shape[0] != NUM_KEYPOINTS:
            raise LiteFilesError(f"{path.name}: instance {i} has {row.shape[0]} keypoints; only the "
                                 f"Goliath-308 pose model's output (308 per person) can be used")
    return np.stack(rows) if rows else np.zeros((0, NUM_KEYPOINTS, 3), np.float32)


def _instances(fg: np.ndarray, keypoints: np.ndarray) -> np.ndarray:
    """uint8 instance mask: foreground pixels go to the person with the nearest confident keypoint."""
    mask = np.zeros(fg.shape, np.uint8)
    people = [kp[kp[:, 2] >= KEYPOINT_THRESHOLD, :2] for kp in keypoints]
    if len(people) <= 1:
        mask[fg] = 1
        return mask
    rows, cols = np.nonzero(fg)
    pix = np.stack([cols + 0.5, rows + 0.5], 1).astype(np.float32)
    best = np.full(len(pix), np.inf, np.float32)
    owner = np.zeros(len(pix), np.uint8)
    for pid, pts in enumerate(people, start=1):
        if not len(pts):
            continue
        for start in range(0, len(pix), 32768):  # chunks bound the [pixels, keypoints] matrix
            chunk = pix[start:start + 32768]
            d = np.min(((chunk[:, None, :] - pts[None]) ** 2).sum(-1), axis=1)
            better = d < best[start:start + 32768]
            best[start:start + 32768][better] = d[better]
            owner[start:start + 32768][better] = pid
    mask[rows, cols] = owner
    return mask


def _scale_relative_depth(d: np.ndarray, mask: np.ndarray, focal: float) -> np.ndarray:
    out = np.full(d.shape, np.nan, np.float32)
    for pid in np.unique(mask[mask > 0]):
        person = mask == pid
        values = d[person]
        rows = np.nonzero(person.any(axis=1))[0]
        height_px = max(float(rows[-1] - rows[0] + 1), 1.0)
        z0 = focal * ASSUMED_HEIGHT_M / height_px
        lo, mid, hi = np.percentile(values, [5, 50, 95])
        spread = max(float(hi - lo), 1e-6)
        out[person] = z0 + ASSUMED_DEPTH_EXTENT_M * (values - mid) / spread
    return out


def _read_normals(path: Path, shape, fg: np.ndarray) -> np.ndarray:
    found, _ = _npy_header(path)
    if tuple(shape) not in (tuple(found[:2]), tuple(found[1:3])):
        raise LiteFilesError(f"{path.name}: normal map is {found}, the photo is {shape}")
    n = _load_npy(path).astype(np.float32)
    if n.ndim == 3 and n.shape[0] == 3 and n.shape[-1] != 3:
        n = np.moveaxis(n, 0, -1)
    if n.shape[:2] != shape:
        raise LiteFilesError(f"{path.name}: normal map is {n.shape[:2]}, the photo is {shape}")
    n = n / np.maximum(np.linalg.norm(n, axis=-1, keepdims=True), 1e-6)
    if fg.any() and np.median(n[fg][:, 2]) > 0:
        n[..., 1:] *= -1.0
    n[~fg] = np.nan
    return n
