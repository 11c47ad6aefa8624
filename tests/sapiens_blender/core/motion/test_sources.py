# SPDX-License-Identifier: GPL-3.0-or-later
"""Frame sources under attack: huge video frames, empty frame files, clips that end early."""

from __future__ import annotations

import sys
import tracemalloc

import numpy as np
import pytest

from sapiens_blender.core.motion.sources import ImageFolder, open_source
from sapiens_blender.core.motion.stream import analyze_frames, run_clip

from synthetic_scene import ellipsoid_maps

cv2 = pytest.importorskip("cv2")


def _video(path, frames: int, size: tuple[int, int], seed: int = 0):
    """Frames of one noise tile each (the same compressed size): a cut at 40 % of the bytes
    keeps about 40 % of the frames."""
    w, h = size
    writer = cv2.VideoWriter(str(path), cv2.VideoWriter_fourcc(*"MJPG"), 25.0, (w, h))
    rng = np.random.default_rng(seed)
    for _ in range(frames):
        tile = rng.integers(0, 255, (64, 64, 3), np.uint8)
        writer.write(np.tile(tile, (h // 64 + 1, w // 64 + 1, 1))[:h, :w])
    writer.release()
    return path


def test_a_huge_video_frame_is_shrunk_before_it_is_encoded(tmp_path):
    """Each frame leaves the decoder at the analysis size: with four frames in flight the client
    holds about one decoded frame, not four encoded full-size ones (15000² peaked at 7.7 GB)."""
    w, h = 3000, 2400
    raw = w * h * 3  # one decoded frame, 21.6 MB
    path = _video(tmp_path / "huge.avi", 4, (w, h))
    source = open_source(path, max_side=512)
    assert (source.width, source.height) == (w, h)  # the video's own size, as probed
    held = []

    def analyze(frame):  # holds every frame's bytes, as frames in flight do
        held.append(frame.data)
        return cv2.imdecode(np.frombuffer(frame.data, np.uint8), cv2.IMREAD_COLOR).shape

    tracemalloc.start()
    try:
        shapes = [shape for _, shape in analyze_frames(iter(source), analyze, parallel=4)]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert shapes == [(410, 512, 3)] * 4  # the server's rounding: round(2400 * 512 / 3000)
    assert sum(map(len, held)) < raw / 5  # four 512-px BMPs: 2.5 MB
    # Measured: 24.8 MB (about one decoded frame); before, 130 MB (full-size BMPs in flight).
    assert peak < 1.3 * raw, f"peak {peak / 1e6:.1f} MB for {raw / 1e6:.1f} MB frames"
    # the decoder in another interpreter (Blender's Python lacks OpenCV) shrinks them too
    other = open_source(path, max_side=512, decoder_python=sys.executable)
    other._decoder, other._python = None, sys.executable
    first = next(iter(other))
    assert cv2.imdecode(np.frombuffer(first.data, np.uint8), cv2.IMREAD_COLOR).shape == (410, 512, 3)


def test_a_small_frame_is_not_enlarged(tmp_path):
    frames = list(open_source(_video(tmp_path / "small.avi", 2, (96, 64))))
    assert cv2.imdecode(np.frombuffer(frames[0].data, np.uint8), cv2.IMREAD_COLOR).shape == (64, 96, 3)


def _stand_in_analysis(frame):
    """The analysis for these tests (no server): what the server refuses, refused."""
    assert frame.data, f"{frame.name} reached the analysis empty"
    return ellipsoid_maps(128, 96)


def test_an_empty_frame_file_is_skipped_and_named(tmp_path):
    for i in range(6):
        ok, png = cv2.imencode(".png", np.full((24, 32, 3), 40 * i, np.uint8))
        (tmp_path / f"f{i:03d}.png").write_bytes(png.tobytes() if i != 2 else b"")
    source = ImageFolder(tmp_path)
    animation = run_clip(source, _stand_in_analysis, parallel=2)
    assert animation.frames == [0, 1, 3, 4, 5]
    assert "skipped frame f002.png: an empty file (0 bytes)" in animation.notes
    for f in tmp_path.glob("f00[0-5].png"):
        f.write_bytes(b"")
    with pytest.raises(ValueError, match="no frame of the input could be used .*f000.png: an empty file"):
        run_clip(ImageFolder(tmp_path), _stand_in_analysis)


def test_a_video_that_stops_decoding_says_it_ended_early(tmp_path):
    path = _video(tmp_path / "whole.avi", 30, (64, 48))
    data = path.read_bytes()
    cut = tmp_path / "cut.avi"
    cut.write_bytes(data[:int(len(data) * 0.4)])  # the container still announces 30 frames
    source = open_source(cut)
    assert source.total == 30
    animation = run_clip(source, _stand_in_analysis, parallel=2)
    read = len(animation.frames)
    assert 5 < read < 30
    assert f"the clip ended early: {read} of the 30 frames it announces could be decoded " \
           "(a truncated or damaged file?)" in animation.notes
    whole = run_clip(open_source(path), _stand_in_analysis, parallel=2)
    assert len(whole.frames) == 30 and not any("ended early" in n for n in whole.notes)
