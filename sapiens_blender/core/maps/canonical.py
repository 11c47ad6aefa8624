# SPDX-License-Identifier: GPL-3.0-or-later
"""The canonical maps: the one contract between analysis and building.

See docs/maps_format.md. Every backend's output is converted into this form by the inference
server; ``analyze`` writes it as ``.npz``, ``build --maps`` reads it, and the add-on keeps it.
numpy + stdlib only: this runs inside Blender's Python.
"""

from __future__ import annotations

import io
import math
import os
import zipfile
from dataclasses import dataclass, field, fields
from pathlib import Path

import numpy as np

from ..files.atomic import atomic_write
from .goliath import KEYPOINT_NAMES
from ..files.safe_read import open_regular
from ..errors import SapiensError

NUM_KEYPOINTS = len(KEYPOINT_NAMES)

# Refuse absurd inputs before allocating: 8K x 8K is already far past any model's output.
MAX_PIXELS = 8192 * 8192


class MapsError(SapiensError, ValueError):
    """The maps are malformed: wrong keys, shapes, dtypes or values. The message says which."""


@dataclass
class Maps:
    """Per-pixel analysis of one photo in the camera frame (OpenCV: x right, y down, z forward).

    Optional arrays are ``None`` when the backend did not produce them.
    """

    image: np.ndarray  # uint8 [H,W,3] RGB
    mask: np.ndarray  # uint8 [H,W], 0 background, k = person k
    parts: np.ndarray  # uint8 [H,W], class id
    part_names: tuple[str, ...]
    normal: np.ndarray  # float32 [H,W,3], unit, towards the camera, NaN unknown
    depth: np.ndarray  # float32 [H,W], camera-frame Z, NaN unknown
    intrinsics: np.ndarray  # float32 [3,3]
    keypoints: np.ndarray  # float32 [P,308,3]: x, y, score
    metric: bool = True
    source: str = "unknown"
    pointmap: np.ndarray | None = None  # float32 [H,W,3]
    keypoints_3d: np.ndarray | None = None  # float32 [P,308,4]: x, y, z (m, hips at 0), confidence
    extras: dict = field(default_factory=dict)  # non-contract diagnostics, e.g. normal_agreement_deg

    # --- shape -----------------------------------------------------------------------------
    @property
    def height(self) -> int:
        return int(self.image.shape[0])

    @property
    def width(self) -> int:
        return int(self.image.shape[1])

    @property
    def person_ids(self) -> list[int]:
        """1-based ids of the people present in ``mask``."""
        ids = np.unique(self.mask)
        return [int(i) for i in ids if i != 0]

    def person_keypoints(self, person_id: int) -> np.ndarray:
        """Keypoints [308,3] of one person (row ``person_id - 1``); zeros if absent."""
        if 1 <= person_id <= self.keypoints.shape[0]:
            return self.keypoints[person_id - 1]
        return np.zeros((NUM_KEYPOINTS, 3), np.float32)

    # --- validation --------------------------------------------------------------------------
    def validate(self) -> "Maps":
        """Check shapes, dtypes and value ranges; coerce dtypes where lossless. Returns self."""
        img = np.asarray(self.image)
        if img.ndim != 3 or img.shape[2] != 3:
            raise MapsError(f"image must be [H,W,3] RGB, got shape {img.shape}")
        if img.dtype != np.uint8:
            raise MapsError(f"image must be uint8, got {img.dtype}")
        h, w = img.shape[:2]
        if h < 1 or w < 1:
            raise MapsError("image is empty")
        if h * w > MAX_PIXELS:
            raise MapsError(f"maps of {w}x{h} exceed the {MAX_PIXELS} pixel limit")
        self.image = img

        def grid(name, arr, channels, dtype, kinds):
            arr = np.asarray(arr)
            want = (h, w) if channels is None else (h, w, channels)
            if arr.shape != want:
                raise MapsError(f"{name} must have shape {want} to match the image, got {arr.shape}")
            if arr.dtype.kind not in kinds:
                raise MapsError(f"{name} must be {np.dtype(dtype).name}, got {arr.dtype}")
            if arr.dtype != dtype:
                arr = arr.astype(dtype)
            return arr

        self.mask = grid("mask", self.mask, None, np.uint8, "u")
        self.parts = grid("parts", self.parts, None, np.uint8, "u")
        self.normal = grid("normal", self.normal, 3, np.float32, "f")
        self.depth = grid("depth", self.depth, None, np.float32, "f")
        if self.pointmap is not None:
            self.pointmap = grid("pointmap", self.pointmap, 3, np.float32, "f")

        self.part_names = tuple(str(n) for n in self.part_names)
        if not self.part_names:
            raise MapsError("part_names is empty")
        bad = part_name_problem(self.part_names)
        if bad:
            raise MapsError(bad)
        if int(self.parts.max(initial=0)) >= len(self.part_names):
            raise MapsError(
                f"parts uses class id {int(self.parts.max())} but part_names has only "
                f"{len(self.part_names)} names"
            )

        k = np.asarray(self.intrinsics, dtype=np.float64)
        if k.shape != (3, 3):
            raise MapsError(f"intrinsics must be 3x3, got {k.shape}")
        if not np.all(np.isfinite(k)) or k[0, 0] <= 0 or k[1, 1] <= 0:
            raise MapsError("intrinsics must be finite with positive focal lengths")
        self.intrinsics = k.astype(np.float32)

        kp = np.asarray(self.keypoints)
        if kp.size == 0:
            kp = np.zeros((0, NUM_KEYPOINTS, 3), np.float32)
        if kp.ndim != 3 or kp.shape[1:] != (NUM_KEYPOINTS, 3):
            raise MapsError(f"keypoints must be [P,{NUM_KEYPOINTS},3], got {kp.shape}")
        kp = kp.astype(np.float32)
        scores = kp[..., 2]
        if np.any(~np.isfinite(scores)) or np.any((scores < 0) | (scores > 1)):
            raise MapsError("keypoint scores must lie in [0, 1]")
        self.keypoints = kp

        if self.keypoints_3d is not None:
            k3 = np.asarray(self.keypoints_3d)
            if k3.ndim != 3 or k3.shape[1:] != (NUM_KEYPOINTS, 4) or k3.shape[0] != kp.shape[0]:
                raise MapsError(f"keypoints_3d must be [P,{NUM_KEYPOINTS},4] with the keypoints' "
                                f"{kp.shape[0]} rows, got {k3.shape}")
            if k3.dtype.kind != "f":
                raise MapsError(f"keypoints_3d must be float32, got {k3.dtype}")
            k3 = k3.astype(np.float32)
            conf = k3[..., 3]
            if np.any(np.isinf(k3)) or np.any((conf < 0) | (conf > 1)):
                raise MapsError("keypoints_3d must be finite or NaN, confidences in [0, 1]")
            self.keypoints_3d = k3

        n_people = int(self.mask.max(initial=0))
        if kp.shape[0] and kp.shape[0] < n_people:
            raise MapsError(f"mask has person id {n_people} but keypoints has {kp.shape[0]} rows")
        self.metric = bool(np.asarray(self.metric))
        self.source = str(np.asarray(self.source))
        return self

    # --- I/O -----------------------------------------------------------------------------------
    def to_arrays(self) -> dict[str, np.ndarray]:
        """The contract keys (+ array extras) as numpy arrays (strings as unicode arrays, no pickles)."""
        out = {
            "image": self.image,
            "mask": self.mask,
            "parts": self.parts,
            "part_names": np.asarray(self.part_names, dtype=np.str_),
            "normal": self.normal,
            "depth": self.depth,
            "metric": np.asarray(bool(self.metric)),
            "intrinsics": self.intrinsics,
            "keypoints": self.keypoints,
            "source": np.asarray(str(self.source), dtype=np.str_),
        }
        if self.pointmap is not None:
            out["pointmap"] = self.pointmap
        if self.keypoints_3d is not None:
            out["keypoints_3d"] = self.keypoints_3d
        # Extras (diagnostics such as normal_agreement_deg, notes) round-trip through save/load
        # when they are plain numeric/text arrays; objects that would need a pickle are dropped.
        for key, value in self.extras.items():
            if key in out:
                continue
            arr = np.asarray(value)
            if arr.dtype.kind == "O":
                try:
                    arr = arr.astype(np.str_)
                except (TypeError, ValueError):
                    continue
            if arr.dtype.kind in "biufcUS":
                out[key] = arr
        return out

    @classmethod
    def from_arrays(cls, arrays: dict) -> "Maps":
        """Build and validate from a mapping of contract keys (e.g. an opened ``.npz``)."""
        required = ("image", "mask", "parts", "part_names", "normal", "depth", "intrinsics", "keypoints")
        missing = [key for key in required if key not in arrays]
        if missing:
            raise MapsError(f"maps are missing required keys: {', '.join(missing)}")
        names = np.asarray(arrays["part_names"])
        if names.dtype.kind == "S":
            names = np.char.decode(names, "utf-8")
        known = {f.name for f in fields(cls)}
        extras = {key: np.asarray(arrays[key]) for key in arrays if key not in known}
        maps = cls(
            image=np.asarray(arrays["image"]),
            mask=np.asarray(arrays["mask"]),
            parts=np.asarray(arrays["parts"]),
            part_names=tuple(str(n) for n in names.reshape(-1)),
            normal=np.asarray(arrays["normal"]),
            depth=np.asarray(arrays["depth"]),
            intrinsics=np.asarray(arrays["intrinsics"]),
            keypoints=np.asarray(arrays["keypoints"]),
            metric=bool(np.asarray(arrays.get("metric", True))),
            source=_as_str(arrays.get("source", "unknown")),
            pointmap=None if arrays.get("pointmap") is None else np.asarray(arrays["pointmap"]),
            keypoints_3d=None if arrays.get("keypoints_3d") is None else np.asarray(arrays["keypoints_3d"]),
            extras=extras,
        )
        return maps.validate()

    def to_bytes(self) -> bytes:
        """The compressed ``.npz`` bytes (what :meth:`save` writes; the add-on keeps them in
        the .blend)."""
        buffer = io.BytesIO()
        np.savez_compressed(buffer, **self.to_arrays())
        return buffer.getvalue()

    @classmethod
    def from_bytes(cls, data: bytes, source: str = "maps bytes") -> "Maps":
        return cls.from_arrays(_read_npz(io.BytesIO(bytes(data)), source))

    def save(self, path: str | os.PathLike) -> Path:
        """Write ``.npz`` atomically (temp file + rename): a crash never leaves a partial file."""
        return atomic_write(path, lambda fh: np.savez_compressed(fh, **self.to_arrays()))

    @classmethod
    def load(cls, path: str | os.PathLike) -> "Maps":
        path = Path(path)
        with open_regular(path, MapsError, "maps .npz file") as fh:
            arrays = _read_npz(fh, str(path))
        return cls.from_arrays(arrays)


