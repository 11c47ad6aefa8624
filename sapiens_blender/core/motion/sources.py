# SPDX-License-Identifier: GPL-3.0-or-later
"""Frame sources: a video file, a folder of images or a folder of maps (.npz), streamed.

Every source yields :class:`Frame` objects in the input's order, one at a time (a clip is never
held in memory whole). ``index`` counts from 0 in the input's order, before the stride is
applied, so a frame keeps its number whatever ``start``/``stride`` select. Video decoding uses
OpenCV (``cv2``), imported only when a video is opened: Blender's Python may lack it, and
image folders and maps folders never need it.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..errors import SapiensError

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".tif", ".tiff", ".webp")
VIDEO_SUFFIXES = (".mp4", ".mov", ".avi", ".mkv", ".webm", ".m4v", ".mpg", ".mpeg", ".wmv", ".gif")
DEFAULT_FPS = 25.0  # an image or maps folder says nothing about its frame rate
# The frame rates a clip may have: Blender keys whole frames at fps / fps_base and glTF keys
# seconds; outside this range they disagree, or the timing overflows (--fps inf ran the whole
# analysis, then died on an OverflowError).
MIN_FPS, MAX_FPS = 0.1, 1000.0
# The server's default long side of the maps (docs/protocol.md, ``max_side``): a video frame is
# shrunk to it before it is encoded. A 15000² frame as raw BMP is 675 MB; four in flight peaked
# the client at 7.7 GB only for the server to refuse them (413) or shrink them anyway.
ANALYSIS_MAX_SIDE = 1024


def checked_fps(fps, what: str = "fps") -> float:
    """``fps`` as a float, or FrameSourceError saying why it cannot be a frame rate."""
    try:
        value = float(fps)
    except (TypeError, ValueError):
        raise FrameSourceError(f"{what} must be a number, got {fps!r}") from None
    if not MIN_FPS <= value <= MAX_FPS:  # NaN fails too
        raise FrameSourceError(f"{what} must be between {MIN_FPS:g} and {MAX_FPS:g} frames per second, "
                               f"got {fps!r}")
    return value


class FrameSourceError(SapiensError, ValueError):
    """The input cannot be read as frames; the message says why and what would work."""


class FrameSkipped(FrameSourceError):
    """One frame cannot be used (an empty file, an image the server cannot decode): the clip
    goes on without it, and a note names it."""


@dataclass
class Frame:
    index: int  # position in the input, from 0, before the stride
    name: str  # file name, or "<video stem>#<index>"
    data: bytes | None = None  # encoded image (what the server decodes), for photo/video frames
    maps_path: Path | None = None  # for a maps folder

    def load_maps(self):
        from ..maps.canonical import Maps

        return Maps.load(self.maps_path)


@dataclass(frozen=True)
class FrameRange:
    start: int = 0
    end: int | None = None  # exclusive; None = to the end
    stride: int = 1

    def __post_init__(self):
        if self.start < 0:
            raise FrameSourceError(f"start must be 0 or more, got {self.start}")
        if self.end is not None and self.end <= self.start:
            raise FrameSourceError(f"end ({self.end}) must be after start ({self.start})")
        if self.stride < 1:
            raise FrameSourceError(f"stride must be 1 or more, got {self.stride}")

    def selects(self, index: int) -> bool:
        return index >= self.start and (self.end is None or index < self.end) \
            and (index - self.start) % self.stride == 0

    def count(self, total: int) -> int:
        end = total if self.end is None else min(total, self.end)
        return max(0, (end - self.start + self.stride - 1) // self.stride)


class FrameSource:
    """Base: ``fps`` (of the input), ``total`` frames in the input (None if unknown),
    ``selected`` frames after the range, and iteration over the selected frames."""

    fps: float = DEFAULT_FPS
    total: int | None = None
    width: int | None = None
    height: int | None = None

    def __init__(self, frames: FrameRange | None = None):
        self.range = frames or FrameRange()
        self.skipped: list[str] = []  # "name: why" of each selected frame left out
        self.ended_early: tuple[int, int] | None = None  # (frames read, frames announced)

    @property
    def selected(self) -> int | None:
        return None if self.total is None else self.range.count(self.total)

    @property
    def output_fps(self) -> float:
        """The frame rate of the animation: the input's, divided by the stride."""
        return self.fps / self.range.stride

    def __iter__(self) -> Iterator[Frame]:
        raise NotImplementedError


class ImageFolder(FrameSource):
    """Images of a folder sorted by name (natural order: frame2 before frame10)."""

    def __init__(self, folder, frames: FrameRange | None = None, fps: float | None = None):
        super().__init__(frames)
        self.folder = Path(folder)
        self.fps = checked_fps(fps if fps is not None else DEFAULT_FPS)
        self.files = _sorted_files(self.folder, IMAGE_SUFFIXES, "images")
        self.total = len(self.files)

    def __iter__(self):
        for i, path in enumerate(self.files):
            if self.range.selects(i):
                try:
                    data = path.read_bytes()
                except OSError as exc:  # vanished or unreadable since the listing
                    self.skipped.append(f"{path.name}: cannot be read ({exc.strerror or exc})")
                    continue
                if not data:
                    self.skipped.append(f"{path.name}: an empty file (0 bytes)")
                    continue
                yield Frame(i, path.name, data=data)


