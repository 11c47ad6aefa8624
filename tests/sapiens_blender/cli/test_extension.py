# SPDX-License-Identifier: GPL-3.0-or-later
"""The extension zip: built and validated by Blender's own tools, installed, enabled, disabled
and removed through the bpy module in a temporary user folder (a subprocess, so the test
process's own bpy state and the real user's Blender folders are never touched)."""

import json
import os
import subprocess
import sys
import textwrap
import tomllib
import zipfile
from pathlib import Path

import pytest

from repo_paths import REPO, SUPPORT

from sapiens_blender.cli import extension_wheels, package_extension
from sapiens_blender.cli.package_extension import PackagingError, build_extension

INSTALL_SCRIPT = textwrap.dedent(
    """
    import json, sys, bpy
    zip_path, out_path = sys.argv[1], sys.argv[2]
    result = {}
    def registered():
        return {
            "panels": [n for n in ("SAPIENS_PT_main", "SAPIENS_PT_maps", "SAPIENS_PT_build",
                                   "SAPIENS_PT_server") if hasattr(bpy.types, n)],
            "operators": sorted(n for n in dir(bpy.ops.sapiens) if not n.startswith("_")),
            "scene_props": hasattr(bpy.types.Scene, "sapiens"),
            "prefs": "bl_ext.user_default.sapiens_blender" in bpy.context.preferences.addons,
        }
    result["before"] = registered()
    result["install"] = sorted(bpy.ops.extensions.package_install_files(
        filepath=zip_path, repo="user_default", enable_on_install=True))
    mod = sys.modules["bl_ext.user_default.sapiens_blender"]
    result["module_file"] = mod.__file__
    result["enabled"] = registered()
    prefs = bpy.context.preferences.addons["bl_ext.user_default.sapiens_blender"].preferences
    result["prefs_type"] = type(prefs).__name__
    result["prefs_fields"] = [p for p in ("server_mode", "python_path", "remote_url", "model_family",
                              "device", "precision", "weights_dir") if hasattr(prefs, p)]
    state = sys.modules["bl_ext.user_default.sapiens_blender.ui.state"]
    result["server_root"] = str(state.server_source_root())
    prefs_mod = sys.modules["bl_ext.user_default.sapiens_blender.ui.preferences"]
    result["weights"] = prefs_mod.weights_dir(prefs)
    # The installed extension analyses through the server source bundled in its zip.
    prefs.python_path = sys.executable
    prefs.model_family = "custom"
    prefs.custom_model = "tiny-person"
    prefs.extra_server_args = "--backend-module tiny_person_backend"
    bpy.context.scene.sapiens.photo_path = sys.argv[3]
    result["analyze"] = sorted(bpy.ops.sapiens.analyze())
    result["server_source_root"] = str(state.SESSION.server.source_root)
    result["build_all"] = sorted(bpy.ops.sapiens.build_all())
    result["armatures"] = len([o for o in bpy.data.objects if o.type == "ARMATURE"])
    server_pid = state.SESSION.server.pid
    bpy.ops.preferences.addon_disable(module="bl_ext.user_default.sapiens_blender")
    try:
        __import__("os").kill(server_pid, 0)
        import time; time.sleep(1.0); __import__("os").kill(server_pid, 0)
        result["server_alive_after_disable"] = True
    except ProcessLookupError:
        result["server_alive_after_disable"] = False
    result["disabled"] = registered()
    repo = next(r for r in bpy.context.preferences.extensions.repos if r.module == "user_default")
    result["uninstall"] = sorted(bpy.ops.extensions.package_uninstall(
        repo_directory=repo.directory, pkg_id="sapiens_blender"))
    result["left_on_disk"] = __import__("os").path.exists(__import__("os").path.dirname(mod.__file__))
    result["user_data_left"] = __import__("os").path.exists(result["weights"])
    json.dump(result, open(out_path, "w"))
    """
)


@pytest.fixture(scope="module")
def built_zip(tmp_path_factory):
    """The source-only zip (no wheels): fast, and the same layout the platform zips start from."""
    (zip_path,) = build_extension(tmp_path_factory.mktemp("ext"), bundle_wheels=False)
    return zip_path


def test_zip_layout_holds_addon_and_server_but_no_tests(built_zip):
    names = zipfile.ZipFile(built_zip).namelist()
    assert "blender_manifest.toml" in names and "__init__.py" in names
    assert "ui/registration.py" in names and "core/local_server/process.py" in names
    assert "server_src/inference_server/__main__.py" in names
    assert not [n for n in names if n.startswith(("tests/", "docs/", "benchmarks/")) or "__pycache__" in n]
    # every file the server reads besides its code (the manifest's excludes once left the pose prior out)
    data = sorted(str(p.relative_to(REPO)) for p in (REPO / "inference_server").rglob("*")
                  if p.is_file() and p.suffix not in (".py", ".pyc") and "__pycache__" not in p.parts)
    assert data and not [d for d in data if f"server_src/{d}" not in names]


