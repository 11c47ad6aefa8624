# SPDX-License-Identifier: GPL-3.0-or-later
"""A photo analysed with its body (parameter ``body_fit``): the real server fits the maps it made
in the same request; the answer is the one body_fit gives for the same maps, with fewer bytes
sent, the fit's progress shown and its cancellation honoured."""

import http.client
import os
import threading

import numpy as np
import pytest

from server_harness import png_bytes, server_env, start_server

from sapiens_blender.core.body.records import body_from_maps, has_body
from sapiens_blender.core.errors import RequestCancelled, SapiensServerError
from sapiens_blender.core.remote import body_calls
from sapiens_blender.core.remote.analysis import analyze_photo
from sapiens_blender.core.remote.client import V2Client

pytestmark = [pytest.mark.torch, pytest.mark.anny, pytest.mark.slow]

PHOTO = png_bytes(np.zeros((120, 160, 3), np.uint8))  # the backend answers the saved maps anyway


@pytest.fixture(scope="module")
def client(body_model_scene, tmp_path_factory):
    folder = tmp_path_factory.mktemp("analysis-with-body")
    path = body_model_scene.maps.save(folder / "scene.npz")
    env = {**server_env("t" * 32), "SAVED_MAPS_FILE": str(path)}
    srv = start_server(folder, "--backend-module", "saved_maps_backend", "--parent-pid", str(os.getpid()),
                       token="t" * 32, env=env)
    try:
        with V2Client(f"http://{srv.url}", srv.token) as c:
            yield c
    finally:
        srv.stop()


@pytest.fixture
def wire(monkeypatch):
    """Body bytes of the client's requests and of the answers (the real exchanges, counted)."""
    counts = {"sent": 0, "received": 0}
    real = V2Client._exchange

    def exchange(self, conn, method, url, chunks, headers, timeout):
        counts["sent"] += sum(len(c) for c in chunks or ())
        status, resp_headers, body = real(self, conn, method, url, chunks, headers, timeout)
        counts["received"] += len(body)
        return status, resp_headers, body

    monkeypatch.setattr(V2Client, "_exchange", exchange)
    return counts


def test_one_request_gives_the_fit_body_fit_gives(client, wire, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    body_calls.template_for(client, {})  # the template cached first: only the fit's bytes below
    stages = []
    wire.update(sent=0, received=0)
    maps, notes = body_calls.analyze(client, PHOTO, "saved-maps", "clothed",
                                     progress=lambda s, f, m: stages.append(s))
    one_request = dict(wire)
    assert has_body(maps) and notes == []
    assert "fit" in stages  # the long stage's progress reached the client

    wire.update(sent=0, received=0)
    bare = analyze_photo(client, PHOTO, "saved-maps", progress=lambda s, f, m: None)
    fitted, _ = body_calls.fit_maps(client, bare, progress=lambda s, f, m: None)
    round_trip = dict(wire)
    _, fit = body_from_maps(maps)
    _, expected = body_from_maps(fitted)
    assert fit.person_ids.tolist() == expected.person_ids.tolist() == [1]
    np.testing.assert_allclose(fit.vertices, expected.vertices, atol=1e-5)
    np.testing.assert_allclose(fit.phenotypes, expected.phenotypes, atol=1e-6)
    # The maps no longer travel back: the upload is the photo only (the fit's inputs, its mask,
    # depth, ..., are no longer sent); what comes back is the same maps and the same fit.
    uploaded_maps = bare.mask.nbytes + bare.parts.nbytes + bare.depth.nbytes
    assert round_trip["sent"] - one_request["sent"] > uploaded_maps, (one_request, round_trip)
    assert one_request["sent"] < len(PHOTO) + 4096
    # (the progress polls' answers differ a little with the timing)
    assert abs(round_trip["received"] - one_request["received"]) < 0.02 * one_request["received"]
    print(f"bytes for one photo with a body: one request {one_request}, round trip {round_trip}")


def test_without_a_body_nothing_is_fitted(client):
    maps, notes = body_calls.analyze(client, PHOTO, "saved-maps", "none")
    assert not has_body(maps) and notes == []


def test_a_bad_body_fit_parameter_is_a_clear_400(client):
    with pytest.raises(SapiensServerError) as err:
        client.infer("saved-maps", {"image": np.asarray([PHOTO], object)}, parameters={"body_fit": "maybe"})
    assert err.value.status == 400 and "body_fit" in str(err.value)
    with pytest.raises(ValueError, match="body must be one of none, minimal, clothed"):
        body_calls.analyze(client, PHOTO, "saved-maps", "naked")


def test_cancelling_during_the_fit_stops_the_request(client):
    cancel = threading.Event()

    def progress(stage, fraction, message):
        if stage == "fit":
            cancel.set()

    with pytest.raises(RequestCancelled):
        body_calls.analyze(client, PHOTO, "saved-maps", "minimal", poll_interval=0.02, progress=progress,
                           cancel_event=cancel)
