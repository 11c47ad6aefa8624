# SPDX-License-Identifier: GPL-3.0-or-later
"""Both Sapiens families through the real server subprocess (catalog + tiny hub cache, offline)
and the `sapiens-blender analyze` CLI, with awkward photos."""

import io
import os
import secrets

import numpy as np
import pytest
from server_harness import server_env, start_server
from tiny_models import tiny_hub  # noqa: F401

from inference_server.protocol import messages as protocol
from sapiens_blender.cli import main as cli_main
from sapiens_blender.core.remote.analysis import maps_from_outputs
from sapiens_blender.core.maps.canonical import Maps

PIL = pytest.importorskip("PIL.Image")
pytest.importorskip("torch")

pytestmark = [pytest.mark.torch]


def hub_env(cache) -> dict:
    return {"HF_HUB_CACHE": str(cache), "HF_HUB_OFFLINE": "1", "SAPIENS_DEVICE": "cpu",
            "SAPIENS_PRECISION": "fp32"}


@pytest.fixture(scope="module")
def sapiens_server(tiny_hub, tmp_path_factory):
    token = secrets.token_hex(16)
    env = {**server_env(token), **hub_env(tiny_hub)}
    srv = start_server(tmp_path_factory.mktemp("sapiens-server"), "--parent-pid", str(os.getpid()),
                       token=token, env=env, timeout=120)
    yield srv
    srv.stop()


def encode(image, fmt="PNG", **save) -> bytes:
    buf = io.BytesIO()
    image.save(buf, format=fmt, **save)
    return buf.getvalue()


def rgb(h, w, seed=0):
    return PIL.fromarray((np.random.default_rng(seed).random((h, w, 3)) * 255).astype(np.uint8))


def exif_rotated():
    img = rgb(40, 60)  # stored 60 wide x 40 high; orientation 6 = shown rotated 90 degrees
    exif = img.getexif()
    exif[0x0112] = 6
    return encode(img, "JPEG", exif=exif), (60, 40)


PHOTOS = {
    "rgb": lambda: (encode(rgb(120, 90)), (120, 90)),
    "grayscale": lambda: (encode(rgb(80, 64).convert("L")), (80, 64)),
    "rgba": lambda: (encode(rgb(72, 96).convert("RGBA")), (72, 96)),
    "16-bit": lambda: (encode(PIL.fromarray(np.arange(70 * 50, dtype=np.uint16).reshape(70, 50) * 18)), (70, 50)),
    "exif-rotated": exif_rotated,
    "tiny": lambda: (encode(rgb(30, 20)), (30, 20)),
    "huge": lambda: (encode(rgb(2400, 1800), "JPEG", quality=70), (1024, 768)),
}


def infer_maps(server, model, data, **params):
    reply, out = server.infer(model, [protocol.tensor("image", np.asarray([data], dtype=object), "BYTES")],
                              parameters=params or None, timeout=300)
    assert reply.status == 200, reply.body[:500]
    return maps_from_outputs({k: t.array for k, t in out.items()})


def test_sapiens_models_are_served(sapiens_server):
    names = {m["name"] for m in sapiens_server.post_json("/v2/repository/index", {}).json()}
    assert {"sapiens2-0.4b", "sapiens2-5b", "sapiens-0.3b", "sapiens-2b"} <= names


@pytest.mark.parametrize("kind", list(PHOTOS))
@pytest.mark.slow
def test_awkward_photos_through_the_server(sapiens_server, kind):
    data, hw = PHOTOS[kind]()
    maps = maps_from_outputs_checked(sapiens_server, "sapiens2-0.4b", data, tasks="seg,depth")
    assert (maps.height, maps.width) == hw and maps.person_ids == [1] and maps.metric


def maps_from_outputs_checked(server, model, data, **params):
    maps = infer_maps(server, model, data, **params)
    assert maps.validate() is maps
    return maps


@pytest.mark.slow
def test_both_families_full_analysis_through_the_server(sapiens_server):
    data, hw = PHOTOS["rgb"]()
    two = maps_from_outputs_checked(sapiens_server, "sapiens2-0.4b", data, flip_test=True)
    assert two.pointmap is not None and len(two.part_names) == 29 and two.keypoints.shape == (1, 308, 3)
    one = maps_from_outputs_checked(sapiens_server, "sapiens-0.3b", data)
    assert not one.metric and one.pointmap is None and len(one.part_names) == 28
    assert one.source.startswith("sapiens-0.3b") and np.isfinite(one.depth[one.mask > 0]).all()


