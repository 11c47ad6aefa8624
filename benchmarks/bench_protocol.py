# SPDX-License-Identifier: GPL-3.0-or-later
"""Round-trip throughput of one 1024x768x3 float32 map over loopback: binary vs JSON.

Starts a real server subprocess (echo model), sends the map with http.client and decodes the answer, in one run for both encodings so the ratio is fair.
Throughput = map bytes / round-trip time (the map travels both ways; each way counts once).

    .venv/bin/python benchmarks/bench_protocol.py [--repeats 30] [--json-repeats 3]
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import secrets
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "tests" / "support"))  # the client-side message helpers

import v2_messages  # noqa: E402
from inference_server.protocol import messages as protocol  # noqa: E402


def start_server(token: str, http: str) -> tuple[subprocess.Popen, int]:
    env = {**os.environ, "SAPIENS_TOKEN": token}
    proc = subprocess.Popen([sys.executable, "-m", "inference_server", "--port", "0",
                             "--enable-echo", "--log-level", "warning", "--http", http],
                            stdout=subprocess.PIPE, env=env, cwd=REPO)
    ready = json.loads(proc.stdout.readline())
    return proc, ready["port"]


def round_trip(port: int, token: str, arr: np.ndarray, binary: bool) -> float:
    """One infer, the way a careful client does it: the request goes out as its buffers (no
    join), the answer is read into one preallocated buffer and viewed, not copied, by numpy."""
    # A fresh connection each time (~0.1 ms on loopback): the JSON encoding alone can outlast
    # the server's keep-alive timeout.
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=600)
    t0 = time.perf_counter()
    chunks, hlen = protocol.encode_chunks(
        {"parameters": {"binary_data_output": binary}}, "inputs",
        [protocol.tensor("map", arr)], [binary])
    size = sum(len(c) if isinstance(c, bytes) else c.nbytes for c in chunks)
    headers = {"Authorization": f"Bearer {token}", "Content-Length": str(size)}
    if hlen is not None:
        headers["Inference-Header-Content-Length"] = str(hlen)
    conn.request("POST", "/v2/models/echo/infer", iter(chunks), headers)
    resp = conn.getresponse()
    data = bytearray(int(resp.getheader("Content-Length")))
    view, got = memoryview(data), 0
    while got < len(data):
        n = resp.readinto(view[got:])
        if not n:
            raise ConnectionError("short answer")
        got += n
    assert resp.status == 200, bytes(data[:300])
    length = resp.getheader("Inference-Header-Content-Length")
    _, out = v2_messages.parse_infer_response(data, int(length) if length else None)
    elapsed = time.perf_counter() - t0
    conn.close()
    assert out["map"].array.tobytes() == arr.tobytes()
    return elapsed


RAW_ECHO = """
import socket, struct, sys
srv = socket.create_server(("127.0.0.1", 0))
print(srv.getsockname()[1], flush=True)
while True:
    conn, _ = srv.accept()
    with conn:
        size = struct.unpack("<Q", conn.recv(8, socket.MSG_WAITALL))[0]
        buf = bytearray(size)
        view, got = memoryview(buf), 0
        while got < size:
            got += conn.recv_into(view[got:])
        conn.sendall(buf)
"""


def raw_round_trip(port: int, payload: memoryview) -> float:
    import socket
    import struct

    t0 = time.perf_counter()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(struct.pack("<Q", payload.nbytes))
        sock.sendall(payload)
        back = bytearray(payload.nbytes)
        view, got = memoryview(back), 0
        while got < len(back):
            got += sock.recv_into(view[got:])
    elapsed = time.perf_counter() - t0
    assert back == payload
    return elapsed


def cpu_seconds(proc: subprocess.Popen) -> float:
    """User + system CPU time of a child process so far (Linux /proc; 0 elsewhere)."""
    try:
        fields = open(f"/proc/{proc.pid}/stat").read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return 0.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--json-repeats", type=int, default=3)
    args = parser.parse_args()
    arr = np.random.default_rng(0).standard_normal((768, 1024, 3)).astype(np.float32)
    payload = memoryview(arr.reshape(-1).view(np.uint8))
    token = secrets.token_urlsafe(16)
    raw = subprocess.Popen([sys.executable, "-c", RAW_ECHO], stdout=subprocess.PIPE)
    procs = {"raw": (raw, int(raw.stdout.readline()))}
    for http_parser in ("httptools", "h11"):
        procs[http_parser] = start_server(token, http_parser)
    cases = {  # name -> (server, call)
        "raw TCP echo, no HTTP": ("raw", lambda port: raw_round_trip(port, payload)),
        "binary (httptools)": ("httptools", lambda port: round_trip(port, token, arr, True)),
        "binary (h11)": ("h11", lambda port: round_trip(port, token, arr, True)),
        "JSON (httptools)": ("httptools", lambda port: round_trip(port, token, arr, False)),
    }
    wall = {name: [] for name in cases}
    cpu = {name: [] for name in cases}
    try:
        # Interleaved, so every case sees the same background load (shared machines vary).
        for i in range(args.repeats + 1):
            for name, (server, call) in cases.items():
                if name.startswith("JSON") and i > args.json_repeats:
                    continue
                proc, port = procs[server]
                c0 = cpu_seconds(proc)
                t = call(port)
                if i:  # the first round is warm-up
                    wall[name].append(t)
                    cpu[name].append(cpu_seconds(proc) - c0)
    finally:
        for proc, _ in procs.values():
            proc.terminate()
            proc.wait(30)
    print(f"1024x768x3 float32 map = {arr.nbytes / 1e6:.2f} MB, echo round trip over loopback, "
          f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}")
    print(f"{'case':<24} {'runs':>4} {'median ms':>10} {'best ms':>8} {'GB/s median':>12} "
          f"{'GB/s best':>10} {'server CPU ms':>14}")
    for name in cases:
        times = wall[name]
        median, best = statistics.median(times), min(times)
        print(f"{name:<24} {len(times):>4} {median * 1e3:>10.1f} {best * 1e3:>8.1f} "
              f"{arr.nbytes / median / 1e9:>12.2f} {arr.nbytes / best / 1e9:>10.2f} "
              f"{statistics.mean(cpu[name]) * 1e3:>14.1f}")
    med = {name: statistics.median(t) for name, t in wall.items()}
    print(f"binary is {med['JSON (httptools)'] / med['binary (httptools)']:.0f}x faster than JSON; "
          f"binary reaches {med['raw TCP echo, no HTTP'] / med['binary (httptools)']:.0%} of the "
          f"raw-socket baseline (medians, httptools)")


if __name__ == "__main__":
    main()
