# SPDX-License-Identifier: GPL-3.0-or-later
"""The server process manager with the real server: start, reuse, crash, restart, parent death,
and the messages a user sees when the interpreter is wrong."""

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
import venv

import numpy as np
import psutil
import pytest

from sapiens_blender.core import errors
from sapiens_blender.core.local_server.process import ERROR, READY, STOPPED, ServerProcess
from repo_paths import REPO

posix_only = pytest.mark.skipif(os.name != "posix", reason="uses POSIX signals / shebang scripts")


def wait_gone(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if psutil.Process(pid).status() == psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            return True
        time.sleep(0.05)
    return False


@pytest.fixture(scope="module")
def bare_python(tmp_path_factory) -> str:
    """A fresh virtual environment: an interpreter without numpy, fastapi or our packages."""
    folder = tmp_path_factory.mktemp("bare-venv")
    venv.create(folder, with_pip=False, symlinks=os.name != "nt")
    return str(folder / ("Scripts/python.exe" if os.name == "nt" else "bin/python"))


def test_start_reuse_crash_restart_stop(tmp_path):
    manager = ServerProcess(extra_args=["--enable-echo"], log_dir=tmp_path)
    try:
        client = manager.ensure_running()
        assert manager.status()["state"] == READY
        pid = manager.pid
        assert manager.info["pid"] == pid and client.live()
        # the token travels in the environment, never on the command line
        assert manager.token and manager.token not in " ".join(psutil.Process(pid).cmdline())
        assert str(os.getpid()) in psutil.Process(pid).cmdline()  # --parent-pid
        assert manager.ensure_running() is client and manager.pid == pid  # reused

        os.kill(pid, signal.SIGKILL)
        assert wait_gone(pid, 5)
        with pytest.raises(errors.ServerNotRunning, match="not running|closed the connection"):
            client.infer("echo", {"x": np.zeros(1, np.float32)})
        # The kill is seen once the process is reaped, which a loaded machine may delay a little.
        deadline = time.monotonic() + 3
        while (status := manager.status())["state"] != ERROR and time.monotonic() < deadline:
            time.sleep(0.05)
        assert status["state"] == ERROR and "stopped unexpectedly" in status["last_error"]

        client2 = manager.ensure_running()  # restarts
        assert manager.pid != pid and manager.status()["state"] == READY
        assert client2.infer("echo", {"x": np.ones(2, np.int16)})["x"].tolist() == [1, 1]

        pid2 = manager.pid
        proc = psutil.Process(pid2)
        manager.stop()
        assert wait_gone(pid2, 2)
        assert manager.status()["state"] == STOPPED
        with pytest.raises(psutil.NoSuchProcess):
            proc.status()
    finally:
        manager.stop()


@posix_only
def test_server_exits_when_its_parent_dies(tmp_path):
    parent_script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(REPO)!r})
        from sapiens_blender.core.local_server.process import ServerProcess
        manager = ServerProcess(log_dir={str(tmp_path)!r})
        manager.ensure_running()
        print(manager.pid, flush=True)
        time.sleep(120)
    """)
    parent = subprocess.Popen([sys.executable, "-c", parent_script], stdout=subprocess.PIPE, text=True)
    try:
        line = parent.stdout.readline()
        assert line.strip().isdigit(), f"the parent did not start a server: {line!r}"
        server_pid = int(line)
        assert psutil.pid_exists(server_pid)
        parent.kill()  # SIGKILL: no atexit, no cleanup; only the server's watchdog can act
        parent.wait(5)
        assert wait_gone(server_pid, 5), "the server outlived its parent"
    finally:
        parent.kill()
        parent.stdout.close()


def test_interpreter_not_found(tmp_path):
    manager = ServerProcess(python=tmp_path / "no" / "python", log_dir=tmp_path)
    with pytest.raises(errors.ServerStartError, match="interpreter .*no.*python was not found"):
        manager.ensure_running()
    assert manager.status()["state"] == ERROR and "was not found" in manager.status()["last_error"]


def test_interpreter_without_the_server_requirements(tmp_path, bare_python):
    manager = ServerProcess(python=bare_python, log_dir=tmp_path, startup_timeout=30)
    with pytest.raises(errors.ServerStartError) as info:
        manager.ensure_running()
    message = str(info.value)
    # the server's own stderr names the missing module, and its log tail is quoted
    assert f"the interpreter {bare_python} has no module named" in message
    assert "ModuleNotFoundError" in message and "server log" in message
    assert "ModuleNotFoundError" in info.value.detail


def test_interpreter_without_the_inference_server_package(tmp_path, bare_python):
    manager = ServerProcess(python=bare_python, log_dir=tmp_path, source_root=tmp_path)
    with pytest.raises(errors.ServerStartError, match="has no module named inference_server"):
        manager.ensure_running()


def test_server_refusing_to_start_says_why(tmp_path):
    manager = ServerProcess(extra_args=["--host", "203.0.113.7"], log_dir=tmp_path)
    with pytest.raises(errors.ServerStartError, match="not a loopback address"):
        manager.ensure_running()


@posix_only
def test_startup_timeout_kills_the_silent_process(tmp_path):
    silent = tmp_path / "silent-python"
    silent.write_text("#!/bin/sh\necho 'loading forever' >&2\nexec sleep 60\n")
    silent.chmod(0o755)
    manager = ServerProcess(python=silent, log_dir=tmp_path, startup_timeout=1)
    with pytest.raises(errors.ServerStartError, match="within 1 s(.|\n)*loading forever"):
        manager.ensure_running()
    assert manager.pid is None


@posix_only
def test_chatty_stderr_does_not_block_the_ready_line(tmp_path):
    """2 MB of stderr before the ready line (more than any pipe buffer) must not deadlock."""
    chatty = tmp_path / "chatty-python"
    ready = json.dumps({"host": "127.0.0.1", "port": 9, "pid": 0, "version": "x"})
    chatty.write_text(
        f"#!{sys.executable}\nimport sys, time\n"
        "for _ in range(20000): sys.stderr.write('x' * 99 + '\\n')\n"
        f"print({ready!r}, flush=True)\ntime.sleep(60)\n"
    )
    chatty.chmod(0o755)
    manager = ServerProcess(python=chatty, log_dir=tmp_path, startup_timeout=20)
    try:
        manager.ensure_running()
        assert manager.status()["state"] == READY and manager.info["port"] == 9
        assert manager.log_path.stat().st_size >= 2_000_000
    finally:
        manager.stop(timeout=2)


@posix_only
def test_status_never_blocks_while_starting(tmp_path):
    """The UI polls status() while a worker thread waits for the server to come up."""
    import threading

    slow = tmp_path / "slow-python"
    slow.write_text("#!/bin/sh\nexec sleep 60\n")
    slow.chmod(0o755)
    manager = ServerProcess(python=slow, log_dir=tmp_path, startup_timeout=1.5)
    worker = threading.Thread(target=lambda: pytest.raises(errors.ServerStartError, manager.ensure_running))
    worker.start()
    time.sleep(0.3)
    start = time.monotonic()
    assert manager.status()["state"] == "starting"
    assert time.monotonic() - start < 0.1
    worker.join(10)
    assert manager.status()["state"] == ERROR


@posix_only
def test_stop_kills_a_server_that_ignores_sigterm(tmp_path):
    stubborn = tmp_path / "stubborn-python"
    ready = json.dumps({"host": "127.0.0.1", "port": 9, "pid": 0, "version": "x"})
    stubborn.write_text(
        f"#!{sys.executable}\nimport signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        f"print({ready!r}, flush=True)\ntime.sleep(60)\n"
    )
    stubborn.chmod(0o755)
    manager = ServerProcess(python=stubborn, log_dir=tmp_path, startup_timeout=20)
    manager.ensure_running()
    proc = psutil.Process(manager.pid)
    start = time.monotonic()
    manager.stop(timeout=0.5)
    assert 0.4 < time.monotonic() - start < 5  # waited for the grace period, then killed
    with pytest.raises(psutil.NoSuchProcess):
        proc.status()
    assert manager.status()["state"] == STOPPED
