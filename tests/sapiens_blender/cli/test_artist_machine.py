# SPDX-License-Identifier: GPL-3.0-or-later
"""An artist's machine: a Python holding only bpy and numpy (what Blender's own Python has)
installs the linux-x64 zip and builds the bundled photo, through the add-on's operators and
through its API, with the server on that same Python and the zip's wheels. No network: the
zip is built from the wheel cache `scripts/install.sh test` fills, and the session runs in its
own network namespace where the machine allows one (only loopback inside)."""

import json
import os
import shutil
import subprocess
import sys
import venv
from pathlib import Path

from importlib import metadata

import pytest

from sapiens_blender.cli import extension_wheels
from sapiens_blender.cli.package_extension import build_extension
from repo_paths import SUPPORT

PLATFORM = "linux-x64"


def artist_python(folder: Path) -> Path:
    """A fresh venv whose site-packages holds only bpy and numpy (linked, not downloaded)."""
    venv.EnvBuilder(with_pip=False, symlinks=True).create(folder)
    site = next(folder.glob("lib/python3.*/site-packages"))
    for name in ("bpy", "numpy"):
        package = Path(metadata.distribution(name).locate_file(name))
        os.symlink(package, site / package.name)
        libs = package.parent / f"{package.name}.libs"  # numpy's bundled shared libraries
        if libs.is_dir():
            os.symlink(libs, site / libs.name)
    return folder / "bin" / "python"


def offline_prefix() -> list[str]:
    """`unshare -n` (a network namespace with only loopback) where permitted, else nothing."""
    if not sys.platform.startswith("linux") or not shutil.which("unshare") or not shutil.which("ip"):
        return []
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True)
    return ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$@"', "sh"] if probe.returncode == 0 else []


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the cached wheels are linux-x64")
@pytest.mark.slow
def test_a_bpy_only_python_installs_the_zip_and_builds_the_photo(tmp_path):
    missing = extension_wheels.missing_wheels(PLATFORM)
    assert not missing, (f"the {PLATFORM} wheels are not in {extension_wheels.default_cache_dir()}: "
                         f"run `bash scripts/install.sh test` (it fetches them); missing {missing}")
    (zip_path,) = build_extension(tmp_path / "dist", platforms=[PLATFORM], download=False)
    python = artist_python(tmp_path / "artist")
    bare = subprocess.run([str(python), "-c", "import fastapi"], capture_output=True, text=True)
    assert "No module named 'fastapi'" in bare.stderr  # nothing but bpy and numpy

    out = tmp_path / "result.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "SAPIENS_"))}
    env.update(BLENDER_USER_RESOURCES=str(tmp_path / "blender_user"), HOME=str(tmp_path / "home"))
    command = [*offline_prefix(), str(python), str(SUPPORT / "artist_session.py"), str(zip_path), str(out)]
    proc = subprocess.run(command, env=env, capture_output=True, text=True, timeout=240, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    result = json.loads(out.read_text())

    assert result["install"] == ["FINISHED"] and result["python_pref"] == ""
    assert result["analyze"] == ["FINISHED"], result["error"] + "\n" + result["server_log"]
    assert result["server_python"] == str(python)  # the server ran on the artist's own Python
    assert result["source"].startswith("mediapipe-0.10.21")
    assert result["build_all"] == ["FINISHED"]
    assert result["operator_objects"] == ["ARMATURE", "CAMERA", "LIGHT", "MESH"]  # lit: renders as it is
    assert result["enabled_after_new_scene"]  # api.new_scene() keeps the add-on and its wheels
    assert result["api_objects"] == ["ARMATURE", "CAMERA", "MESH"] and result["api_vertices"] > 1000
    print(f"\nartist machine ({'offline namespace' if offline_prefix() else 'network available'}): "
          f"install {result['install_s']} s, analyze {result['analyze_s']} s, build {result['build_s']} s, "
          f"API photo->build {result['api_s']} s")