# Largest uncompressed maps per pixel: image 3 + mask 1 + parts 1 + normal 12 + depth 4 +
# pointmap 12 bytes, with room for per-pixel extras; plus the small arrays.
_BYTES_PER_PIXEL = 64
_SMALL_ARRAYS_BYTES = 64 * 1024 * 1024
_MAX_MEMBERS = 256


def _read_npz(file, source: str) -> dict:
    """The arrays of a maps ``.npz``, refusing before any decompression a file whose declared
    sizes are more than maps of its image's size can need (a 3 MB zip bomb would otherwise
    unpack to gigabytes), and pickled (object) arrays."""
    try:
        with zipfile.ZipFile(file) as zf:
            members = zf.infolist()
            if len(members) > _MAX_MEMBERS:
                raise MapsError(f"{source} has {len(members)} members; maps have a few")
            headers = {}
            for info in members:
                if not info.filename.endswith(".npy"):
                    raise MapsError(f"{source}: member {info.filename!r} is not a .npy array")
                with zf.open(info) as member:
                    version = np.lib.format.read_magic(member)
                    read_header = (np.lib.format.read_array_header_1_0 if version == (1, 0)
                                   else np.lib.format.read_array_header_2_0)
                    shape, _, dtype = read_header(member)
                if dtype.hasobject:
                    raise MapsError(f"{source}: {info.filename} holds Python objects (a pickle); "
                                    f"maps never do")
                headers[info.filename[:-4]] = (shape, dtype, info.file_size)
            image = headers.get("image")
            if image is None or len(image[0]) != 3:
                raise MapsError(f"{source} has no [H,W,3] 'image' array")
            pixels = int(image[0][0]) * int(image[0][1])
            if pixels > MAX_PIXELS:
                raise MapsError(f"{source}: an image of {pixels} pixels exceeds the {MAX_PIXELS} "
                                f"pixel limit")
            budget = pixels * _BYTES_PER_PIXEL + _SMALL_ARRAYS_BYTES
            declared = sum(size for _, _, size in headers.values())
            needed = sum(math.prod(shape) * dtype.itemsize for shape, dtype, _ in headers.values())
            if max(declared, needed) > budget:
                raise MapsError(f"{source} unpacks to {max(declared, needed)} bytes, more than "
                                f"maps of {pixels} pixels can hold ({budget}); refusing it")
            file.seek(0)
            with np.load(file, allow_pickle=False) as npz:
                return {key: npz[key] for key in npz.files}
    except (MapsError, MemoryError):  # out of memory is this machine's state, not a bad file
        raise
    except Exception as exc:  # zipfile/ValueError/OSError: all mean "not a maps file"
        raise MapsError(f"{source} is not a readable maps .npz file: {exc}") from exc


