# SPDX-License-Identifier: GPL-3.0-or-later
"""Model options of `python -m inference_server` (--weights-dir, --device, --precision) through
the real server subprocess, offline, with tiny random-weight Sapiens2 models."""

import os
import subprocess
import sys

import numpy as np
import pytest
from server_harness import REPO, server_env, start_server
from tiny_models import SAPIENS2_SIZE, SAPIENS2_TASKS, build_sapiens2_task, photo

from inference_server.protocol import messages as protocol
from sapiens_blender.core.remote.analysis import maps_from_outputs

pytest.importorskip("torch")

pytestmark = [pytest.mark.torch]


@pytest.mark.slow
def test_weights_dir_option_serves_sapiens2_offline(tmp_path):
    weights = tmp_path / "weights"
    for task in SAPIENS2_TASKS:  # the local-folder layout: <dir>/<repo name>/config.json + weights
        build_sapiens2_task(task, weights / f"sapiens2-{task}-{SAPIENS2_SIZE}")
    env = server_env("secret-token")
    for name in ("SAPIENS_WEIGHTS_DIR", "SAPIENS_DEVICE", "SAPIENS_PRECISION"):
        env.pop(name, None)
    env.update(HF_HUB_OFFLINE="1", HF_HUB_CACHE=str(tmp_path / "empty-hub-cache"))
    srv = start_server(tmp_path, "--weights-dir", str(weights), "--device", "cpu", "--precision", "fp32",
                       "--parent-pid", str(os.getpid()), token="secret-token", env=env, timeout=120)
    try:
        image = photo(90, 60)
        reply, out = srv.infer("sapiens2-0.4b", [protocol.tensor("pixels", image)],
                               parameters={"tasks": "seg,depth"}, timeout=300)
        assert reply.status == 200, reply.body[:500]
        maps = maps_from_outputs({k: t.array for k, t in out.items()})
        assert (maps.height, maps.width) == (90, 60) and maps.person_ids == [1] and maps.metric
        meta = srv.get("/v2/models/sapiens2-0.4b").json()
        assert "cpu" in str(meta) and "fp32" in str(meta)
        assert not (tmp_path / "empty-hub-cache").exists() or not any((tmp_path / "empty-hub-cache").iterdir())
    finally:
        srv.stop()


def test_missing_weights_dir_is_a_clear_start_error(tmp_path):
    env = server_env("secret-token")
    done = subprocess.run([sys.executable, "-m", "inference_server", "--weights-dir", str(tmp_path / "nope"),
                           "--log-file", str(tmp_path / "log")], env=env, cwd=REPO,
                          capture_output=True, timeout=60)
    assert done.returncode == 2 and done.stdout == b""
    assert b"--weights-dir" in done.stderr and b"is not a folder" in done.stderr
