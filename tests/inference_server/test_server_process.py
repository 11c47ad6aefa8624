# SPDX-License-Identifier: GPL-3.0-or-later
"""`python -m inference_server` as a process: token rules, bind rules, the single stdout line,
SIGTERM with work in flight, and the parent-pid watchdog."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
from server_harness import REPO, server_env, start_server

from inference_server.protocol import messages as protocol


def run_to_exit(*args: str, token: str | None, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "inference_server", "--port", "0", *args],
                          capture_output=True, text=True, env=server_env(token), cwd=REPO,
                          timeout=timeout)


def test_refuses_to_start_without_a_token():
    done = run_to_exit(token=None)
    assert done.returncode == 2 and done.stdout == ""
    assert "no token" in done.stderr and "SAPIENS_TOKEN" in done.stderr


@pytest.mark.skipif(os.name != "posix", reason="file modes are POSIX")
def test_token_file_must_be_private(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("s3cret-token\n")
    token_file.chmod(0o644)
    done = run_to_exit("--token-file", str(token_file), token=None)
    assert done.returncode == 2 and "chmod 600" in done.stderr and done.stdout == ""
    token_file.chmod(0o600)
    srv = start_server(tmp_path, "--token-file", str(token_file), token=None)
    try:
        srv.token = "s3cret-token"
        assert srv.get("/v2").status == 200
    finally:
        assert srv.stop() == 0


def test_non_loopback_bind_needs_allow_remote():
    done = run_to_exit("--host", "0.0.0.0", token="t")
    assert done.returncode == 2 and "--allow-remote" in done.stderr and done.stdout == ""


def test_stdout_has_exactly_the_ready_line_and_sigterm_exits_cleanly(tmp_path):
    srv = start_server(tmp_path, "--enable-echo")
    # Work in flight when SIGTERM arrives: it is cancelled and answered, then the server exits 0.
    result: list = []
    x = protocol.tensor("x", np.ones(3, np.float32))
    thread = threading.Thread(target=lambda: result.append(
        srv.infer("echo", [x], id="inflight", parameters={"delay_ms": 10_000})))
    thread.start()
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        reply = srv.get("/v2/jobs/inflight")
        if reply.status == 200 and reply.json()["state"] == "running":
            break
        time.sleep(0.02)
    started = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    code = srv.proc.wait(20)
    thread.join(20)
    assert code == 0
    assert time.monotonic() - started < 8, "shutdown waited for the cancelled work"
    assert result and result[0][0].status == 499
    assert srv.proc.stdout.read() == b""  # nothing after the ready line
    log = srv.log_file.read_text()
    assert "serving on http://127.0.0.1" in log and "server stopped" in log


def test_exits_when_the_parent_dies(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        srv = start_server(tmp_path, "--parent-pid", str(parent.pid))
        assert srv.get("/v2").status == 200
    finally:
        parent.kill()
        parent.wait()
    assert srv.proc.wait(15) == 0
    assert "parent process" in srv.log_file.read_text()


def test_allow_remote_binds_any_address(tmp_path):
    srv = start_server(tmp_path, "--host", "0.0.0.0", "--allow-remote")
    try:
        assert srv.ready["host"] == "0.0.0.0"
        assert srv.get("/v2").status == 200  # token still required and accepted
        assert srv.get("/v2", auth=False).status == 401
    finally:
        assert srv.stop() == 0


def test_no_autoload_answers_409_until_loaded(tmp_path):
    srv = start_server(tmp_path, "--backend-module", "faulty_backend", "--no-autoload")
    try:
        pixels = protocol.tensor("pixels", np.zeros((4, 4, 3), np.uint8))
        reply, _ = srv.infer("faulty", [pixels])
        assert reply.status == 409 and "/v2/repository/models/faulty/load" in reply.json()["error"]
        assert srv.request("POST", "/v2/repository/models/faulty/load").status == 200
        reply, out = srv.infer("faulty", [pixels])
        assert reply.status == 200 and out["image"].array.shape == (4, 4, 3)
        assert srv.get("/v2/models/echo").status == 404  # echo only with --enable-echo
    finally:
        assert srv.stop() == 0
