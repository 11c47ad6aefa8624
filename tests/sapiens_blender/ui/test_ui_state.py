# SPDX-License-Identifier: GPL-3.0-or-later
"""The add-on's session state and server settings (bpy-free: plain Python)."""

import http.client
import os

import pytest

from sapiens_blender.core.errors import ServerStartError
from sapiens_blender.ui import state


def test_server_settings_travel_as_environment():
    offline = state.ConnectionSettings(device="cuda", precision="bf16", weights_dir="/w", online=False)
    env = offline.environment()
    assert env["SAPIENS_DEVICE"] == "cuda" and env["SAPIENS_PRECISION"] == "bf16"
    assert env["HF_HOME"] == "/w" and env["HF_HUB_OFFLINE"] == "1"
    online = state.ConnectionSettings(weights_dir="/w", online=True, extra_pythonpath="/plugins")
    assert "HF_HUB_OFFLINE" not in online.environment()
    assert online.environment()["PYTHONPATH"].split(os.pathsep) == [str(state.server_source_root()), "/plugins"]
    assert offline.process_key() != online.process_key()  # a setting change restarts the server
    assert "Allow Online Access" in state.offline_hint(offline) and state.offline_hint(online) == ""


def test_source_root_holds_the_server_package():
    assert (state.server_source_root() / "inference_server" / "__main__.py").is_file()


def test_extra_args_parse_or_explain():
    assert state.parse_extra_args("--enable-echo --backend-module 'a b'") == ("--enable-echo", "--backend-module", "a b")
    with pytest.raises(ValueError, match="cannot be parsed"):
        state.parse_extra_args("--x 'unclosed")


def test_errors_become_one_clear_sentence():
    start = ServerStartError("the Python interpreter /x was not found\n--- server log /l (last lines) ---\nboom")
    assert state.describe_error(start) == "the Python interpreter /x was not found"
    dropped = state.describe_error(http.client.RemoteDisconnected("Remote end closed connection"))
    assert "closed the connection unexpectedly" in dropped and "Analyze again" in dropped
    assert state.describe_error(KeyError("k")).startswith("KeyError")


def test_panel_state_without_a_server():
    session = state.Session()
    assert session.panel_state() == state.NO_SERVER and session.server_state() == "stopped"
    session.set_error("bad")
    assert session.panel_state() == state.ERROR
    session.clear_error()
    assert session.panel_state() == state.NO_SERVER
    with pytest.raises(ServerStartError, match="was not found"):
        session.connect(state.ConnectionSettings(python="/no/such/python"))
    with pytest.raises(Exception, match="No server URL"):
        session.connect(state.ConnectionSettings(mode=state.REMOTE, url=""))