def test_validator_rejects_a_bad_manifest(tmp_path):
    """Proves the validator really runs (and checks tags against Blender's list)."""
    root = tmp_path / "src"
    repo = package_extension.repository_root()
    (root).mkdir()
    for name in ("sapiens_blender", "inference_server"):
        os.symlink(repo / name, root / name)
    manifest = (repo / "blender_manifest.toml").read_text()
    (root / "blender_manifest.toml").write_text(manifest.replace('"Mesh",', '"Mesh", "AI",'))
    with pytest.raises(PackagingError, match="AI"):
        build_extension(tmp_path / "out", root=root, bundle_wheels=False)
    (root / "blender_manifest.toml").write_text(manifest.replace('version = "0.1.0"', 'version = "9.9.9"'))
    with pytest.raises(PackagingError, match="bump both"):
        build_extension(tmp_path / "out", root=root, bundle_wheels=False)


def test_cli_prints_the_zip_path(tmp_path):
    import contextlib
    import io

    from sapiens_blender.cli import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(["package-extension", "--out", str(tmp_path), "--no-wheels"]) == 0
    printed = Path(buffer.getvalue().strip())
    assert printed == tmp_path / "sapiens_blender-0.1.0.zip" and printed.is_file()


def test_platform_zip_bundles_only_its_own_wheels(tmp_path):
    """Built from the wheel cache only (no download); the manifest Blender reads names them."""
    missing = extension_wheels.missing_wheels("linux-x64")
    assert not missing, f"run `bash scripts/install.sh test` to fill the wheel cache; missing {missing}"
    (zip_path,) = build_extension(tmp_path, platforms=["linux-x64"], download=False)
    assert zip_path.name == "sapiens_blender-0.1.0-linux_x64.zip"
    archive = zipfile.ZipFile(zip_path)
    wheels = sorted(n for n in archive.namelist() if n.endswith(".whl"))
    assert len(wheels) == len(extension_wheels.BUNDLED_REQUIREMENTS)
    assert all(n.startswith("wheels/") for n in wheels)
    platform_tags = [n.rsplit("-", 1)[1] for n in wheels]
    assert all(t == "any.whl" or "manylinux" in t for t in platform_tags), platform_tags
    names = {n.split("/")[1].split("-")[0].lower() for n in wheels}
    assert {"mediapipe", "fastapi", "uvicorn", "opencv_python_headless"} <= names
    assert not names & {"jax", "jaxlib", "torch", "numpy", "sentencepiece"}  # never imported / Blender's own
    manifest = tomllib.loads(archive.read("blender_manifest.toml").decode())
    assert manifest["platforms"] == ["linux-x64"]
    assert sorted(w.removeprefix("./") for w in manifest["wheels"]) == wheels


def test_offline_packaging_names_the_missing_wheels(tmp_path):
    with pytest.raises(PackagingError, match=r"not in .*downloading is off.*install.sh test"):
        build_extension(tmp_path, platforms=["windows-x64"], download=False, wheel_cache=tmp_path / "empty")


@pytest.mark.slow
def test_installs_enables_disables_and_uninstalls(built_zip, tmp_path):
    user = tmp_path / "blender_user"
    user.mkdir()
    script = tmp_path / "install_check.py"
    script.write_text(INSTALL_SCRIPT)
    out = tmp_path / "result.json"
    photo = tmp_path / "photo.png"
    from PIL import Image

    Image.new("RGB", (64, 48), (120, 90, 60)).save(photo)
    env = dict(os.environ, BLENDER_USER_RESOURCES=str(user),
               SAPIENS_SERVER_PYTHONPATH=f"{REPO}{os.pathsep}{SUPPORT}")
    proc = subprocess.run([sys.executable, str(script), str(built_zip), str(out), str(photo)], env=env,
                          capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert result["before"]["panels"] == [] and result["before"]["operators"] == []
    assert result["install"] == ["FINISHED"]
    assert result["module_file"].startswith(str(user))
    enabled = result["enabled"]
    assert enabled["panels"] == ["SAPIENS_PT_main", "SAPIENS_PT_maps", "SAPIENS_PT_build", "SAPIENS_PT_server"]
    assert {"analyze", "cancel", "build_mesh", "build_normal_texture", "build_part_materials",
            "build_armature", "build_all", "server_start", "server_stop", "free_memory",
            "check_interpreter", "setup_environment", "cancel_setup"} <= set(enabled["operators"])
    assert enabled["scene_props"] and enabled["prefs"]
    assert result["prefs_type"] == "SapiensPreferences" and len(result["prefs_fields"]) == 7
    assert result["server_root"].endswith("server_src")  # the server source bundled in the zip
    assert result["weights"].startswith(str(user)) and result["weights"].endswith("weights")
    assert result["analyze"] == ["FINISHED"] and result["build_all"] == ["FINISHED"]
    assert result["server_source_root"] == result["server_root"]  # server_src/ inside the install
    assert result["armatures"] == 2  # two tiny people, each rigged
    assert result["server_alive_after_disable"] is False  # disabling stops the server
    disabled = result["disabled"]
    assert disabled == {"panels": [], "operators": [], "scene_props": False, "prefs": False}
    assert result["uninstall"] == ["FINISHED"] and result["left_on_disk"] is False
    # Blender removes the extension's user folder too (weights, server env): the guide says so.
    assert result["user_data_left"] is False
