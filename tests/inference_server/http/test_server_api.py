# SPDX-License-Identifier: GPL-3.0-or-later
"""The v2 endpoints of a real server subprocess: metadata, echo round trips, the tiny model,
the repository extension, progress and cancellation."""

from __future__ import annotations

import json
import threading
import time
import uuid

import numpy as np
import pytest
from server_harness import TINY_MODEL, assert_same, png_bytes, sample

from inference_server.protocol import messages as protocol
import v2_messages
from inference_server.dataplane.base import MAP_OUTPUTS, OPTIONAL_OUTPUTS
from inference_server.processing.goliath import PART_NAMES_SAPIENS2


def test_health_needs_no_token(server):
    assert server.get("/v2/health/live", auth=False).json() == {"live": True}
    assert server.get("/v2/health/ready", auth=False).json() == {"ready": True}


def test_server_metadata_lists_extensions(server):
    meta = server.get("/v2").json()
    assert meta["name"] == "sapiens_blender" and meta["version"] == server.ready["version"]
    for ext in ("binary_tensor_data", "model_repository", "parameters", "sapiens_jobs"):
        assert ext in meta["extensions"]


def test_ready_line_is_the_contract(server):
    assert set(server.ready) == {"host", "port", "pid", "version"}
    assert server.ready["pid"] == server.proc.pid and server.ready["host"] == "127.0.0.1"


def test_model_metadata_comes_from_map_outputs(server):
    for path in (f"/v2/models/{TINY_MODEL}", f"/v2/models/{TINY_MODEL}/versions/1"):
        meta = server.get(path).json()
        outputs = {o["name"]: (o["datatype"], o["shape"]) for o in meta["outputs"]}
        assert outputs == {k: (dt, list(s)) for k, (dt, s) in MAP_OUTPUTS.items()}
        assert {i["name"] for i in meta["inputs"]} == {"image", "pixels"}
    assert server.get(f"/v2/models/{TINY_MODEL}/versions/7").status == 404


@pytest.mark.parametrize("datatype", protocol.DATATYPES)
@pytest.mark.parametrize("binary", [True, False])
def test_every_datatype_round_trips_through_echo(server, datatype, binary):
    if datatype == "BF16" and not binary:
        pytest.skip("BF16 is binary-only")
    t = protocol.tensor("t", sample(datatype), datatype)
    reply, out = server.infer("echo", [t], binary=binary)
    assert reply.status == 200, reply.body
    assert ("inference-header-content-length" in reply.headers) == binary
    assert out["t"].datatype == datatype
    assert_same(out["t"].array, t.array)


def test_echo_answers_binary_when_asked_and_selects_outputs(server):
    a, b = protocol.tensor("a", np.arange(4, dtype=np.int16)), protocol.tensor("b", [True])
    outputs = [protocol.RequestedOutput("b", {"binary_data": True})]
    reply, out = server.infer("echo", [a, b], binary=False, outputs=outputs)
    assert reply.status == 200 and list(out) == ["b"] and out["b"].binary
    bad = [protocol.RequestedOutput("zzz")]
    assert server.infer("echo", [a], outputs=bad)[0].status == 400


def _photo(h=96, w=72) -> np.ndarray:
    rng = np.random.default_rng(3)
    return rng.integers(0, 256, (h, w, 3), dtype=np.uint8)


def check_maps(out: dict, h: int, w: int) -> None:
    # every required output; optional ones (diagnostics) only when the backend provides them
    assert set(MAP_OUTPUTS) - OPTIONAL_OUTPUTS <= set(out) <= set(MAP_OUTPUTS) - {"pointmap"}
    assert out["image"].array.shape == (h, w, 3) and out["image"].datatype == "UINT8"
    assert out["parts"].array.shape == (h, w) and out["parts"].array.max() < 29
    assert np.array_equal(out["mask"].array, (out["parts"].array > 0).astype(np.uint8))
    assert [n.decode() for n in out["part_names"].array] == list(PART_NAMES_SAPIENS2)
    assert out["depth"].datatype == "FP32" and np.isnan(out["depth"].array).all()
    assert out["keypoints"].array.shape == (0, 308, 3)
    assert out["metric"].array.tolist() == [False]
    assert out["source"].array.tolist() == [TINY_MODEL.encode()]
    for dense in ("image", "mask", "parts", "normal", "depth"):
        assert out[dense].binary, f"{dense} must travel binary"


@pytest.mark.slow
def test_tiny_model_from_png_and_from_pixels_agree(server):
    photo = _photo()
    image = protocol.tensor("image", np.array([png_bytes(photo)], object), "BYTES")
    reply, out = server.infer(TINY_MODEL, [image], binary=False, id=f"png-{uuid.uuid4()}")
    assert reply.status == 200, reply.body
    check_maps(out, 96, 72)
    assert np.array_equal(out["image"].array, photo)
    reply2, out2 = server.infer(TINY_MODEL, [protocol.tensor("pixels", photo)])
    assert reply2.status == 200, reply2.body
    assert np.array_equal(out2["parts"].array, out["parts"].array)


