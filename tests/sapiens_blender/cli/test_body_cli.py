# SPDX-License-Identifier: GPL-3.0-or-later
"""`build --body` end to end (real CLI subprocess): maps with a fit -> .glb/.fbx with the rig
renamed, and --save-joints in every mode."""

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("anny", reason="anny is needed for the body model")
pytest.importorskip("trimesh", reason="trimesh is needed to ray-cast body scenes")
pytest.importorskip("embreex", reason="embreex is needed to ray-cast body scenes")

bpy = pytest.importorskip("bpy")

from sapiens_blender.core.geometry import joints_io  # noqa: E402
from sapiens_blender.core.maps.canonical import Maps  # noqa: E402

from gltf_reader import Glb, validate_gltf  # noqa: E402
from repo_paths import REPO

pytestmark = [pytest.mark.bpy, pytest.mark.anny]



def run_cli(*args) -> subprocess.CompletedProcess:
    entry = "import sys; from sapiens_blender.cli import main; sys.exit(main())"
    return subprocess.run([sys.executable, "-c", entry, *map(str, args)], cwd=REPO, capture_output=True,
                          text=True, timeout=300)


@pytest.fixture(scope="module")
def maps_files(body_scene, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("cli")
    scene = body_scene("standing")
    with_fit = scene.maps.save(tmp / "fitted.npz")
    bare = Maps.from_arrays({k: v for k, v in scene.maps.to_arrays().items() if not k.startswith(("body_", "fit_"))})
    return scene, with_fit, bare.save(tmp / "bare.npz"), tmp


def test_build_body_with_mixamo_names_to_glb_and_fbx(maps_files):
    scene, fitted, _, tmp = maps_files
    out = run_cli("build", "--maps", fitted, "--body", "--rig-names", "mixamo", "-o", tmp / "body.glb",
                  "-o", tmp / "body.fbx", "--save-joints", tmp / "joints.json")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "body (clothed)" in out.stdout and "104 bones" in out.stdout
    report = validate_gltf(tmp / "body.glb")
    assert report["issues"]["numErrors"] == 0, report["issues"]["messages"][:5]
    glb = Glb(tmp / "body.glb")
    names = {n.get("name") for n in glb.json["nodes"]}
    assert {"mixamorig:Hips", "mixamorig:LeftArm", "mixamorig:RightUpLeg", "mixamorig:LeftHandIndex1"} <= names
    assert len(glb.json["meshes"][0]["extras"]["targetNames"]) == 52  # the face's ARKit keys, by default
    joints = joints_io.read(tmp / "joints.json", complete=False)
    j = scene.template.joint_names.index("left_elbow")
    assert np.allclose(joints[1]["left_elbow"].xyz, scene.fit.joints[0, j], atol=1e-6)
    # The FBX reads back with at most 4 normalised influences per vertex.
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_scene.fbx(filepath=str(tmp / "body.fbx"))
    body = next(o for o in bpy.context.scene.objects if o.type == "MESH")
    counts = [len([g for g in v.groups if g.weight > 0]) for v in body.data.vertices]  # test-side check only
    assert max(counts) <= 4 and len(body.data.vertices) == scene.template.num_vertices


def test_no_expressions_writes_the_lean_body(maps_files):
    _, fitted, _, tmp = maps_files
    out = run_cli("build", "--maps", fitted, "--body", "minimal", "--no-expressions", "-o", tmp / "lean.glb")
    assert out.returncode == 0, out.stderr[-2000:]
    glb = Glb(tmp / "lean.glb")
    assert all("targets" not in p for m in glb.json["meshes"] for p in m["primitives"])
    assert all("targetNames" not in m.get("extras", {}) for m in glb.json["meshes"])


def test_fbx_skin_reproduces_the_pose_with_four_influences(maps_files):
    """The .fbx, re-imported by Blender's importer: bind pose = rest, the photo's pose on the
    bones, and the posed skin equals our pruned 4-influence linear blend skinning of the fit."""
    from sapiens_blender.blender import mesh
    from sapiens_blender.core.body import pose as body_pose
    from sapiens_blender.core.geometry.types import camera_to_blender

    scene, fitted, _, tmp = maps_files
    out = run_cli("build", "--maps", fitted, "--body", "minimal", "-o", tmp / "minimal.fbx")
    assert out.returncode == 0, out.stderr[-2000:]
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_scene.fbx(filepath=str(tmp / "minimal.fbx"))
    body = next(o for o in bpy.context.scene.objects if o.type == "MESH")
    t, f = scene.template, scene.fit
    bones, values = body_pose.prune_weights(t.weight_bones, t.weight_values)
    expected = body_pose.skin_vertices(f.rest_vertices[0], f.rest_bone_matrices[0], f.bone_matrices[0], bones, values)
    expected = camera_to_blender(expected @ f.placement[0, :3, :3].T.astype(np.float64) + f.placement[0, :3, 3])
    assert np.abs(mesh.mesh_vertices(body, evaluated=True) - expected).max() < 1e-4


def test_save_joints_in_relief_mode_and_usage_errors(maps_files):
    _, _, bare, tmp = maps_files
    out = run_cli("build", "--maps", bare, "--closed", "-o", tmp / "relief.blend", "--save-joints", tmp / "relief.json")
    assert out.returncode == 0, out.stderr[-2000:]
    doc = json.loads((tmp / "relief.json").read_text())
    assert doc["people"][0]["id"] == 1 and "left_wrist" in doc["people"][0]["joints"]
    bad = run_cli("build", "--maps", bare, "--body", "--closed", "-o", tmp / "x.glb")
    assert bad.returncode == 2 and "choose one" in bad.stderr
    bad = run_cli("build", "--maps", bare, "--rig-names", "unreal", "-o", tmp / "x.glb")
    assert bad.returncode == 2 and "add --body" in bad.stderr
    bad = run_cli("build", "--maps", bare, "--no-expressions", "-o", tmp / "x.glb")
    assert bad.returncode == 2 and "add --body" in bad.stderr and "face" in bad.stderr
    # Maps without a fit need the server: an unreachable one gives a clear error, nothing written.
    bad = run_cli("build", "--maps", bare, "--body", "minimal", "--server", "http://127.0.0.1:9", "--token", "x",
                  "-o", tmp / "nofit.glb")
    assert bad.returncode == 1 and "error:" in bad.stderr and not (tmp / "nofit.glb").exists()


def test_batch_builds_bodies_from_fitted_maps(maps_files):
    _, fitted, _, tmp = maps_files
    folder = tmp / "batch_in"
    folder.mkdir()
    (folder / "person.npz").write_bytes(Path(fitted).read_bytes())
    out = run_cli("batch", folder, "--out", tmp / "batch_out", "--body", "minimal", "--rig-names", "unreal",
                  "--jobs", "1")
    assert out.returncode == 0, out.stderr[-2000:]
    glb = Glb(tmp / "batch_out" / "person.glb")
    assert {"pelvis", "spine_05", "hand_l", "calf_r"} <= {n.get("name") for n in glb.json["nodes"]}
