"""The HTTP layer (starlette; the `serve` extra): routes, the API key, the body limit, OpenAI-style
JSON errors, and server-sent events.

Streaming: OpenAI's chunk sequence (role, then reasoning and content deltas as the request's short
decode segments settle them, rollout/serve/deltas.py; tool calls, finish with the token ids, usage), then
`data: [DONE]`. A client that disconnects before its reply ends cancels it: no further piece of its
completion is decoded (the piece on the device ends with its segment), and the others' requests go on.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import secrets
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from rollout.serve.deltas import TextDeltas
from rollout.serve.schema import ApiError, ChatRequest, parse_chat
from rollout.serve.service import ChatService, Prepared
from rollout.serve.sessions import close_fields

log = logging.getLogger("serve")

SESSION_HEADER = "x-session-id"  # requests carrying it are recorded as one episode
INSTANCE_HEADER = "x-instance-id"  # the benchmark instance of the session (default: the session id)
# a bug's answer (the traceback goes to the server's log, never to the client)
INTERNAL_ERROR = ApiError(500, "internal server error (see the server's log)", kind="server_error")
DISCONNECT_POLL_S = 0.5  # how often a waiting request checks that its client is still there


def build_app(service: ChatService, api_key: str | None, max_body_bytes: int) -> Starlette:
    """The ASGI app serving `service`; `api_key` (None: none asked) guards every /v1 route."""
    api = _Endpoints(service, api_key, max_body_bytes)
    routes = [
        Route("/v1/chat/completions", api.guarded(api.chat), methods=["POST"]),
        Route("/v1/sessions/{session}/close", api.guarded(api.close_session), methods=["POST"]),
        Route("/v1/models", api.guarded(api.models), methods=["GET"]),
        Route("/v1/stats", api.guarded(api.stats), methods=["GET"]),
        Route("/health", api.guarded(api.health), methods=["GET"]),
    ]
    return Starlette(routes=routes)


@dataclasses.dataclass
class _Endpoints:
    service: ChatService
    api_key: str | None
    max_body_bytes: int

    def guarded(
        self, handler: Callable[[Request], Awaitable[Response]]
    ) -> Callable[[Request], Awaitable[Response]]:
        """`handler` behind the API key, with every refusal or failure an OpenAI-style JSON error."""

        async def route(request: Request) -> Response:
            try:
                if self.api_key is not None and request.url.path.startswith("/v1"):
                    given = request.headers.get("authorization", "").removeprefix("Bearer ").strip()
                    if not secrets.compare_digest(given.encode(), self.api_key.encode()):
                        raise ApiError(401, "invalid or missing API key", kind="authentication_error")
                return await handler(request)
            except ApiError as err:
                return JSONResponse(err.body(), status_code=err.status)
            except Exception:  # a bug answers 500 and the server keeps serving
                log.exception("request failed")
                return JSONResponse(INTERNAL_ERROR.body(), status_code=500)

        return route

    async def read_json(self, request: Request) -> Any:
        """The body's JSON; 413 past the limit (declared or streamed), 400 when it does not parse."""
        limit = self.max_body_bytes
        declared = request.headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > limit:
            raise ApiError(413, f"the request body exceeds {limit} bytes")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > limit:
                raise ApiError(413, f"the request body exceeds {limit} bytes")
        try:
            return json.loads(body) if body else None
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise ApiError(400, f"the body is not valid JSON: {err}") from None

    async def chat(self, request: Request) -> Response:
        req = parse_chat(await self.read_json(request), self.service.model_name)
        prepared = self.service.prepare(req)  # a bad request is refused before a stream starts
        session, instance = request.headers.get(SESSION_HEADER), request.headers.get(INSTANCE_HEADER)
        if req.stream:  # (starlette cancels the stream when its client leaves)
            events = _events(self.service, req, prepared, session, instance)
            return StreamingResponse(events, media_type="text/event-stream")
        task = asyncio.ensure_future(self.service.complete(req, prepared, session, instance))
        while not (await asyncio.wait({task}, timeout=DISCONNECT_POLL_S))[0]:
            if await request.is_disconnected():
                task.cancel()
                return Response(status_code=499)  # nobody reads it; the access log shows why
        return JSONResponse(task.result())

    async def close_session(self, request: Request) -> Response:
        session = request.path_params["session"]
        try:
            answer, reward = close_fields(await self.read_json(request))
            records = self.service.sessions.close(session, answer, reward)
        except ValueError as err:
            raise ApiError(400, str(err)) from None
        except KeyError:
            raise ApiError(404, "no open session with that id", kind="not_found_error") from None
        return JSONResponse({"session": session, "streams": len(records)})

    async def models(self, request: Request) -> Response:
        model = {"id": self.service.model_name, "object": "model", "created": 0, "owned_by": "b2tjax"}
        return JSONResponse({"object": "list", "data": [model]})

    async def health(self, request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    async def stats(self, request: Request) -> Response:
        return JSONResponse(dataclasses.asdict(self.service.worker.stats))


async def _events(
    service: ChatService, req: ChatRequest, prepared: Prepared, session: str | None, instance: str | None
) -> AsyncIterator[str]:
    """OpenAI's `chat.completion.chunk` events of a completion, its text as its segments decode."""
    pieces: asyncio.Queue[tuple[int, list[int]]] = asyncio.Queue()
    task = asyncio.ensure_future(
        service.complete(req, prepared, session, instance, lambda k, ids: pieces.put_nowait((k, ids)))
    )
    head = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": service.model_name,
    }

    def chunk(k: int, delta: dict[str, Any], **extra: Any) -> str:
        return _sse({**head, "choices": [{"index": k, "delta": delta, "finish_reason": None, **extra}]})

    texts = [TextDeltas(req.parse_tools, req.stop) for _ in range(req.n)]
    try:
        for k in range(req.n):
            yield chunk(k, {"role": "assistant", "content": ""})
        while not task.done():
            getter = asyncio.ensure_future(pieces.get())
            await asyncio.wait({getter, task}, return_when=asyncio.FIRST_COMPLETED)
            if not getter.done():
                getter.cancel()
                continue
            k, ids = getter.result()
            for delta in texts[k].update(req.call_start + service.stable_text(ids)):
                yield chunk(k, delta)
        try:
            body = task.result()
        except ApiError as err:  # the status is sent already: the error is the stream's last event
            yield _sse(err.body())
            return
        except Exception:
            log.exception("a streamed request failed")
            yield _sse(INTERNAL_ERROR.body())
            return
        for choice in body["choices"]:
            k = choice["index"]
            for delta in texts[k].finish(choice["message"]):
                yield chunk(k, delta)
            ids = dict(token_ids=choice["token_ids"], token_logprobs=choice["token_logprobs"])
            last = dict(finish_reason=choice["finish_reason"], logprobs=choice["logprobs"], **ids)
            done = {"index": k, "delta": {}, **last}
            yield _sse({**head, "choices": [done], "prompt_token_ids": prepared.prompt})
        if req.include_usage:
            yield _sse({**head, "choices": [], "usage": body["usage"]})
        yield "data: [DONE]\n\n"
    finally:
        task.cancel()  # a client that left: no further piece


def _sse(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj, ensure_ascii=False)}\n\n"
