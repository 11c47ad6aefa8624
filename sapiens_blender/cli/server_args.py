# SPDX-License-Identifier: GPL-3.0-or-later
"""The token of a running server, read the same way by every command that talks to one (analyze,
build, animate, batch): ``--token``, else ``$SAPIENS_TOKEN`` (the variable `sapiens-blender
serve` and the server itself read), else none."""

from __future__ import annotations

import os

TOKEN_ENV = "SAPIENS_TOKEN"
TOKEN_HELP = f"the server's token (with --server; default: ${TOKEN_ENV})"


def server_token(args) -> str | None:
    """``--token``, else ``$SAPIENS_TOKEN``, else None (a server that asks for no token)."""
    return args.token or os.environ.get(TOKEN_ENV) or None
