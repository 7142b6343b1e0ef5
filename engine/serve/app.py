"""The routes: ``/v1/completions``, ``/v1/chat/completions``, ``/v1/models``, ``/health``, ``/metrics``.

``build_app`` serves one engine under one model name. The app owns the
engine's life: its startup starts the engine, its shutdown stops it (which
cancels whatever is still running). A completion request is checked (model,
unsupported features, sampling values), its prompt encoded off the event
loop, and submitted as one ``Generation``; the engine's own admission check
(empty prompt, prompt + max_tokens beyond the context or the KV budget)
answers a refused request with a 400 carrying the engine's message. A client
that disconnects before its answer is complete, streamed or not, has its
request cancelled. A prompt longer than the context is refused, never
truncated.

Limits: a body over ``MAX_BODY_BYTES`` is a 413 before it is parsed
(``engine.serve.limits``); with ``max_waiting``, a request arriving while
that many wait for admission is a 429 (without it, requests wait for KV
budget as long as it takes). At shutdown the engine's request accounting is
checked (``EngineStats.accounting_problem``) and any imbalance logged.
"""

from __future__ import annotations

import asyncio
import logging
import uuid
from contextlib import asynccontextmanager

from fastapi import FastAPI
from fastapi import Request as HTTPRequest
from fastapi.responses import JSONResponse, Response
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from engine.models.pair import ModelPair
from engine.schedulers.base import Engine
from engine.serve.auth import APIKeyMiddleware
from engine.serve.errors import APIError, install_error_handlers
from engine.serve.generation import Generation, engine_down_message
from engine.serve.limits import MAX_BODY_BYTES, BodyLimitMiddleware
from engine.serve.metrics import ServerMetrics
from engine.serve.openapi import HEALTH, METRICS, describe, generation_responses
from engine.serve.prompts import chat_prompt_ids, completion_prompt_ids
from engine.serve.protocol import DEFAULT_COMPLETION_MAX_TOKENS, ChatCompletionRequest, CompletionRequest
from engine.serve.protocol import GenerationRequest as Body
from engine.serve.responses import (
    ChatChoice,
    ChatChunkChoice,
    ChatCompletionChunk,
    ChatCompletionResponse,
    ChatDelta,
    ChatMessageOut,
    CompletionChoice,
    CompletionResponse,
    ModelCard,
    ModelList,
    Usage,
)
from engine.serve.streaming import ChunkFn, EventStream, UsageChunkFn, stream

log = logging.getLogger(__name__)

CLIENT_CLOSED = 499  # nginx's code for a client that went away; the client never sees it


class Server:
    """What the routes share: the engine, its model pair, the served name and the metrics."""

    def __init__(self, engine: Engine, pair: ModelPair, model_name: str, max_waiting: int | None = None) -> None:
        if max_waiting is not None and max_waiting < 0:
            raise ValueError(f"max_waiting must be >= 0, got {max_waiting}")
        self.engine = engine
        self.pair = pair
        self.model_name = model_name
        self.max_waiting = max_waiting  # None: no limit, requests wait for the KV budget
        self.metrics = ServerMetrics(engine, model_name)

    def check(self, body: Body) -> None:
        if body.model is not None and body.model != self.model_name:
            message = f"the model {body.model!r} does not exist; this server serves {self.model_name!r}"
            raise APIError(404, message, param="model", code="model_not_found")
        body.check_supported()

    def room_for(self, prompt_ids: list[int]) -> int:
        """Output tokens the context and the KV budget leave after a prompt (at least 1: the engine judges)."""
        limit = min(self.pair.max_context, self.engine.budget.capacity - 1)
        return max(1, limit - len(prompt_ids))

    def start(self, prefix: str, body: Body, prompt_ids: list[int], default_max_tokens: int) -> Generation:
        params = body.sampling_params(default_max_tokens)
        if self.max_waiting is not None and (waiting := self.engine.stats().waiting) >= self.max_waiting:
            message = f"{waiting} requests are already waiting for the engine (the limit is {self.max_waiting})"
            raise APIError(429, f"{message}; retry later", code="too_many_waiting")
        request_id = f"{prefix}-{uuid.uuid4().hex}"
        args = (self.engine, self.pair, self.metrics, request_id, prompt_ids, params, body.stop_strings)
        return Generation(*args).submit()