def test_normal_self_check_arrives_as_outputs(sapiens_server):
    data, _ = PHOTOS["rgb"]()
    # The tiny v1 depth model gives a curved surface: the self-check runs and reports an angle.
    one = infer_maps(sapiens_server, "sapiens-0.3b", data, tasks="seg,depth,normal")
    angle = one.extras["normal_agreement_deg"]
    assert angle.dtype == np.float32 and angle.shape == (1,) and 0.0 <= float(angle[0]) <= 180.0
    assert "normal self-calibration: flipped axes" in str(one.extras["notes"][0])
    assert f"{float(angle[0]):.1f} deg" in one.source
    # The tiny Sapiens2 pointmap is one point (no gradient): NaN and a note saying it was skipped.
    two = infer_maps(sapiens_server, "sapiens2-0.4b", data, tasks="seg,depth,normal")
    assert np.isnan(two.extras["normal_agreement_deg"]).all()
    assert "self-calibration skipped" in str(two.extras["notes"][0])
    assert "normals NOT calibrated" in str(two.extras["notes"][0])
    # Without depth asked for, the depth model still runs for the check (its maps stay empty).
    without_depth = infer_maps(sapiens_server, "sapiens2-0.4b", data, tasks="seg,normal")
    assert "self-calibration skipped" in str(without_depth.extras["notes"][0])
    assert np.isnan(without_depth.depth).all() and without_depth.pointmap is None


def test_missing_weights_reach_the_client_as_a_clear_error(sapiens_server):
    data, _ = PHOTOS["rgb"]()
    reply, _ = sapiens_server.infer("sapiens2-1b", [protocol.tensor("image", np.asarray([data], dtype=object),
                                                                    "BYTES")], timeout=120)
    assert reply.status == 503
    assert "facebook/sapiens2-seg-1b" in reply.json()["error"]


def test_cli_analyze_with_a_running_server(sapiens_server, tmp_path, capsys):
    photos = []
    for name, kind in (("front", "rgb"), ("turned", "exif-rotated")):
        path = tmp_path / f"{name}.jpg"
        path.write_bytes(PHOTOS[kind]()[0])
        photos.append(str(path))
    out = tmp_path / "out"
    code = cli_main(["analyze", *photos, "--out", str(out), "--model", "sapiens2-0.4b",
                     "--server", f"http://{sapiens_server.url}", "--token", sapiens_server.token])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "[2/2]" in captured.err and "1 person" in captured.err
    for stem in ("front", "turned"):
        maps = Maps.load(out / f"{stem}.npz")
        assert maps.person_ids == [1]
        for suffix in ("parts", "normal", "depth", "keypoints"):
            png = PIL.open(out / f"{stem}_{suffix}.png")
            assert png.size == (maps.width, maps.height) and png.mode == "RGB"
    assert Maps.load(out / "turned.npz").image.shape[:2] == (60, 40)


@pytest.mark.slow
def test_cli_analyze_starts_its_own_server(tiny_hub, tmp_path, monkeypatch, capsys):
    for key, value in hub_env(tiny_hub).items():
        monkeypatch.setenv(key, value)
    photo = tmp_path / "person.png"
    photo.write_bytes(PHOTOS["rgb"]()[0])
    code = cli_main(["analyze", str(photo), "--out", str(tmp_path / "o"), "--model", "sapiens-0.3b",
                     "--tasks", "seg,depth,pose", "--device", "cpu", "--no-previews"])
    err = capsys.readouterr().err
    assert code == 0, err
    maps = Maps.load(tmp_path / "o" / "person.npz")
    assert not maps.metric and np.isnan(maps.normal).all() and not (tmp_path / "o" / "person_parts.png").exists()


def test_cli_rejects_bad_arguments(tmp_path, capsys):
    assert cli_main(["analyze", str(tmp_path / "missing.jpg"), "--out", str(tmp_path)]) == 2
    photo = tmp_path / "a.png"
    photo.write_bytes(PHOTOS["tiny"]()[0])
    assert cli_main(["analyze", str(photo), "--out", str(tmp_path), "--tasks", "seg,albedo"]) == 2
    assert "unknown task" in capsys.readouterr().err


def test_cli_analyze_sends_photos_together_so_the_server_batches_them(sapiens_server, tmp_path, capsys):
    before = sapiens_server.get("/v2").json()["batching"]
    photos = []
    for i in range(4):
        path = tmp_path / f"p{i}.png"
        path.write_bytes(encode(rgb(96, 72, seed=i)))
        photos.append(str(path))
    code = cli_main(["analyze", *photos, "--out", str(tmp_path / "out"), "--model", "sapiens2-0.4b",
                     "--no-previews", "--parallel", "4",
                     "--server", f"http://{sapiens_server.url}", "--token", sapiens_server.token])
    err = capsys.readouterr().err
    assert code == 0, err
    assert all((tmp_path / "out" / f"p{i}.npz").is_file() for i in range(4))
    after = sapiens_server.get("/v2").json()["batching"]
    # The first photo starts alone; the others queue behind it and run as one batch.
    assert after["batched_requests"] - before["batched_requests"] >= 2, (before, after)
    assert after["largest_batch"] >= 2
