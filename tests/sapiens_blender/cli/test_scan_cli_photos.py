# SPDX-License-Identifier: GPL-3.0-or-later
"""`scan PHOTO PHOTO ...` and `scan CLIP` end to end (real CLI subprocess, real server, real
client): a turning body's views written as PNG photos and as a short video; the server analyses
each photo or frame (``saved_maps_backend`` with $SAVED_MAPS_DIR: the view whose image it is),
picks the views, fits one body and the client builds the .glb."""

import os

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")
pytest.importorskip("bpy")
Image = pytest.importorskip("PIL.Image")

from cli_runner import run_cli  # noqa: E402
from gltf_reader import Glb, validate_gltf  # noqa: E402
from server_harness import server_env, start_server  # noqa: E402

pytestmark = [pytest.mark.bpy, pytest.mark.anny, pytest.mark.torch, pytest.mark.slow]


@pytest.fixture(scope="module")
def views_server(scan_case, tmp_path_factory):
    """(server, the case's views as PNG photos): a server whose analysis answers each photo with
    the maps of the view it shows."""
    root = tmp_path_factory.mktemp("scan-photos")
    (root / "maps").mkdir()
    photos = []
    for i, maps in enumerate(scan_case().views):
        maps.save(root / "maps" / f"view{i:02d}.npz")
        photos.append(root / f"view{i:02d}.png")
        Image.fromarray(np.asarray(maps.image)).save(photos[-1])
    env = {**server_env("s" * 32), "SAVED_MAPS_DIR": str(root / "maps")}
    srv = start_server(root, "--backend-module", "saved_maps_backend", "--parent-pid", str(os.getpid()),
                       token="s" * 32, env=env)
    yield srv, photos
    srv.stop()


def _scan(srv, *inputs, out, extra=()):
    return run_cli("scan", *inputs, "--model", "saved-maps", "--server", f"http://{srv.url}", "--token", srv.token,
                   "-o", out, "--texture-size", "128", *extra)


def test_scan_from_photos(views_server, tmp_path):
    srv, photos = views_server
    out = _scan(srv, *photos[::2], out=tmp_path / "photos.glb")  # 3 photos, 120 degrees apart
    assert out.returncode == 0, out.stderr[-3000:]
    assert "scan: 3 views" in out.stdout and "104 bones" in out.stdout
    report = validate_gltf(tmp_path / "photos.glb")
    assert report["issues"]["numErrors"] == 0, report["issues"]["messages"][:5]
    assert len(Glb(tmp_path / "photos.glb").json["skins"][0]["joints"]) == 104


def test_scan_from_a_clip(views_server, tmp_path):
    cv2 = pytest.importorskip("cv2")
    srv, photos = views_server
    frames = [np.asarray(Image.open(p).convert("RGB")) for p in photos]
    h, w = frames[0].shape[:2]
    clip = tmp_path / "turn.avi"
    writer = cv2.VideoWriter(str(clip), cv2.VideoWriter_fourcc(*"MJPG"), 6.0, (w, h))
    assert writer.isOpened()
    for frame in frames:
        writer.write(cv2.cvtColor(frame, cv2.COLOR_RGB2BGR))
    writer.release()
    out = _scan(srv, clip, out=tmp_path / "clip.glb", extra=("--stride", "2"))  # every other frame: 3 views
    assert out.returncode == 0, out.stderr[-3000:]
    assert f"scan: {len(frames[::2])} views" in out.stdout
    assert Glb(tmp_path / "clip.glb").json["skins"][0]["joints"]
