# SPDX-License-Identifier: GPL-3.0-or-later
"""Typed, human-readable errors of the inference client and the server process manager.

Every message is a full sentence a user can act on (the UI shows ``str(error)`` as is); the
technical detail (HTTP status, the server's own message, its log tail) rides along as attributes.
"""

from __future__ import annotations


class SapiensServerError(Exception):
    """Base of every error talking to, or starting, the inference server."""

    def __init__(self, message: str, *, status: int | None = None, detail: str = ""):
        super().__init__(message)
        self.status = status  # HTTP status when the server answered, else None
        self.detail = detail  # the server's own message or log tail, verbatim


class ServerNotRunning(SapiensServerError):
    """Nothing answers at the server's address (connection refused or reset on connect)."""


class ServerUnreachable(ServerNotRunning):
    """The address cannot be reached at all (unknown host, no route, TLS failure)."""


class Timeout(SapiensServerError):
    """The server did not answer within the allowed time."""


class AuthenticationError(SapiensServerError):
    """Wrong or missing token (401/403)."""


class ModelNotFound(SapiensServerError):
    """The server does not know the model; ``available`` lists the names it does know."""

    def __init__(self, message: str, *, model: str = "", available: list[str] | None = None, **kw):
        super().__init__(message, **kw)
        self.model = model
        self.available = list(available or [])


class ModelNotReady(SapiensServerError):
    """The model exists but is not loaded or is still loading."""


class InvalidRequest(SapiensServerError):
    """The server refused the request as malformed or unsuitable (400/422)."""


class RequestTooLarge(SapiensServerError):
    """The request body exceeds the server's size cap (413)."""


class RequestCancelled(SapiensServerError):
    """The request was cancelled (by the user, or the server answered 499)."""


class ServerBusy(SapiensServerError):
    """All inference slots are taken (503); retry after ``retry_after`` seconds."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kw):
        super().__init__(message, **kw)
        self.retry_after = retry_after


class ServerError(SapiensServerError):
    """The server failed while handling the request; the message includes the server's own."""


class ProtocolError(SapiensServerError):
    """The server's answer does not follow the v2 protocol (malformed JSON, sizes, datatypes)."""


class ServerStartError(SapiensServerError):
    """The local server could not be started; ``detail`` holds the tail of its log."""
