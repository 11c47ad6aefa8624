# SPDX-License-Identifier: GPL-3.0-or-later
"""Every command that talks to a running server reads its token the same way: --token, else
$SAPIENS_TOKEN, else none."""

import pytest

from sapiens_blender.cli import build_parser
from sapiens_blender.cli.server_args import server_token

COMMANDS = {
    "analyze": ["analyze", "photo.jpg", "--out", "out"],
    "animate": ["animate", "clip.mp4", "-o", "out.glb"],
    "build": ["build", "photo.jpg", "-o", "out.glb"],
    "batch": ["batch", "photos", "--out", "out"],
}


@pytest.mark.parametrize("command", COMMANDS.values(), ids=COMMANDS.keys())
def test_every_command_reads_the_token_the_same_way(command, monkeypatch):
    parser = build_parser()
    remote = [*command, "--server", "http://127.0.0.1:8000"]
    monkeypatch.setenv("SAPIENS_TOKEN", "from-the-environment")
    assert server_token(parser.parse_args(remote)) == "from-the-environment"
    assert server_token(parser.parse_args([*remote, "--token", "given"])) == "given"
    monkeypatch.delenv("SAPIENS_TOKEN")
    assert server_token(parser.parse_args(remote)) is None