def build_app(
    engine: Engine,
    pair: ModelPair,
    model_name: str,
    api_key: str | None = None,
    max_waiting: int | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
) -> FastAPI:
    """An app serving ``engine`` (started at the app's startup, stopped at its shutdown)."""
    server = Server(engine, pair, model_name, max_waiting)

    @asynccontextmanager
    async def lifespan(_: FastAPI):
        engine.start()
        try:
            yield
        finally:
            await asyncio.to_thread(engine.stop)
            if problem := engine.stats().accounting_problem():
                log.error("%s", problem)

    app = FastAPI(title="PD-Verify", lifespan=lifespan)
    app.state.server = server
    describe(app)
    install_error_handlers(app)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes)
    if api_key:  # added last, so it runs first: a request without the key is refused before its body is read
        app.add_middleware(APIKeyMiddleware, api_key=api_key)

    @app.get("/health", response_class=Response, responses=HEALTH)
    def health() -> Response:
        if engine.fatal_error is not None or not engine.running:
            raise APIError(503, engine_down_message(engine), code="engine_unavailable")
        return Response(status_code=200)

    @app.get("/metrics", response_class=Response, responses=METRICS)
    def metrics() -> Response:  # a plain def: FastAPI runs it on its thread pool, off the event loop
        return Response(generate_latest(server.metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/v1/models")
    def models() -> ModelList:
        return ModelList(data=[ModelCard(id=model_name, max_model_len=pair.max_context)])

    @app.post("/v1/completions", responses=generation_responses(CompletionResponse))
    async def completions(body: CompletionRequest, http: HTTPRequest) -> Response:
        server.check(body)
        prompt_ids = await asyncio.to_thread(completion_prompt_ids, pair.tokenizer, body.prompt)
        generation = server.start("cmpl", body, prompt_ids, DEFAULT_COMPLETION_MAX_TOKENS)
        rid = generation.request.request_id

        def chunk(text: str | None, finish: str | None, usage: Usage | None) -> CompletionResponse:
            choice = CompletionChoice(text=text or "", finish_reason=finish)
            return CompletionResponse(id=rid, model=model_name, choices=[choice], usage=usage)

        def usage_chunk(usage: Usage) -> CompletionResponse:
            return CompletionResponse(id=rid, model=model_name, choices=[], usage=usage)

        if body.stream:
            return _streamed(generation, body, chunk, usage_chunk)
        text = await _complete(generation, http)
        if text is None:
            return Response(status_code=CLIENT_CLOSED)
        usage = Usage.of(generation.prompt_tokens, generation.completion_tokens)
        return JSONResponse(chunk(text, generation.finish_reason, usage).model_dump())

    @app.post("/v1/chat/completions", responses=generation_responses(ChatCompletionResponse))
    async def chat_completions(body: ChatCompletionRequest, http: HTTPRequest) -> Response:
        server.check(body)
        prompt_ids = await asyncio.to_thread(chat_prompt_ids, pair.tokenizer, body.messages)
        generation = server.start("chatcmpl", body, prompt_ids, server.room_for(prompt_ids))
        rid = generation.request.request_id

        def chunk(text: str | None, finish: str | None, usage: Usage | None) -> ChatCompletionChunk:
            delta = ChatDelta(role="assistant", content="") if text is None else ChatDelta(content=text)
            choice = ChatChunkChoice(delta=delta, finish_reason=finish)
            return ChatCompletionChunk(id=rid, model=model_name, choices=[choice], usage=usage)

        def usage_chunk(usage: Usage) -> ChatCompletionChunk:
            return ChatCompletionChunk(id=rid, model=model_name, choices=[], usage=usage)

        if body.stream:
            return _streamed(generation, body, chunk, usage_chunk, opening=True)
        text = await _complete(generation, http)
        if text is None:
            return Response(status_code=CLIENT_CLOSED)
        choice = ChatChoice(message=ChatMessageOut(content=text), finish_reason=generation.finish_reason)
        usage = Usage.of(generation.prompt_tokens, generation.completion_tokens)
        response = ChatCompletionResponse(id=rid, model=model_name, choices=[choice], usage=usage)
        return JSONResponse(response.model_dump())

    return app


def _streamed(generation: Generation, body: Body, chunk: ChunkFn, usage_chunk: UsageChunkFn, opening: bool = False):
    events = stream(generation, chunk, usage_chunk, body.include_usage, body.continuous_usage, opening)
    return EventStream(events, generation)


async def _complete(generation: Generation, http: HTTPRequest) -> str | None:
    """The whole text, or None if the client disconnected first (its request is then cancelled)."""
    text = asyncio.ensure_future(generation.text())
    gone = asyncio.ensure_future(_disconnect(http))
    try:
        await asyncio.wait({text, gone}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not text.done():
            text.cancel()
            generation.close()
    return text.result() if text.done() else None


async def _disconnect(http: HTTPRequest) -> None:
    """Returns when the client disconnects (the body has been read: nothing else can arrive)."""
    while (await http.receive())["type"] != "http.disconnect":
        pass
