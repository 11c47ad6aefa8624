# SPDX-License-Identifier: GPL-3.0-or-later
"""Load on loopback: 8 concurrent clients x 50 requests carrying 1024x768 maps through echo.

No errors, exact data back, and the server's memory and open file descriptors stay bounded
(measured after a warm-up round, so allocator pools and lazy imports are not counted)."""

from __future__ import annotations

import http.client
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from inference_server.protocol import messages as protocol
import v2_messages

psutil = pytest.importorskip("psutil")

CLIENTS, REQUESTS = 8, 50


def _client(server, requests: int, seed: int) -> int:
    """One keep-alive connection sending ``requests`` infers; returns how many came back exact."""
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 256, (768, 1024, 3), dtype=np.uint8)
    depth = rng.standard_normal((768, 1024)).astype(np.float32)
    body, hlen = v2_messages.encode_infer_request(
        [protocol.tensor("image", image), protocol.tensor("depth", depth)],
        parameters={"binary_data_output": True})
    headers = server.auth({"Inference-Header-Content-Length": str(hlen),
                           "Content-Type": "application/octet-stream"})
    conn = http.client.HTTPConnection(server.host, server.port, timeout=120)
    exact = 0
    try:
        for _ in range(requests):
            conn.request("POST", "/v2/models/echo/infer", body, headers)
            resp = conn.getresponse()
            data = resp.read()
            assert resp.status == 200, data[:300]
            _, out = v2_messages.parse_infer_response(
                data, int(resp.getheader("Inference-Header-Content-Length")))
            exact += bool(np.array_equal(out["image"].array, image)
                          and out["depth"].array.tobytes() == depth.tobytes())
    finally:
        conn.close()
    return exact


def _usage(proc) -> tuple[int, int]:
    time.sleep(0.3)  # let closed connections be reaped
    return proc.memory_info().rss, proc.num_fds() if hasattr(proc, "num_fds") else proc.num_handles()


@pytest.mark.slow
def test_concurrent_clients_no_errors_no_growth(server):
    proc = psutil.Process(server.proc.pid)
    with ThreadPoolExecutor(CLIENTS) as pool:  # warm-up round
        assert sum(pool.map(lambda i: _client(server, 3, i), range(CLIENTS))) == 3 * CLIENTS
    usage = [_usage(proc)]
    start = time.monotonic()
    for _ in range(2):  # two halves: the second must not grow on top of the first
        with ThreadPoolExecutor(CLIENTS) as pool:
            exact = sum(pool.map(lambda i: _client(server, REQUESTS // 2, i), range(CLIENTS)))
        assert exact == CLIENTS * (REQUESTS // 2)
        usage.append(_usage(proc))
    elapsed = time.monotonic() - start
    (rss0, fds0), (rss1, fds1), (rss2, fds2) = usage
    assert fds2 <= fds0 + 2, f"open fds grew from {fds0} to {fds2}"
    assert rss2 - rss0 < 96 * 2**20, f"RSS grew by {(rss2 - rss0) / 2**20:.0f} MiB"
    assert rss2 - rss1 < 32 * 2**20, f"RSS still growing: {(rss2 - rss1) / 2**20:.0f} MiB"
    assert server.alive()
    print(f"\n{CLIENTS * REQUESTS} requests in {elapsed:.1f} s, RSS {rss0 / 2**20:.0f} -> "
          f"{rss1 / 2**20:.0f} -> {rss2 / 2**20:.0f} MiB, fds {fds0} -> {fds1} -> {fds2}")
