# SPDX-License-Identifier: GPL-3.0-or-later
"""`analyze --fit` (real CLI subprocess, real server): the server fits the maps it makes in the
same request and the .npz keeps the bodies; two photos at once fetch the template once."""

import os

import numpy as np
import pytest
from cli_runner import run_cli
from server_harness import png_bytes, server_env, start_server

from sapiens_blender.core.body.records import body_from_maps, has_body
from sapiens_blender.core.maps.canonical import Maps

pytestmark = [pytest.mark.torch, pytest.mark.anny, pytest.mark.slow]


def test_analyze_fit_keeps_the_bodies(body_model_scene, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    saved = body_model_scene.maps.save(tmp_path / "scene.npz")
    env = {**server_env("t" * 32), "SAVED_MAPS_FILE": str(saved)}
    srv = start_server(tmp_path, "--backend-module", "saved_maps_backend", "--parent-pid", str(os.getpid()),
                       token="t" * 32, env=env)
    photos = []
    for name in ("a", "b"):
        photos.append(tmp_path / f"{name}.png")
        photos[-1].write_bytes(png_bytes(np.zeros((120, 160, 3), np.uint8)))
    try:
        common = ("--server", f"http://{srv.url}", "--token", srv.token, "--model", "saved-maps", "--no-previews")
        fitted = run_cli("analyze", *photos, "--out", tmp_path / "fit", "--fit", *common)
        bare = run_cli("analyze", photos[0], "--out", tmp_path / "bare", *common)
    finally:
        srv.stop()
    assert fitted.returncode == 0, fitted.stderr
    for name in ("a", "b"):
        maps = Maps.load(tmp_path / "fit" / f"{name}.npz")
        template, fit = body_from_maps(maps)
        assert fit.person_ids.tolist() == [1] and fit.vertices.shape[1] == template.num_vertices
    assert bare.returncode == 0, bare.stderr
    assert not has_body(Maps.load(tmp_path / "bare" / "a.npz"))
