# SPDX-License-Identifier: GPL-3.0-or-later
"""`sapiens-blender serve`: runs the real server in the foreground with a generated token."""

from __future__ import annotations

import http.client
import json
import re
import signal
import subprocess
import sys
import threading

from server_harness import REPO, server_env


def test_serve_prints_token_and_ready_line_then_stops_on_sigterm():
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sys; from sapiens_blender.cli import main; sys.exit(main())",
         "serve", "--port", "0", "--", "--enable-echo"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=server_env(None), cwd=REPO)
    try:
        token_line = proc.stderr.readline().decode()
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        ready = json.loads(proc.stdout.readline())
        token = re.match(r"token: (\S+)", token_line).group(1)
        conn = http.client.HTTPConnection("127.0.0.1", ready["port"], timeout=30)
        conn.request("GET", "/v2/models/echo", headers={"Authorization": f"Bearer {token}"})
        assert conn.getresponse().status == 200
        conn.close()
    finally:
        proc.send_signal(signal.SIGTERM)  # the wrapper forwards it; the server exits cleanly
        code = proc.wait(20)
    assert code == 0
    assert not _port_open(ready["port"]), "the server outlived the wrapper"


def _port_open(port: int) -> bool:
    import socket

    try:
        socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return True
    except OSError:
        return False