def test_tiny_model_parameters(server):
    image = protocol.tensor("image", np.array([png_bytes(_photo(200, 150))], object), "BYTES")
    reply, out = server.infer(TINY_MODEL, [image], parameters={
        "max_side": 100, "flip_test": True, "clip_frame": True, "tasks": "seg", "binary_data_output": True})
    assert reply.status == 200, reply.body
    check_maps(out, 100, 75)
    assert out["intrinsics"].binary
    for params, why in (({"max_side": 0}, "max_side"), ({"tasks": "seg,dance"}, "unknown task"),
                        ({"flip_test": "maybe"}, "flip_test"), ({"clip_frame": 2}, "clip_frame")):
        reply, _ = server.infer(TINY_MODEL, [image], parameters=params)
        assert reply.status == 400 and why in reply.json()["error"]


def test_repository_index_load_unload(server):
    index = {m["name"]: m for m in server.request("POST", "/v2/repository/index").json()}
    assert {"echo", TINY_MODEL} <= set(index)
    assert server.post_json(f"/v2/repository/models/{TINY_MODEL}/load",
                            {"parameters": {"job_id": "load-test"}}).status == 200
    assert server.get("/v2/jobs/load-test").json()["state"] == "done"
    assert server.get(f"/v2/models/{TINY_MODEL}/ready").json()["ready"] is True
    assert server.request("POST", f"/v2/repository/models/{TINY_MODEL}/unload").status == 200
    reply = server.get(f"/v2/models/{TINY_MODEL}/ready")
    assert reply.status == 503 and reply.json()["ready"] is False
    index = {m["name"]: m for m in server.request("POST", "/v2/repository/index").json()}
    assert index[TINY_MODEL]["state"] == "UNAVAILABLE"
    # Infer loads on demand again (autoload) and reports it.
    job_id = f"reload-{uuid.uuid4()}"
    reply, out = server.infer(TINY_MODEL, [protocol.tensor("pixels", _photo(32, 24))], id=job_id)
    assert reply.status == 200 and out["parts"].array.shape == (32, 24)
    assert server.get(f"/v2/models/{TINY_MODEL}/ready").status == 200
    assert server.request("POST", "/v2/repository/models/nope/load").status == 404


def _infer_in_thread(server, job_id: str, delay_ms: int) -> tuple[threading.Thread, list]:
    result: list = []
    x = protocol.tensor("x", np.ones((4, 4), np.float32))

    def go():
        result.append(server.infer("echo", [x], id=job_id, parameters={"delay_ms": delay_ms}))

    thread = threading.Thread(target=go)
    thread.start()
    return thread, result


def _wait_state(server, job_id: str, states: set[str], timeout: float = 20) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        reply = server.get(f"/v2/jobs/{job_id}")
        if reply.status == 200 and reply.json()["state"] in states:
            return reply.json()
        time.sleep(0.02)
    raise AssertionError(f"job {job_id} never reached {states}")


def test_progress_is_readable_while_running_then_cancel(server):
    job_id = f"slow-{uuid.uuid4()}"
    thread, result = _infer_in_thread(server, job_id, 10_000)
    job = _wait_state(server, job_id, {"running"})
    deadline = time.monotonic() + 10
    while not (job["stage"] == "echo" and job["progress"]) and time.monotonic() < deadline:
        job = server.get(f"/v2/jobs/{job_id}").json()
    assert job["kind"] == "infer" and job["model"] == "echo" and 0 < job["progress"] < 1
    assert job_id in {j["id"] for j in server.get("/v2/jobs").json()["jobs"]}
    # The same id cannot start a second job while this one runs.
    dup, _ = server.infer("echo", [protocol.tensor("x", [1])], id=job_id)
    assert dup.status == 409
    assert server.request("POST", f"/v2/jobs/{job_id}/cancel").status == 202
    thread.join(20)
    reply, _ = result[0]
    assert reply.status == 499 and "cancelled" in reply.json()["error"]
    assert server.get(f"/v2/jobs/{job_id}").json()["state"] == "cancelled"
    assert server.request("POST", "/v2/jobs/no-such-job/cancel").status == 404