class MapsFolder(FrameSource):
    """One canonical maps file (.npz, as ``analyze`` writes) per frame, sorted by name."""

    def __init__(self, folder, frames: FrameRange | None = None, fps: float | None = None):
        super().__init__(frames)
        self.folder = Path(folder)
        self.fps = checked_fps(fps if fps is not None else DEFAULT_FPS)
        self.files = _sorted_files(self.folder, (".npz",), "maps files (.npz)")
        self.total = len(self.files)

    def __iter__(self):
        for i, path in enumerate(self.files):
            if self.range.selects(i):
                yield Frame(i, path.name, maps_path=path)


# The decoding code, as text: run here (exec, when this Python has cv2) or by another
# interpreter that has it (Blender's Python usually lacks OpenCV; the server's environment has
# it), which streams the frames back on stdout. One implementation for both.
_DECODER = r"""
import json, struct, sys

import cv2


def probe(path):
    cap = cv2.VideoCapture(path)
    try:
        ok, first = cap.read() if cap.isOpened() else (False, None)
        if not ok:
            return None
        return {"fps": float(cap.get(cv2.CAP_PROP_FPS) or 0.0), "count": int(cap.get(cv2.CAP_PROP_FRAME_COUNT) or 0),
                "width": int(first.shape[1]), "height": int(first.shape[0])}
    finally:
        cap.release()


def frames(path, start, end, stride, max_side=0):
    # (index, BMP bytes) of the selected frames; skipped frames are grabbed, not decoded.
    # A frame longer than max_side is shrunk first (the server's own rounding of the size).
    # BMP: lossless and ~100x faster to write and ~10x faster to read than PNG (~15 ms of CPU
    # per 512-px frame saved); the bytes only cross a pipe or the loopback.
    cap = cv2.VideoCapture(path)
    try:
        if start > 0:  # seeking is inexact on some codecs: verify by position, else walk
            cap.set(cv2.CAP_PROP_POS_FRAMES, start)
            if int(cap.get(cv2.CAP_PROP_POS_FRAMES)) != start:
                cap.release()
                cap = cv2.VideoCapture(path)
        index = int(cap.get(cv2.CAP_PROP_POS_FRAMES) or 0)
        while end < 0 or index < end:
            if index < start or (index - start) % stride:
                if not cap.grab():
                    break
                index += 1
                continue
            ok, bgr = cap.read()
            if not ok:
                break
            h, w = bgr.shape[:2]
            if 0 < max_side < max(h, w):
                scale = max_side / max(h, w)
                size = (max(1, round(w * scale)), max(1, round(h * scale)))
                bgr = cv2.resize(bgr, size, interpolation=cv2.INTER_AREA)
            ok, bmp = cv2.imencode(".bmp", bgr)
            del bgr
            if not ok:
                raise RuntimeError(f"cannot encode frame {index}")
            yield index, bmp.tobytes()
            index += 1
    finally:
        cap.release()


if __name__ == "__main__":
    out = sys.stdout.buffer
    if sys.argv[1] == "probe":
        out.write(json.dumps(probe(sys.argv[2])).encode() + b"\n")
    else:
        for i, data in frames(sys.argv[2], *map(int, sys.argv[3:7])):
            out.write(struct.pack("<qq", i, len(data)) + data)
            out.flush()
"""


