# SPDX-License-Identifier: GPL-3.0-or-later
"""`scan --maps-dir` end to end (real CLI subprocess, real server, real glTF-Validator): the maps
of a turning body -> one rigged, textured .glb and its joints; bad input -> one clear line."""

import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")
pytest.importorskip("bpy")

from cli_runner import run_cli  # noqa: E402
from gltf_reader import Glb, validate_gltf  # noqa: E402

from sapiens_blender.core.geometry import joints_io  # noqa: E402

pytestmark = [pytest.mark.bpy, pytest.mark.anny, pytest.mark.torch]


@pytest.fixture(scope="module")
def maps_dir(scan_case, tmp_path_factory):
    folder = tmp_path_factory.mktemp("scan") / "views"
    folder.mkdir()
    for i, maps in enumerate(scan_case().views):
        maps.save(folder / f"view{i:02d}.npz")
    return folder


def test_scan_maps_dir_to_glb_with_joints(maps_dir, server, tmp_path):
    out = run_cli("scan", "--maps-dir", maps_dir, "--server", f"http://{server.url}", "--token", server.token,
                  "-o", tmp_path / "scan.glb", "--save-joints", tmp_path / "joints.json", "--texture-size", "256")
    assert out.returncode == 0, out.stderr[-3000:]
    assert "body (clothed)" in out.stdout and "104 bones" in out.stdout
    assert "scan: 6 views" in out.stdout
    assert "[fit" in out.stderr and "joint round" in out.stderr  # progress per stage
    assert "progress callback failed" not in out.stderr
    report = validate_gltf(tmp_path / "scan.glb")
    assert report["issues"]["numErrors"] == 0, report["issues"]["messages"][:5]
    glb = Glb(tmp_path / "scan.glb")
    assert len(glb.json["skins"]) == 1 and len(glb.json["skins"][0]["joints"]) == 104
    assert sum(1 for n in glb.json["nodes"] if "camera" in n) == 1
    joints = joints_io.read(tmp_path / "joints.json", complete=False)
    assert "left_elbow" in joints[1]


def test_scan_bad_input_is_one_clear_line(tmp_path, server):
    empty = tmp_path / "empty"
    empty.mkdir()
    out = run_cli("scan", "--maps-dir", empty, "--server", f"http://{server.url}", "--token", server.token,
                  "-o", tmp_path / "x.glb")
    assert out.returncode == 1 and out.stderr.strip().startswith("error:") and len(out.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "x.glb").exists()
    out = run_cli("scan", "-o", tmp_path / "x.glb")
    assert out.returncode == 2 and "--maps-dir" in out.stderr
    out = run_cli("scan", "--maps-dir", empty, "-o", tmp_path / "x.obj")
    assert out.returncode == 2 and "unsupported output" in out.stderr


def test_batch_scans_each_sub_folder(scan_case, server, tmp_path):
    src = tmp_path / "people"
    (src / "turning").mkdir(parents=True)
    (src / "empty").mkdir()
    for i, maps in enumerate(scan_case().views[::2]):  # 3 views, 120 degrees apart
        maps.save(src / "turning" / f"view{i:02d}.npz")
    out = run_cli("batch", src, "--scan", "--out", tmp_path / "out", "--jobs", "1",
                  "--server", f"http://{server.url}", "--token", server.token)
    assert out.returncode == 1, out.stderr[-3000:]  # the empty folder failed, the other was built
    assert (tmp_path / "out" / "turning.glb").is_file() and not (tmp_path / "out" / "empty.glb").exists()
    assert "empty" in out.stderr
    assert validate_gltf(tmp_path / "out" / "turning.glb")["issues"]["numErrors"] == 0