def test_server_sent_events_follow_a_job(server):
    job_id = f"sse-{uuid.uuid4()}"
    thread, result = _infer_in_thread(server, job_id, 1500)
    _wait_state(server, job_id, {"running"})
    reply = server.get(f"/v2/jobs/{job_id}/events")
    thread.join(20)
    assert reply.headers["content-type"].startswith("text/event-stream")
    events = [json.loads(line[5:]) for line in reply.body.decode().splitlines()
              if line.startswith("data:")]
    assert events[0]["state"] == "running" and events[-1]["state"] == "done"
    assert len(events) >= 3 and any(0 < (e["progress"] or 0) < 1 for e in events)
    assert result[0][0].status == 200


def test_queue_full_gives_503_with_retry_after(server):
    ids = [f"fill-{i}-{uuid.uuid4()}" for i in range(12)]  # 1 running + 8 queued fit
    threads = []
    try:
        for job_id in ids:
            threads.append(_infer_in_thread(server, job_id, 10_000))
        statuses = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not any(r for _, r in threads if r and r[0][0].status == 503):
            time.sleep(0.05)
        busy = [r[0][0] for _, r in threads if r and r[0][0].status == 503]
        assert busy, "no request was refused although the queue was full"
        assert int(busy[0].headers["retry-after"]) >= 1 and "busy" in busy[0].json()["error"]
    finally:
        for job_id in ids:
            server.request("POST", f"/v2/jobs/{job_id}/cancel")
        for thread, result in threads:
            thread.join(30)
            statuses.append(result[0][0].status)
    assert set(statuses) <= {499, 503} and statuses.count(503) >= 1


def test_client_hanging_up_cancels_its_job(server):
    import socket

    job_id = f"hangup-{uuid.uuid4()}"
    body, hlen = v2_messages.encode_infer_request([protocol.tensor("x", [1.0])], id=job_id,
                                               parameters={"delay_ms": 10_000})
    sock = socket.create_connection((server.host, server.port), timeout=10)
    sock.sendall((f"POST /v2/models/echo/infer HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                  f"Authorization: Bearer {server.token}\r\nContent-Length: {len(body)}\r\n"
                  f"Inference-Header-Content-Length: {hlen}\r\n\r\n").encode() + body)
    _wait_state(server, job_id, {"running"})
    sock.close()
    job = _wait_state(server, job_id, {"cancelled", "done", "failed"}, timeout=5)
    assert job["state"] == "cancelled"


def _pixels(first: int) -> protocol.Tensor:
    img = np.full((6, 5, 3), 9, np.uint8)
    img[0, 0, 0] = first
    return protocol.tensor("pixels", img)


def test_backend_failures_are_clear_and_the_server_survives(alive_after):
    server = alive_after
    reply, _ = server.infer("faulty", [_pixels(1)])
    assert reply.status == 500
    assert "RuntimeError: simulated bug deep inside the model" in reply.json()["error"]
    reply, _ = server.infer("faulty", [_pixels(2)])
    assert reply.status == 503 and "weights for 'faulty' are missing" in reply.json()["error"]
    reply, _ = server.infer("faulty", [_pixels(3)])
    assert reply.status == 500 and "'depth'" in reply.json()["error"]
    reply, out = server.infer("faulty", [_pixels(0)])
    assert reply.status == 200 and out["source"].array.tolist() == [b"faulty"]


def test_load_progress_and_cancel(server):
    job_id = f"load-{uuid.uuid4()}"
    result: list = []
    thread = threading.Thread(target=lambda: result.append(server.post_json(
        "/v2/repository/models/slow-load/load", {"parameters": {"job_id": job_id}})))
    thread.start()
    job = _wait_state(server, job_id, {"running"})
    deadline = time.monotonic() + 10
    while not (job["stage"] == "load" and job["progress"]) and time.monotonic() < deadline:
        job = server.get(f"/v2/jobs/{job_id}").json()
    assert job["kind"] == "load" and "downloading weights" in job["message"]
    index = {m["name"]: m for m in server.request("POST", "/v2/repository/index").json()}
    assert index["slow-load"]["state"] == "LOADING"
    server.request("POST", f"/v2/jobs/{job_id}/cancel")
    thread.join(20)
    assert result[0].status == 499 and "cancelled" in result[0].json()["error"]
    assert server.get("/v2/models/slow-load/ready").status == 503


def test_any_request_id_can_be_watched_and_cancelled(server):
    from urllib.parse import quote

    job_id = f"scene 1/photo?#{uuid.uuid4()}"
    thread, result = _infer_in_thread(server, job_id, 10_000)
    path = f"/v2/jobs/{quote(job_id, safe='')}"
    deadline = time.monotonic() + 20
    while server.get(path).status != 200 and time.monotonic() < deadline:
        time.sleep(0.02)
    assert server.get(path).json()["id"] == job_id
    assert server.request("POST", path + "/cancel").status == 202
    thread.join(20)
    assert result[0][0].status == 499
    assert server.get(path).json()["state"] == "cancelled"
