# SPDX-License-Identifier: GPL-3.0-or-later
"""analyze_photo against the real server serving a tiny numpy backend (tiny_maps_backend.py)."""

import io
import os
import sys
import threading
import time

import numpy as np
import pytest
from PIL import Image

from sapiens_blender.core import errors
from sapiens_blender.core.maps import goliath
from sapiens_blender.core.remote.analysis import analyze_photo, maps_from_outputs
from sapiens_blender.core.maps.canonical import Maps
from sapiens_blender.core.local_server.process import ServerProcess
from repo_paths import REPO, SUPPORT



@pytest.fixture(scope="module")
def client(tmp_path_factory):
    manager = ServerProcess(
        sys.executable, ["--backend-module", "tiny_maps_backend"],
        log_dir=tmp_path_factory.mktemp("server-log"),
        env={"PYTHONPATH": f"{REPO}{os.pathsep}{SUPPORT}", "TINY_STAGE_SECONDS": "0.3"},
    )  # fmt: skip
    yield manager.ensure_running()
    manager.stop()


def photo_png(width=40, height=30) -> tuple[bytes, np.ndarray]:
    rng = np.random.default_rng(3)
    pixels = rng.integers(0, 255, (height, width, 3), dtype=np.uint8)
    buf = io.BytesIO()
    Image.fromarray(pixels).save(buf, format="PNG")
    return buf.getvalue(), pixels


def test_analyze_photo_returns_valid_maps_and_reports_progress(client, tmp_path):
    data, pixels = photo_png()
    path = tmp_path / "person.png"
    path.write_bytes(data)
    seen = []
    maps = analyze_photo(client, path, "tiny-maps", progress=lambda *a: seen.append(a),
                         tasks=["seg", "normal", "depth", "pose"], max_side=64, poll_interval=0.05)  # fmt: skip
    assert isinstance(maps, Maps)
    np.testing.assert_array_equal(maps.image, pixels)  # the server decoded our undecoded bytes
    assert maps.source == "tiny-maps" and maps.metric is True
    assert maps.part_names == tuple(goliath.PART_NAMES_SAPIENS2)
    assert maps.person_ids == [1] and maps.keypoints.shape == (1, 308, 3)
    assert maps.depth.dtype == np.float32 and np.isnan(maps.depth[0, 0]) and maps.depth[15, 20] == 2.0
    stages = [s for s, _, _ in seen]
    # progress arrived while the infer ran, stage by stage, and ends with "done"
    assert {"seg", "normal", "depth", "pose"} <= set(stages)
    assert stages.index("seg") < stages.index("pose") and seen[-1] == ("done", 1.0, "maps received")
    assert all(f is None or 0 <= f <= 1 for _, f, _ in seen)
    back = Maps.load(maps.save(tmp_path / "maps.npz"))
    np.testing.assert_array_equal(back.mask, maps.mask)


def test_cancel_event_cancels_on_the_server(client):
    data, _ = photo_png()
    cancel = threading.Event()
    stages = []

    def on_progress(stage, fraction, message):
        stages.append(stage)
        if stage == "normal":
            cancel.set()

    start = time.monotonic()
    with pytest.raises(errors.RequestCancelled):
        analyze_photo(client, data, "tiny-maps", progress=on_progress, cancel_event=cancel,
                      request_id="analysis-cancel", poll_interval=0.05)  # fmt: skip
    assert time.monotonic() - start < 4 * 0.3  # well before all four stages ran
    assert "pose" not in stages  # it stopped before the last stage
    assert client.progress("analysis-cancel")["state"] == "cancelled"
    # the server keeps serving
    assert analyze_photo(client, data, "tiny-maps").source == "tiny-maps"


def test_cancel_before_start_sends_nothing(client):
    cancel = threading.Event()
    cancel.set()
    with pytest.raises(errors.RequestCancelled, match="before it started"):
        analyze_photo(client, photo_png()[0], "tiny-maps", cancel_event=cancel, request_id="never")
    assert client.progress("never") is None


def test_bad_photos_get_clear_errors(client, tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        analyze_photo(client, tmp_path / "missing.jpg", "tiny-maps")
    with pytest.raises(ValueError, match="empty"):
        analyze_photo(client, b"", "tiny-maps")
    with pytest.raises(errors.InvalidRequest, match="not an image"):
        analyze_photo(client, b"GIF? no, just text", "tiny-maps")
    with pytest.raises(errors.ModelNotFound, match="tiny-maps"):
        analyze_photo(client, photo_png()[0], "no-such-model")


def test_maps_from_outputs_rejects_incomplete_maps():
    with pytest.raises(errors.ProtocolError, match="missing required keys"):
        maps_from_outputs({"image": np.zeros((2, 2, 3), np.uint8)})
