# SPDX-License-Identifier: GPL-3.0-or-later
"""Dynamic batching through the real server subprocess (tiny Sapiens2 hub, offline, one worker):
requests queued behind a busy worker run as ONE batch, each client gets its own correct maps, the
batch is visible in the job JSON and the server metadata, and a cancelled request gets 499 while
the others succeed."""

import os
import threading
import time

import numpy as np
import pytest
from server_harness import server_env, start_server
from tiny_models import photo, tiny_hub  # noqa: F401

from inference_server.protocol import messages as protocol
from sapiens_blender.core.remote.analysis import maps_from_outputs

pytest.importorskip("torch")

pytestmark = [pytest.mark.torch]

SIZES = [(96, 72), (80, 80), (72, 96), (90, 60)]
PARAMS = {"tasks": "seg,depth,normal,pose", "max_side": 96}


@pytest.fixture(scope="module")
def batching_server(tiny_hub, tmp_path_factory):
    env = {**server_env("batch-token"), "HF_HUB_CACHE": str(tiny_hub), "HF_HUB_OFFLINE": "1"}
    srv = start_server(tmp_path_factory.mktemp("batching"), "--enable-echo", "--max-concurrency", "1",
                       "--max-batch", "4", "--device", "cpu", "--precision", "fp32",
                       "--parent-pid", str(os.getpid()), token="batch-token", env=env, timeout=120)
    assert srv.post_json("/v2/repository/models/sapiens2-0.4b/load", {}, timeout=300).status == 200
    yield srv
    srv.stop()


def infer(srv, image, request_id):
    reply, out = srv.infer("sapiens2-0.4b", [protocol.tensor("pixels", image)], parameters=PARAMS,
                           id=request_id, timeout=300)
    return reply, (maps_from_outputs({k: t.array for k, t in out.items()}) if reply.status == 200 else None)


def wait_for(predicate, timeout=60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError("condition not reached in time")


def job(srv, job_id):
    reply = srv.get(f"/v2/jobs/{job_id}")
    return reply.json() if reply.status == 200 else {}


@pytest.mark.slow
def test_queued_requests_run_as_one_batch_and_a_cancelled_one_gets_499(batching_server):
    srv = batching_server
    images = [photo(h, w, seed=i) for i, (h, w) in enumerate(SIZES)]
    alone = [infer(srv, img, f"alone-{i}")[1] for i, img in enumerate(images)]  # reference answers
    assert job(srv, "alone-0")["batch_size"] == 1

    # Hold the only worker with a slow echo so the maps requests queue up behind it.
    hold = threading.Thread(target=srv.infer, args=("echo", [protocol.tensor("x", [1])]),
                            kwargs={"parameters": {"delay_ms": 2000}, "id": "hold"})
    hold.start()
    wait_for(lambda: job(srv, "hold").get("state") == "running")
    results: dict = {}
    clients = [threading.Thread(target=lambda i=i: results.__setitem__(i, infer(srv, images[i], f"b{i}")))
               for i in range(len(images))]
    for c in clients:
        c.start()
    wait_for(lambda: all(job(srv, f"b{i}").get("state") == "queued" for i in range(len(images))))
    assert srv.post_json("/v2/jobs/b2/cancel", {}).status == 202
    for c in [hold, *clients]:
        c.join(300)

    assert results[2][0].status == 499 and job(srv, "b2")["state"] == "cancelled"
    for i in (0, 1, 3):
        reply, maps = results[i]
        assert reply.status == 200, reply.body[:300]
        assert job(srv, f"b{i}")["batch_size"] == 3  # ran together, without the cancelled one
        ref = alone[i]
        assert (maps.height, maps.width) == (ref.height, ref.width) and maps.person_ids == [1]
        assert np.array_equal(maps.parts, ref.parts)
        np.testing.assert_allclose(maps.normal, ref.normal, atol=1e-4, equal_nan=True)
        # sub-pixel refinement amplifies float noise of a batched matmul: 0.01 px is still exact enough
        np.testing.assert_allclose(maps.keypoints, ref.keypoints, atol=1e-2)
    stats = srv.get("/v2").json()["batching"]
    assert stats["max_batch"] == 4 and stats["batches"] >= 1 and stats["largest_batch"] == 3
