# SPDX-License-Identifier: GPL-3.0-or-later
"""The v2 HTTP routes (FastAPI). Guards live in security.py, the work in dataplane/ (infer.py, jobs.py)."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass, field

from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.requests import ClientDisconnect

from .. import __version__
from ..dataplane import base
from ..dataplane.base import BackendError, Cancelled
from ..dataplane.infer import prepare_echo, prepare_maps, prepare_tensors
from ..dataplane.jobs import FINISHED, JobIdInUse, JobManager, QueueFull, ShuttingDown
from ..dataplane.models import ECHO, FIT_MODEL, ModelSlot, NotLoaded, model_metadata
from ..processing.image_io import DEFAULT_MAX_PIXELS, ImageError
from ..protocol.messages import DATATYPES, MAX_ID, MessageError, parse_infer_request
from .security import BodyTooLarge, GuardMiddleware, allowed_hosts

log = logging.getLogger("inference_server")
EXTENSIONS = ["binary_tensor_data", "model_repository", "parameters", "sapiens_jobs"]
MAX_SMALL_BODY = 64 * 1024  # load/unload bodies hold a few parameters
BIG_JSON = 1024 * 1024  # JSON parts this large are parsed one at a time


@dataclass
class ServerConfig:
    token: str
    port: int = 0
    max_body_bytes: int = 256 * 1024 * 1024
    max_image_pixels: int = DEFAULT_MAX_PIXELS
    # JSON costs ~40x its size in Python objects while parsing; big tensors must travel binary.
    max_json_bytes: int = 8 * 1024 * 1024
    max_concurrency: int = 1
    max_queue: int = 8
    max_batch: int = 4  # dynamic batching: requests of one model run together (1 = off)
    batch_window_ms: float = 5.0  # how long a worker waits for batch mates
    autoload: bool = True
    enable_echo: bool = False
    any_host: bool = False  # --allow-remote without --allowed-host
    extra_hosts: list[str] = field(default_factory=list)


class ChunksResponse(Response):
    """A binary v2 answer sent as its buffers (JSON header, then each tensor) without joining
    them: the maps reach the socket without an extra copy."""

    media_type = "application/octet-stream"

    def __init__(self, chunks: list, header_length: int):
        self.chunks = chunks
        total = sum(len(c) if isinstance(c, bytes) else c.nbytes for c in chunks)
        super().__init__(None, 200, {"Inference-Header-Content-Length": str(header_length),
                                     "Content-Length": str(total)})

    async def __call__(self, scope, receive, send) -> None:
        await send({"type": "http.response.start", "status": self.status_code,
                    "headers": self.raw_headers})
        for i, chunk in enumerate(self.chunks):
            await send({"type": "http.response.body", "body": chunk,
                        "more_body": i < len(self.chunks) - 1})


def error(status: int, message: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers=headers)


# Exception -> (status, message): one place decides what every failure looks like on the wire.
def _error_for(exc: Exception) -> JSONResponse:
    if isinstance(exc, (MessageError, ImageError, BackendError)):
        return error(exc.status, str(exc))
    if isinstance(exc, Cancelled):
        return error(499, str(exc) or "request cancelled")
    if isinstance(exc, (NotLoaded, JobIdInUse)):
        return error(409, str(exc))
    if isinstance(exc, QueueFull):
        return error(503, str(exc), {"Retry-After": str(exc.retry_after)})
    if isinstance(exc, ShuttingDown):
        return error(503, str(exc))
    if isinstance(exc, BodyTooLarge):
        return error(413, str(exc))
    if isinstance(exc, StarletteHTTPException):
        return error(exc.status_code, str(exc.detail), getattr(exc, "headers", None))
    log.exception("unexpected server error")
    return error(500, f"server error: {type(exc).__name__}: {exc}")


async def _cancel_on_disconnect(request: Request, job) -> None:
    """A client that hangs up (timeout, closed panel) cancels its work instead of leaving the
    GPU busy for nobody. Once the body is read, the next ASGI message can only be a disconnect."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            log.info("client of job %s disconnected; cancelling it", job.id)
            job.token.cancel()
            return


INFER_BODY = {"requestBody": {"required": True, "content": {
    "application/json": {"schema": {
        "type": "object", "required": ["inputs"],
        "properties": {
            "id": {"type": "string"},
            "parameters": {"type": "object"},
            "inputs": {"type": "array", "items": {
                "type": "object", "required": ["name", "datatype", "shape"],
                "properties": {
                    "name": {"type": "string"},
                    "datatype": {"type": "string", "enum": list(DATATYPES)},
                    "shape": {"type": "array", "items": {"type": "integer", "minimum": 0}},
                    "parameters": {"type": "object"},
                    "data": {"type": "array"}}}},
            "outputs": {"type": "array", "items": {
                "type": "object", "required": ["name"],
                "properties": {"name": {"type": "string"}, "parameters": {"type": "object"}}}}}}},
    "application/octet-stream": {"schema": {"type": "string", "format": "binary"}}}}}


