# SPDX-License-Identifier: GPL-3.0-or-later
"""Client-side v2 messages for the tests and benchmarks: building requests and reading answers.

The server only parses requests and encodes answers (inference_server/protocol/messages.py); these are
the other direction, kept out of the server so it carries no test-only code.
"""

from __future__ import annotations

from collections.abc import Iterable

from inference_server.protocol.messages import (
    RequestedOutput,
    Tensor,
    decode_message,
    encode_chunks,
)


def encode_message(header: dict, key: str, tensors: Iterable[Tensor],
                   binary: Iterable[bool]) -> tuple[bytes, int | None]:
    """Body bytes and Inference-Header-Content-Length (None when the body is pure JSON)."""
    chunks, header_length = encode_chunks(header, key, tensors, binary)
    return b"".join(chunks), header_length


def encode_infer_request(inputs: list[Tensor], *, binary: bool = True, id: str | None = None,
                         parameters: dict | None = None,
                         outputs: list[RequestedOutput] | None = None) -> tuple[bytes, int | None]:
    """A request body and its Inference-Header-Content-Length."""
    header: dict = {}
    if id is not None:
        header["id"] = id
    if parameters:
        header["parameters"] = parameters
    if outputs is not None:
        header["outputs"] = [{"name": o.name, **({"parameters": o.parameters} if o.parameters else {})}
                             for o in outputs]
    return encode_message(header, "inputs", inputs, [binary] * len(inputs))


def parse_infer_response(body: bytes, header_length: int | None) -> tuple[dict, dict[str, Tensor]]:
    header, outputs = decode_message(body, header_length, "outputs")
    return header, {t.name: t for t in outputs}
