# SPDX-License-Identifier: GPL-3.0-or-later
"""body_fit under the server's limits (issue 37): the pixel cap analysis requests get applies to
its grids before any work, and a cancelled or abandoned fit frees the worker while it is still
reading its people, not after all of them."""

import os
import threading
import time

import numpy as np
import pytest

from server_harness import start_server

from inference_server.fit.correspondences import part_names
from sapiens_blender.core.errors import RequestCancelled, SapiensServerError
from sapiens_blender.core.remote.client import V2Client

pytestmark = [pytest.mark.torch, pytest.mark.anny]

CAP = 2048 * 2048  # the server's --max-image-pixels here: one person's reading on this grid ~1 s


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    srv = start_server(tmp_path_factory.mktemp("fit-limits"), "--parent-pid", str(os.getpid()),
                       "--max-image-pixels", str(CAP))
    with V2Client(f"http://{srv.url}", srv.token) as c:
        c.load_model("body_fit")  # timings below measure the fit, not anny's load
    yield srv
    srv.stop()


def crowd(height: int, width: int, n_side: int = 4) -> dict:
    """body_fit inputs: n_side² people standing in a grid, each seen through 308 keypoints."""
    mask = np.zeros((height, width), np.uint8)
    parts = np.zeros_like(mask)
    kp = np.zeros((n_side * n_side, 308, 3), np.float32)
    bh, bw = height // n_side, width // n_side
    rng = np.random.default_rng(0)
    names = part_names()
    for i in range(n_side * n_side):
        r, c = divmod(i, n_side)
        y0, x0 = r * bh + bh // 8, c * bw + bw // 4
        mask[y0:y0 + bh * 3 // 4, x0:x0 + bw // 2] = i + 1
        parts[y0:y0 + bh * 3 // 4, x0:x0 + bw // 2] = names.index("Torso")
        kp[i, :, 0] = x0 + rng.uniform(0, bw // 2, 308)
        kp[i, :, 1] = y0 + rng.uniform(0, bh * 3 // 4, 308)
        kp[i, :, 2] = 1.0
    k = np.array([[width, 0, width / 2], [0, width, height / 2], [0, 0, 1]], np.float32)
    return {"mask": mask, "parts": parts, "keypoints": kp, "intrinsics": k,
            "part_names": np.asarray([n.encode() for n in names], object)}


def test_a_grid_over_the_pixel_cap_is_refused_before_any_work(server):
    with V2Client(f"http://{server.url}", server.token) as client:
        start = time.monotonic()
        with pytest.raises(SapiensServerError) as err:
            client.infer("body_fit", crowd(2048, 2049), timeout=10)
        took = time.monotonic() - start
    assert err.value.status == 413, err.value
    assert "'mask'" in str(err.value) and "4,196,352 pixels" in str(err.value) and "\n" not in str(err.value)
    assert took < 3, took


def _cancel_mid_reading(server, how: str) -> tuple[float, list[dict]]:
    """Start a 16-person fit on a grid at the cap, stop it after 2 s (``how``: the cancel
    endpoint, or the client hanging up); seconds until the server's job has ended, and the
    progress seen before."""
    client = V2Client(f"http://{server.url}", server.token)
    watcher = V2Client(f"http://{server.url}", server.token)
    outcome = []

    def call():
        try:
            client.infer("body_fit", crowd(2048, 2048), request_id=f"crowd-{how}", timeout=120)
            outcome.append("done")
        except SapiensServerError as exc:
            outcome.append(exc)

    thread = threading.Thread(target=call)
    thread.start()
    seen = []
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        job = watcher.progress(f"crowd-{how}")
        if job:
            seen.append(job)
        time.sleep(0.2)
    stopped = time.monotonic()
    if how == "cancel":
        watcher.cancel(f"crowd-{how}")
    else:
        client.interrupt(thread.ident)
    while (watcher.progress(f"crowd-{how}") or {}).get("state") not in ("cancelled", "failed", "done"):
        assert time.monotonic() - stopped < 60, "the fit never stopped"
        time.sleep(0.05)
    took = time.monotonic() - stopped
    thread.join(30)
    client.close()
    watcher.close()
    assert outcome and isinstance(outcome[0], RequestCancelled), outcome
    return took, seen


@pytest.mark.parametrize("how", ["cancel", "hang_up"])
def test_a_stopped_fit_frees_the_worker_while_reading_people(server, how):
    took, seen = _cancel_mid_reading(server, how)
    # Before: the 16 people were all read first (~1 s each on this grid), ~15 s more.
    assert took < 2.5, f"the worker stayed busy {took:.1f} s after the {how}"
    messages = [j.get("message", "") for j in seen]
    assert any("person" in m for m in messages), messages  # progress while reading people