def _as_str(value) -> str:
    arr = np.asarray(value)
    if arr.dtype.kind == "S":
        return arr.tobytes().decode("utf-8", "replace").rstrip("\x00")
    return str(arr.reshape(-1)[0]) if arr.size else ""


# Part names become vertex-group and material names, and per-vertex text arrays sized by the
# longest name: a 100,000-character name in a 2 MB maps file made a build ask for ~40 GiB.
MAX_PART_NAME = 64
MAX_PART_NAMES = 256  # class ids are uint8
_NAME_CHARACTERS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-. ()")


def part_name_problem(names) -> str | None:
    """Why ``names`` cannot be a maps file's part names (too many, too long, odd characters),
    or None."""
    if len(names) > MAX_PART_NAMES:
        return f"part_names has {len(names)} names, at most {MAX_PART_NAMES} (class ids are uint8)"
    for i, name in enumerate(names):
        if not name or len(name) > MAX_PART_NAME:
            return (f"part_names[{i}] is {len(name)} characters long: names are 1 to {MAX_PART_NAME} "
                    f"characters")
        if not set(name) <= _NAME_CHARACTERS:
            odd = sorted(set(name) - _NAME_CHARACTERS)[:5]
            return f"part_names[{i}] holds characters other than letters, digits and _-. (): {odd!r}"
    return None