def create_app(config: ServerConfig) -> tuple[GuardMiddleware, JobManager]:
    """The ASGI app (guards around FastAPI) and its job manager."""
    jobs = JobManager(config.max_concurrency, config.max_queue, max_batch=config.max_batch,
                      batch_window_s=config.batch_window_ms / 1000.0)
    slots: dict[str, ModelSlot] = {}
    app = FastAPI(title="sapiens_blender inference server (Open Inference Protocol v2)",
                  version=__version__, docs_url=None, redoc_url=None)
    app.state.jobs = jobs
    json_parsing = asyncio.Semaphore(1)

    def _json_too_large(size: int) -> JSONResponse:
        return error(413, f"the JSON part of the request is {size} bytes, more than the "
                          f"server's limit of {config.max_json_bytes}; send large tensors as "
                          f"binary data (binary tensor data extension)")

    for exc_type in (Exception, StarletteHTTPException, BodyTooLarge, MessageError, ImageError):
        app.add_exception_handler(exc_type, lambda request, exc: _error_for(exc))

    def names() -> list[str]:
        return sorted({*base.registered_names(), *([ECHO] if config.enable_echo else [])})

    def slot_for(name: str, version: str | None) -> ModelSlot | None:
        """The slot of a model (None for echo); 404 for unknown names or versions."""
        if name == ECHO and config.enable_echo:
            slot = None
        elif name in base.registered_names():
            slot = slots.setdefault(name, ModelSlot(name))
        else:
            raise StarletteHTTPException(404, f"unknown model {name!r}; available: {names()}")
        if version is not None and version != (slot.version if slot else "1"):
            raise StarletteHTTPException(404, f"model {name!r} has no version {version!r}")
        return slot

    def fit_slot() -> ModelSlot | None:
        """The body fit's slot, for analyses asked for a body (None: no fit on this server)."""
        return slots.setdefault(FIT_MODEL, ModelSlot(FIT_MODEL)) if FIT_MODEL in base.registered_names() else None

    @app.get("/v2/health/live")
    async def live():
        return {"live": True}

    @app.get("/v2/health/ready")
    async def ready():
        if jobs.shutting_down:
            return JSONResponse({"ready": False, "error": "shutting down"}, status_code=503)
        return {"ready": True}

    @app.get("/v2")
    async def server_metadata():
        return {"name": "sapiens_blender", "version": __version__, "extensions": EXTENSIONS,
                "batching": jobs.batch_stats()}

    @app.get("/v2/models/{name}")
    @app.get("/v2/models/{name}/versions/{version}")
    async def metadata(name: str, version: str | None = None):
        return model_metadata(name, slot_for(name, version))

    @app.get("/v2/models/{name}/ready")
    @app.get("/v2/models/{name}/versions/{version}/ready")
    async def model_ready(name: str, version: str | None = None):
        slot = slot_for(name, version)
        if slot is None or slot.loaded:
            return {"name": name, "ready": True}
        return JSONResponse({"name": name, "ready": False,
                             "error": f"model {name!r} is not loaded"}, status_code=503)

    @app.post("/v2/models/{name}/infer", openapi_extra=INFER_BODY)
    @app.post("/v2/models/{name}/versions/{version}/infer", openapi_extra=INFER_BODY)
    async def infer(name: str, request: Request, version: str | None = None):
        slot = slot_for(name, version)
        raw_length = request.headers.get("inference-header-content-length")
        try:
            header_length = None if raw_length is None else int(raw_length)
        except ValueError:
            raise MessageError(f"Inference-Header-Content-Length {raw_length!r} is not an integer")
        declared = request.headers.get("content-length")
        json_part = header_length if header_length is not None else (
            int(declared) if declared and declared.isdigit() else None)
        if json_part is not None and json_part > config.max_json_bytes:
            return _json_too_large(json_part)
        # A queue slot before the body is read: bodies in memory are bounded by the queue.
        jobs.reserve()
        try:
            try:
                body = await request.body()
            except ClientDisconnect:
                log.info("client went away while uploading a request for %s", name)
                jobs.unreserve()
                return Response(status_code=400)
            if header_length is None and len(body) > config.max_json_bytes:  # chunked JSON
                jobs.unreserve()
                return _json_too_large(len(body))
            if (header_length or len(body)) > BIG_JSON:
                async with json_parsing:  # one big JSON parse at a time: ~40x its size in RAM
                    req = await run_in_threadpool(parse_infer_request, body, header_length)
            else:
                req = await run_in_threadpool(parse_infer_request, body, header_length)
            del body
            if slot is None:
                work = prepare_echo(req)
            elif slot.tensor_model:
                work = prepare_tensors(req, slot, autoload=config.autoload, max_pixels=config.max_image_pixels)
            else:
                work = prepare_maps(req, slot, max_pixels=config.max_image_pixels,
                                    autoload=config.autoload, fit_slot=fit_slot())
            job = jobs.admit(req.id, "infer", name, reserved=True)
        except BaseException:
            jobs.unreserve()
            raise
        watcher = asyncio.create_task(_cancel_on_disconnect(request, job))
        try:
            payload, json_length = await jobs.run(job, work)
        except Exception as exc:
            return _error_for(exc)
        finally:
            watcher.cancel()
        if json_length is None:
            return Response(b"".join(payload), media_type="application/json")
        return ChunksResponse(payload, json_length)

    @app.post("/v2/repository/index")
    async def repository_index():
        out = []
        for name in names():
            slot = slot_for(name, None)
            state, reason = ("READY", "") if slot is None else slot.state()
            out.append({"name": name, "version": "1" if slot is None else slot.version,
                        "state": state, "reason": reason})
        return out

    async def _json_body(request: Request) -> dict:
        raw = bytearray()
        async for chunk in request.stream():
            raw += chunk
            if len(raw) > MAX_SMALL_BODY:
                raise StarletteHTTPException(413, f"this request's body must be at most "
                                                  f"{MAX_SMALL_BODY} bytes")
        if not raw.strip():
            return {}
        try:
            parsed = json.loads(raw)
        except (ValueError, RecursionError) as exc:  # bad UTF-8/JSON, 5,000-digit numbers
            raise MessageError(f"body is not valid JSON: {exc}") from None
        if not isinstance(parsed, dict):
            raise MessageError("the JSON body must be an object")
        return parsed

    @app.post("/v2/repository/models/{name}/load")
    async def load(name: str, request: Request):
        slot = slot_for(name, None)
        params = (await _json_body(request)).get("parameters") or {}
        job_id = params.get("job_id") if isinstance(params, dict) else None
        if job_id is not None and (not isinstance(job_id, str) or not 0 < len(job_id) <= MAX_ID):
            raise MessageError(f"parameters.job_id must be a string of 1..{MAX_ID} characters")
        if slot is None:
            return {}
        job = jobs.admit(job_id or f"load:{name}", "load", name)
        try:
            await jobs.run(job, lambda j: slot.load(j.report, j.token))
        except Exception as exc:
            return _error_for(exc)
        return {}

    @app.post("/v2/repository/models/{name}/unload")
    async def unload(name: str):
        slot = slot_for(name, None)
        if slot is not None:
            await run_in_threadpool(slot.unload)
        return {}

    def job_or_404(job_id: str):
        job = jobs.get(job_id)
        if job is None:
            raise StarletteHTTPException(404, f"no job {job_id!r} (finished jobs are kept 10 min)")
        return job

    @app.get("/v2/jobs")
    async def list_jobs():
        return {"jobs": [j.to_json() for j in jobs.list()]}

    # ":path" so any v2 request id works, "/" included; the suffixed routes come first.
    @app.post("/v2/jobs/{job_id:path}/cancel", status_code=202)
    async def cancel_job(job_id: str):
        job_or_404(job_id)
        job = jobs.cancel(job_id)
        return {"id": job_id, "state": job.state}

    @app.get("/v2/jobs/{job_id:path}/events")
    async def job_events(job_id: str):
        job = job_or_404(job_id)

        async def stream():
            seen = -1
            while True:
                if job.revision != seen:
                    seen = job.revision
                    snapshot = job.to_json()
                    yield f"data: {json.dumps(snapshot)}\n\n"
                    if snapshot["state"] in FINISHED:
                        return
                await asyncio.sleep(0.05)

        return StreamingResponse(stream(), media_type="text/event-stream",
                                 headers={"Cache-Control": "no-store"})

    @app.get("/v2/jobs/{job_id:path}")
    async def get_job(job_id: str):
        return job_or_404(job_id).to_json()

    hosts = None if config.any_host else allowed_hosts(config.port, config.extra_hosts)
    return GuardMiddleware(app, config.token, hosts, config.max_body_bytes), jobs
