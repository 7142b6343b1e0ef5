"""Server-sent events: one ``data:`` line per chunk, then ``data: [DONE]``.

A chunk carries one ``Piece``: the text of one engine event, so the tokens of
one speculative step travel together. With ``stream_options.include_usage``
a last chunk with no choices carries the usage; with
``continuous_usage_stats`` as well, every chunk carries the usage so far
(cumulative completion tokens), as vLLM sends it. An error after the stream
has started (the engine failed the request) goes out as one
``data: {"error": ...}`` event before ``[DONE]``: the status line was already
sent.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

from pydantic import BaseModel
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from engine.serve.errors import APIError
from engine.serve.generation import Generation
from engine.serve.responses import Usage

DONE = "data: [DONE]\n\n"

# (text, finish_reason, usage) -> one chunk of the endpoint's shape
ChunkFn = Callable[[str | None, str | None, Usage | None], BaseModel]
# usage -> the chunk with no choices that carries the final usage
UsageChunkFn = Callable[[Usage], BaseModel]


def event(body: BaseModel | dict) -> str:
    data = body.model_dump_json() if isinstance(body, BaseModel) else json.dumps(body)
    return f"data: {data}\n\n"


async def stream(
    generation: Generation,
    chunk: ChunkFn,
    usage_chunk: UsageChunkFn,
    include_usage: bool,
    continuous_usage: bool,
    opening: bool = False,
) -> AsyncIterator[str]:
    """The events of one streamed response; ``opening`` sends a first chunk with no text (chat's role chunk)."""

    def usage(completion_tokens: int) -> Usage | None:
        return Usage.of(generation.prompt_tokens, completion_tokens) if continuous_usage else None

    try:
        if opening:
            yield event(chunk(None, None, usage(0)))
        async for piece in generation.pieces():
            yield event(chunk(piece.text, piece.finish_reason, usage(piece.completion_tokens)))
        if include_usage:
            yield event(usage_chunk(Usage.of(generation.prompt_tokens, generation.completion_tokens)))
    except APIError as exc:
        yield event(exc.body())
    yield DONE


class EventStream(StreamingResponse):
    """A stream of events that ends its generation however the response ends.

    A client that disconnects stops the response without closing the event
    iterator; ``close`` then cancels the request in the engine, so its caches
    and KV budget are freed at once, not whenever the iterator is collected.
    """

    def __init__(self, events: AsyncIterator[str], generation: Generation) -> None:
        super().__init__(events, media_type="text/event-stream")
        self.generation = generation

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.generation.close()