class VideoFile(FrameSource):
    """A video file decoded by OpenCV frame by frame; frames travel as BMP (lossless, cheap to
    write and read).

    ``decoder_python``: an interpreter with OpenCV to decode in a subprocess when this Python
    has none (inside Blender: the server's environment). ``max_side``: frames are shrunk to this
    long side (the analysis size) before they are encoded; ``width``/``height`` stay the video's.
    """

    def __init__(self, path, frames: FrameRange | None = None, fps: float | None = None,
                 decoder_python: str | None = None, max_side: int | None = None):
        super().__init__(frames)
        self.max_side = int(max_side or ANALYSIS_MAX_SIDE)
        if fps is not None:
            checked_fps(fps)
        self.path = Path(path)
        if not self.path.is_file():
            raise FrameSourceError(f"the video {self.path} does not exist or is not a file")
        self._decoder = _local_decoder()
        self._python = None if self._decoder else decoder_python
        if self._decoder is None and not self._python:
            raise FrameSourceError(
                "decoding a video needs OpenCV (cv2), which this Python lacks: install the server extra "
                "(`pip install opencv-contrib-python`), or give a folder of frames instead")
        info = self._decoder["probe"](str(self.path)) if self._decoder else self._probe_in_subprocess()
        if info is None:
            raise FrameSourceError(
                f"OpenCV cannot decode {self.path.name}: not a video, or a codec this OpenCV lacks "
                "(convert it to H.264 .mp4, or export its frames to a folder of images)")
        self.width, self.height = info["width"], info["height"]
        native = info["fps"]
        # A container's own rate outside the range (0, 1e-6, 90000 were seen) is not trusted.
        self.fps = float(fps if fps is not None else (native if MIN_FPS <= native <= MAX_FPS else DEFAULT_FPS))
        self.total = info["count"] if info["count"] > 0 else None  # containers may not say

    def __iter__(self):
        end = -1 if self.range.end is None else self.range.end
        args = (str(self.path), self.range.start, end, self.range.stride, self.max_side)
        frames = self._decoder["frames"](*args) if self._decoder else self._frames_from_subprocess(args)
        read = 0
        for index, data in frames:
            read += 1
            yield Frame(index, f"{self.path.stem}#{index}", data=data)
        # Decoding stopped before the frames the container announces (a truncated or damaged
        # file): say so, or a clip cut at frame 12 of 30 would pass for a whole one.
        expected = self.selected
        self.ended_early = (read, expected) if expected is not None and read < expected else None

    def _probe_in_subprocess(self):
        import json
        import subprocess

        try:
            out = subprocess.run([self._python, "-c", _DECODER, "probe", str(self.path)], capture_output=True,
                                 timeout=120, check=True, env=_clean_env())
        except (OSError, subprocess.SubprocessError) as exc:
            raise FrameSourceError(f"cannot run {self._python} to decode the video (it needs OpenCV): {exc}") from exc
        return json.loads(out.stdout.decode().strip().splitlines()[-1])

    def _frames_from_subprocess(self, args):
        import struct
        import subprocess

        proc = subprocess.Popen([self._python, "-c", _DECODER, "frames", *map(str, args)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_clean_env())
        try:
            while True:
                head = proc.stdout.read(16)
                if len(head) < 16:
                    break
                index, size = struct.unpack("<qq", head)
                yield index, proc.stdout.read(size)
            if proc.wait() != 0:
                err = proc.stderr.read().decode("utf-8", "replace").strip().splitlines()
                raise FrameSourceError(f"decoding {self.path.name} failed: {err[-1] if err else proc.returncode}")
        finally:
            if proc.poll() is None:  # the caller stopped early (cancel): end the decoder
                proc.kill()
                proc.wait()
            proc.stdout.close()
            proc.stderr.close()


def _local_decoder() -> dict | None:
    try:
        import cv2  # noqa: F401
    except ImportError:
        return None
    namespace: dict = {"__name__": "sapiens_video_decoder"}
    exec(compile(_DECODER, "<sapiens video decoder>", "exec"), namespace)  # noqa: S102 - our own code
    return namespace


def _clean_env() -> dict:
    # Blender's PYTHONHOME/PYTHONPATH would point another interpreter at Blender's modules.
    return {k: v for k, v in os.environ.items() if k not in ("PYTHONHOME", "PYTHONPATH")}


def open_source(path, frames: FrameRange | None = None, fps: float | None = None,
                maps: bool = False, decoder_python: str | None = None,
                max_side: int | None = None) -> FrameSource:
    """The right source for ``path``: a maps folder (``maps=True``), an image folder or a video
    (its frames shrunk to ``max_side``, default the server's analysis size)."""
    if fps is not None:
        checked_fps(fps)
    path = Path(path)
    if maps:
        if not path.is_dir():
            raise FrameSourceError(f"--maps-dir expects a folder of .npz maps files, got {path}")
        return MapsFolder(path, frames, fps)
    if path.is_dir():
        return ImageFolder(path, frames, fps)
    if not path.exists():
        raise FrameSourceError(f"no such video or folder: {path}")
    if path.suffix.lower() in IMAGE_SUFFIXES:
        raise FrameSourceError(f"{path.name} is a single image: give a video or a folder of frames "
                               "(use `build` for one photo)")
    return VideoFile(path, frames, fps, decoder_python, max_side)


def _sorted_files(folder: Path, suffixes, what: str) -> list[Path]:
    if not folder.is_dir():
        raise FrameSourceError(f"{folder} is not a folder")
    files = sorted((p for p in folder.iterdir() if p.is_file() and p.suffix.lower() in suffixes
                    and not p.name.startswith(".")), key=lambda p: _natural_key(p.name))
    if not files:
        raise FrameSourceError(f"{folder} holds no {what} ({', '.join(suffixes)})")
    return files


def _natural_key(name: str):
    import re

    return [int(t) if t.isdigit() else t.lower() for t in re.split(r"(\d+)", name)]


def is_video(path: str | os.PathLike) -> bool:
    return Path(path).suffix.lower() in VIDEO_SUFFIXES
