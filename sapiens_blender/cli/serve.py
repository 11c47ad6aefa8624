# SPDX-License-Identifier: GPL-3.0-or-later
"""`sapiens-blender serve`: run the inference server in the foreground.

A thin wrapper around ``python -m inference_server``: it generates a token (unless
SAPIENS_TOKEN is set), prints it to stderr so you can point a client at the server, and passes
every other option through. Ctrl+C stops the server cleanly.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "serve", help="run the inference server in the foreground",
        description="Run `python -m inference_server` with a generated token (printed to stderr). "
                    "Options after -- go to the server unchanged, e.g. -- --enable-echo.")
    p.add_argument("--port", type=int, default=0, help="port (default 0: a free one, see the ready line)")
    p.add_argument("--host", default="127.0.0.1", help="bind address (default 127.0.0.1)")
    p.add_argument("--python", default=sys.executable,
                   help="interpreter of the server's environment (default: this one)")
    p.add_argument("server_args", nargs="*", metavar="-- SERVER_ARGS",
                   help="extra options for python -m inference_server (see its --help)")
    p.set_defaults(func=run)


def run(args) -> int:
    token = os.environ.get("SAPIENS_TOKEN", "").strip() or secrets.token_hex(32)  # hex: a token never starts with "-" (a CLI would read it as an option)
    env = {**os.environ, "SAPIENS_TOKEN": token}
    # --parent-pid: should this wrapper be killed outright, the server does not outlive it.
    command = [args.python, "-m", "inference_server", "--host", args.host,
               "--port", str(args.port), "--parent-pid", str(os.getpid()), *args.server_args]
    print(f"token: {token}\n(send it as 'Authorization: Bearer <token>'; the server's ready "
          f"line with its port follows on stdout)", file=sys.stderr, flush=True)
    try:
        proc = subprocess.Popen(command, env=env)
    except OSError as exc:
        print(f"cannot run {args.python}: {exc}", file=sys.stderr)
        return 1
    def forward(signum, frame):
        proc.send_signal(signum)

    previous = signal.signal(signal.SIGTERM, forward)
    try:
        return proc.wait()
    except KeyboardInterrupt:
        # The terminal already sent SIGINT to the server too; give it time to finish cleanly.
        proc.send_signal(signal.SIGTERM)
        try:
            return proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()
    finally:
        signal.signal(signal.SIGTERM, previous)
