# SPDX-License-Identifier: GPL-3.0-or-later
"""Property-based fuzzing of the real server: thousands of generated requests, no 5xx except
deliberate 503s, and the server alive at the end.

Two generators: hypothesis strategies for v2 infer bodies (JSON and binary framing, valid and
broken), and schemathesis driven by the server's own OpenAPI document (every route)."""

from __future__ import annotations

import http.client
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from server_harness import TINY_MODEL

from inference_server.protocol import messages as protocol

FUZZ_SETTINGS = dict(deadline=None, database=None, derandomize=True,
                     suppress_health_check=list(HealthCheck))

names = st.sampled_from(["x", "image", "pixels", "", "a" * 300])
datatypes = st.one_of(st.sampled_from(protocol.DATATYPES), st.text(max_size=8))
shapes = st.one_of(st.lists(st.integers(0, 6), max_size=4),
                   st.lists(st.integers(-3, 2**40), max_size=3), st.none(), st.text(max_size=3))
scalars = st.one_of(st.integers(-2**70, 2**70), st.floats(allow_nan=False), st.booleans(),
                    st.text(max_size=6), st.none(), st.sampled_from(["NaN", "Infinity", "-inf"]))
data = st.one_of(st.lists(scalars, max_size=40), st.lists(st.lists(scalars, max_size=4), max_size=4),
                 scalars, st.dictionaries(st.text(max_size=3), scalars, max_size=2))
parameters = st.one_of(st.none(), st.dictionaries(
    # (no echo delay_ms: a generated 10 s sleep would only test patience)
    st.sampled_from(["tasks", "max_side", "flip_test", "binary_data_output",
                     "binary_data_size", "content_type", "x"]), scalars, max_size=3),
    st.text(max_size=3))
tensor_meta = st.fixed_dictionaries(
    {"name": names, "datatype": datatypes, "shape": shapes},
    optional={"data": data, "parameters": parameters})
requests = st.fixed_dictionaries(
    {"inputs": st.one_of(st.lists(tensor_meta, max_size=3), scalars)},
    optional={"id": st.one_of(st.text(max_size=10), st.integers()), "parameters": parameters,
              "outputs": st.one_of(st.lists(st.fixed_dictionaries(
                  {"name": names}, optional={"parameters": parameters}), max_size=2), scalars)})
models = st.sampled_from(["echo", "echo", TINY_MODEL, "unknown", "echo/versions/1"])


class Poster:
    """Keeps one connection open across examples (reopened when the server closes it)."""

    def __init__(self, server):
        self.server, self.conn, self.count = server, None, 0

    def post(self, path: str, body: bytes, headers: dict) -> http.client.HTTPResponse:
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection(self.server.host, self.server.port, timeout=60)
            try:
                self.conn.request("POST", path, body, self.server.auth(headers))
                resp = self.conn.getresponse()
                resp.body = resp.read()
                self.count += 1
                if resp.getheader("connection", "").lower() == "close":
                    self.close()
                return resp
            except (ConnectionError, http.client.HTTPException):
                self.close()
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


def check(resp) -> None:
    if resp.status == 503:
        assert resp.getheader("retry-after") or b"shutting down" in resp.body
        return
    assert resp.status < 500, (resp.status, resp.body[:500])
    if resp.status >= 400:
        assert isinstance(json.loads(resp.body)["error"], str)


@pytest.fixture(scope="module")
def poster(server):
    p = Poster(server)
    yield p
    p.close()
    assert server.alive()


@pytest.mark.slow
def test_fuzz_json_infer_bodies(poster):
    @settings(max_examples=1200, **FUZZ_SETTINGS)
    @given(model=models, body=requests)
    def run(model, body):
        raw = json.dumps(body, allow_nan=True).encode()
        check(poster.post(f"/v2/models/{model}/infer", raw, {"Content-Type": "application/json"}))

    run()


def test_fuzz_binary_framing(poster):
    @settings(max_examples=600, **FUZZ_SETTINGS)
    @given(model=models, body=requests, blob=st.binary(max_size=300),
           header_length=st.one_of(st.none(), st.integers(-5, 400),
                                   st.text(st.characters(min_codepoint=33, max_codepoint=126),
                                           max_size=4)),
           sizes=st.lists(st.integers(-2, 64), max_size=3))
    def run(model, body, blob, header_length, sizes):
        for meta, size in zip(body["inputs"] if isinstance(body["inputs"], list) else [], sizes):
            meta.setdefault("parameters", {})
            if isinstance(meta["parameters"], dict):
                meta["parameters"]["binary_data_size"] = size
                meta.pop("data", None)
        head = json.dumps(body).encode()
        headers = {"Content-Type": "application/octet-stream",
                   "Inference-Header-Content-Length": str(len(head) if header_length is None
                                                          else header_length)}
        check(poster.post(f"/v2/models/{model}/infer", head + blob, headers))

    run()


def test_fuzz_raw_bytes(poster):
    @settings(max_examples=300, **FUZZ_SETTINGS)
    @given(model=models, raw=st.binary(max_size=200))
    def run(model, raw):
        check(poster.post(f"/v2/models/{model}/infer", raw, {}))

    run()
    assert poster.count >= 2000  # thousands of requests really went out


@pytest.mark.slow
def test_fuzz_every_route_from_openapi(server):
    schemathesis = pytest.importorskip("schemathesis")
    from schemathesis.checks import not_a_server_error

    schema = schemathesis.openapi.from_dict(server.get("/openapi.json").json())
    count = 0

    @settings(max_examples=300, **FUZZ_SETTINGS)
    @given(case=schema.as_strategy())
    def run(case):
        nonlocal count
        if case.path.endswith("/events"):
            case.path_parameters["job_id"] = "no-such-job"  # a live stream waits for its job
        if isinstance(case.body, dict) and isinstance(case.body.get("parameters"), dict):
            case.body["parameters"].pop("delay_ms", None)  # keep each request short
        response = case.call(base_url=f"http://{server.url}", headers=server.auth(), timeout=60)
        count += 1
        if response.status_code == 503:
            assert response.headers.get("retry-after")
        else:
            case.validate_response(response, checks=[not_a_server_error])

    run()
    assert count >= 250 and server.alive()
