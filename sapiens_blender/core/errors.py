# SPDX-License-Identifier: GPL-3.0-or-later
"""The add-on's errors: one root, ``SapiensError``, and the typed, human-readable errors of the
inference client and the server process manager.

Every error the add-on, its CLI and its API raise on purpose derives from ``SapiensError`` (the
others keep their builtin base too, e.g. ``MapsError`` is a ``ValueError``), so a caller can catch
the project's errors in one clause. Every message is a full sentence a user can act on (the UI
shows ``str(error)`` as is); the technical detail (HTTP status, the server's own message, its log
tail) rides along as attributes.
"""

from __future__ import annotations

import http.client
import json


class SapiensError(Exception):
    """Root of every error sapiens_blender raises on purpose."""


class SapiensServerError(SapiensError):
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


def raise_for_status(status: int, headers: dict, body, *, where: str, request: str,
                     model: str | None = None, available_models=lambda: []) -> None:
    """Raise the typed error for an HTTP error answer (v2 error body, Triton/KServe spellings)."""
    message = error_message(body) or http.client.responses.get(status, "unknown status")
    low = message.lower()
    kw = {"status": status, "detail": message}
    if status in (401, 403):
        hint = "wrong or missing token" if status == 401 else "request refused"
        raise AuthenticationError(f"{where} refused the request ({hint}): {message}", **kw)
    if model and (status == 404 or (status == 400 and "unknown model" in low)):
        available = available_models()
        names = ", ".join(available) if available else "none reported"
        raise ModelNotFound(f"{where} has no model {model!r} (available: {names})",
                            model=model, available=available, **kw)  # fmt: skip
    if status == 409 and ("not loaded" in low or "not ready" in low or "loading" in low):
        raise ModelNotReady(f"model {model!r} is not ready on {where}: {message}", **kw)
    if status == 413:
        raise RequestTooLarge(f"the request is too large for {where}: {message}", **kw)
    if status == 499:
        raise RequestCancelled(f"the request was cancelled: {message}", **kw)
    if status == 503:
        retry = headers.get("retry-after")
        try:
            retry_after = float(retry) if retry is not None else None
        except ValueError:
            retry_after = None
        later = f"; retry in {retry_after:g} s" if retry_after is not None else ""
        raise ServerBusy(f"{where} is busy{later}: {message}", retry_after=retry_after, **kw)
    if status == 504:
        raise Timeout(f"{where} timed out: {message}", **kw)
    if model and status == 400 and ("not ready" in low or "unavailable" in low):
        raise ModelNotReady(f"model {model!r} is not ready on {where}: {message}", **kw)
    if status in (400, 404, 405, 409, 422):
        raise InvalidRequest(f"{where} refused {request}: {message}", **kw)
    raise ServerError(f"{where} failed ({status}): {message}", **kw)


def error_message(body) -> str:
    """The server's error message: v2 ``{"error": ...}``, else the body's text, shortened."""
    text = bytes(body[:4000]).decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return text[:500]
    if isinstance(data, dict):
        for key in ("error", "detail", "message"):
            if data.get(key):
                value = data[key]
                return value if isinstance(value, str) else json.dumps(value)[:500]
    return text[:500]
