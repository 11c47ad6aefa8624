# SPDX-License-Identifier: GPL-3.0-or-later
"""The README's main command, `sapiens-blender demo --out DIR`, offline and with only what the
`app` install provides (no torch, transformers, scikit-image...), end to end: a real server
subprocess, the bundled photo, the build; then its .blend and .glb load back in bpy."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from repo_paths import REPO


CHECK_IN_BPY = textwrap.dedent("""
    import json, sys
    import bpy
    blend, glb = sys.argv[1], sys.argv[2]

    def summary():
        # The glTF importer adds an icosphere for bone display in a "glTF_not_exported" collection.
        objs = [o for o in bpy.data.objects
                if not any(c.name.startswith("glTF_not_exported") for c in o.users_collection)]
        meshes = [o for o in objs if o.type == "MESH"]
        arms = [o for o in objs if o.type == "ARMATURE"]
        return {
            "cameras": sum(o.type == "CAMERA" for o in objs),
            "mesh_vertices": [len(o.data.vertices) for o in meshes],
            "bones": [len(a.data.bones) for a in arms],
            "skinned": [any(m.type == "ARMATURE" for m in o.modifiers) or o.parent in arms
                        for o in meshes],
            "materials": sorted({s.material.name for o in meshes for s in o.material_slots
                                 if s.material}),
        }

    bpy.ops.wm.open_mainfile(filepath=blend)
    from_blend = summary()
    bpy.ops.wm.read_factory_settings(use_empty=True)
    bpy.ops.import_scene.gltf(filepath=glb)
    print("RESULT " + json.dumps({"blend": from_blend, "glb": summary()}))
""")


def _demo_command(out: Path) -> list[str]:
    script = Path(sys.executable).with_name("sapiens-blender")  # what the README runs
    if script.is_file():
        return [str(script), "demo", "--out", str(out)]
    return [sys.executable, "-c", "import sys; from sapiens_blender.cli import main; sys.exit(main())",
            "demo", "--out", str(out)]


# Packages the `app` install (extras blender + server) does not have: the demo and its server
# run as if they were absent, so the test proves the main command needs none of them.
NOT_IN_APP_INSTALL = ("torch", "torchvision", "transformers", "huggingface_hub", "safetensors",
                      "skimage", "scipy", "trimesh", "tritonclient", "anny", "hypothesis")


def _app_install_environment(tmp_path: Path) -> tuple[dict, Path]:
    """(environment, server python wrapper) hiding NOT_IN_APP_INSTALL from both processes."""
    block = tmp_path / "app_install_only"
    block.mkdir()
    (block / "sitecustomize.py").write_text(
        "import sys\n"
        f"for name in {NOT_IN_APP_INSTALL!r}:\n"
        "    sys.modules[name] = None  # as if not installed\n")
    wrapper = tmp_path / "server-python"
    # The server manager replaces PYTHONPATH; the wrapper puts the blocker back in front.
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{block}${{PYTHONPATH:+:$PYTHONPATH}}" '
                       f'exec "{sys.executable}" "$@"\n')
    wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if not k.startswith("SAPIENS_AUTO")}
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",  # offline, as on a fresh machine
               PYTHONPATH=os.pathsep.join([str(block), env.get("PYTHONPATH", "")]).rstrip(os.pathsep))
    return env, wrapper


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    """Runs the main command once (offline, app install only) and loads its outputs in bpy."""
    tmp_path = tmp_path_factory.mktemp("demo")
    out = tmp_path / "demo_out"
    env, server_python = _app_install_environment(tmp_path)
    run = subprocess.run(_demo_command(out) + ["--server-python", str(server_python)], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=600)
    loaded = None
    if run.returncode == 0:
        check = subprocess.run([sys.executable, "-c", CHECK_IN_BPY, str(out / "astronaut.blend"),
                                str(out / "astronaut.glb")], cwd=REPO, capture_output=True,
                               text=True, timeout=300)
        assert check.returncode == 0, check.stderr[-4000:]
        loaded = json.loads(check.stdout.split("RESULT ", 1)[1].splitlines()[0])
    return run, out, loaded


def _person_line(text: str) -> tuple[int, int, int]:
    match = re.search(r"person 1: (\d+) vertices, \d+ faces, (\d+) parts, (\d+) bones", text)
    assert match, text
    return tuple(map(int, match.groups()))


@pytest.mark.slow
def test_demo_writes_an_asset_that_loads_back(demo):
    run, out, loaded = demo
    assert run.returncode == 0, f"demo failed:\n{run.stdout}\n{run.stderr[-4000:]}"
    text = run.stdout
    # The summary: which model and why, people, vertices, parts, bones, seconds per stage.
    assert "maps: mediapipe-0.10.21 (auto: torch is not installed" in text, text
    assert "people: 1" in text
    vertices, parts, bones = _person_line(text)
    assert vertices > 5000 and parts >= 5
    assert re.search(r"seconds per stage: server start [\d.]+, model load [\d.]+, analysis [\d.]+, build [\d.]+", text)
    for name in ("astronaut.blend", "astronaut.glb", "astronaut.npz"):
        assert (out / name).is_file() and (out / name).stat().st_size > 10_000, name
        assert f"wrote {out / name}" in text, name  # every file written is reported
    # Messages say one thing once: the estimated bones and their filled-in joints in one note.
    assert sum("estimated" in line for line in text.splitlines()) <= 1, text
    for kind in ("blend", "glb"):
        got = loaded[kind]
        assert got["cameras"] == 1, (kind, got)
        assert len(got["mesh_vertices"]) == 1 and got["mesh_vertices"][0] >= 0.9 * vertices
        assert len(got["materials"]) >= parts, (kind, got)
        assert got["bones"] == ([bones] if bones else []), (kind, got)


@pytest.mark.slow
def test_demo_asset_is_rigged(demo):
    """The astronaut is an upper-body portrait (hips at the frame's edge, legs out of frame):
    the geometry core must still fill the hidden joints and build a skinned armature."""
    run, _, loaded = demo
    assert run.returncode == 0, run.stderr[-4000:]
    assert "NOT rigged" not in run.stderr, run.stderr[-2000:]
    _, _, bones = _person_line(run.stdout)
    assert bones >= 10
    for kind in ("blend", "glb"):
        assert loaded[kind]["bones"] == [bones] and all(loaded[kind]["skinned"]), (kind, loaded[kind])
