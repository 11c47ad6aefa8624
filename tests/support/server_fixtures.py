# SPDX-License-Identifier: GPL-3.0-or-later
"""Fixtures of the server tests: ONE real server subprocess (echo + the tiny Sapiens2 backend)
shared by the session, and ONE plain server (default settings: the body fit, motion and
template) shared by the tests that fit bodies through HTTP. Helpers live in server_harness.py
(importable by name from tests)."""

from __future__ import annotations

import os

import pytest
from server_harness import start_server

from inference_server.protocol import messages as protocol


@pytest.fixture(scope="session")
def server(tmp_path_factory):
    """The shared server: echo + tiny Sapiens2 backend, default limits, owned by this pytest."""
    srv = start_server(tmp_path_factory.mktemp("server"), "--enable-echo",
                       "--backend-module", "tiny_backend",
                       "--backend-module", "faulty_backend", "--parent-pid", str(os.getpid()))
    yield srv
    srv.stop()


@pytest.fixture(scope="session")
def fit_server(tmp_path_factory):
    """A server with default settings (its body model loaded on first use), shared by the
    modules that fit or pose bodies through it: one start and one body-model load per session,
    not one per module. Tests that need other settings, or leave work running (cancelled
    posing), start their own."""
    srv = start_server(tmp_path_factory.mktemp("fit-server"), "--parent-pid", str(os.getpid()))
    yield srv
    srv.stop()


@pytest.fixture
def alive_after(server):
    """Asserts the shared server still answers after the test (bad input must not kill it)."""
    yield server
    assert server.alive(), "the server died"
    reply, out = server.infer("echo", [protocol.tensor("x", [1, 2, 3])])
    assert reply.status == 200 and out["x"].array.tolist() == [1, 2, 3]
