"""One engine request seen from the event loop: submitted, read as text pieces, cancelled if abandoned.

The engine calls ``Request.on_event`` on its lane threads; ``Generation``
only moves each event onto the event loop (``call_soon_threadsafe`` into an
``asyncio.Queue``), so nothing on the loop ever waits on an engine lock and
no lane ever waits on the loop. ``pieces()`` yields one ``Piece`` per event
that carries text, so tokens one speculative step emitted together go out
together. A stop string ends the piece stream early and cancels the request
in the engine (its caches are freed); so does closing ``pieces()`` before
the end (a client that went away). Every generation reports to the server's
metrics as it goes and once at its end.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, NamedTuple

from engine.config import SamplingParams
from engine.request import Request, RequestStatus, TokenEvent
from engine.serve.errors import APIError
from engine.serve.text import Detokenizer, StopStrings, read_tokens

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from engine.models.pair import ModelPair
    from engine.schedulers.base import Engine
    from engine.serve.metrics import ServerMetrics


class Piece(NamedTuple):
    """Text produced since the previous piece."""

    text: str
    completion_tokens: int  # cumulative tokens behind the text so far
    finish_reason: str | None  # "stop" or "length" on the last piece


class Generation:
    def __init__(
        self,
        engine: Engine,
        pair: ModelPair,
        metrics: ServerMetrics,
        request_id: str,
        prompt_ids: list[int],
        params: SamplingParams,
        stop: tuple[str, ...] = (),
    ) -> None:
        self.engine = engine
        self._loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[TokenEvent] = asyncio.Queue()
        try:
            self.request = Request(request_id, prompt_ids, params, on_event=self._on_event)
        except ValueError as exc:  # the request's own check names it by its id, which the client never saw
            raise APIError(400, str(exc).removeprefix(f"request {request_id}: "), param="prompt") from exc
        self._meter = metrics.meter(self.request)
        self._detokenizer = Detokenizer(pair.decode)
        self._stops = StopStrings(stop)
        self.completion_tokens = 0  # tokens of the events read so far
        self.finish_reason: str | None = None
        self._closed = False

    @property
    def prompt_tokens(self) -> int:
        return len(self.request.prompt_token_ids)

    def submit(self) -> Generation:
        """Hand the request to the engine; a request it refuses is a 400 (503 if it is not running)."""
        if self.engine.fatal_error is not None or not self.engine.running:
            raise APIError(503, engine_down_message(self.engine), code="engine_unavailable")
        self.engine.submit(self.request)
        if self.request.status == RequestStatus.REJECTED:
            if not self.engine.running:
                raise APIError(503, engine_down_message(self.engine), code="engine_unavailable")
            raise APIError(400, self.request.error or "request rejected")  # the engine's admission check
        return self

    def _on_event(self, event: TokenEvent) -> None:  # on an engine lane thread
        if not self._loop.is_closed():
            self._loop.call_soon_threadsafe(self._events.put_nowait, event)

    async def pieces(self) -> AsyncIterator[Piece]:
        """Text as the engine produces it; raises ``APIError`` if the engine fails the request."""
        try:
            while True:
                event = await self._events.get()
                self._meter.on_event(event)
                if event.finished:
                    self._check_ended_well()
                text, stopped, tokens = read_tokens(self._detokenizer, self._stops, event.token_ids, event.finished)
                self.completion_tokens += tokens
                if stopped:
                    self.engine.cancel(self.request, "a stop string ended the output")
                    self.finish_reason = "stop"
                elif event.finished:
                    self.finish_reason = str(self.request.finish_reason)
                if text or self.finish_reason:
                    yield Piece(text, self.completion_tokens, self.finish_reason)
                if self.finish_reason:
                    return
        finally:
            self.close()

    async def text(self) -> str:
        return "".join([piece.text async for piece in self.pieces()])

    def close(self) -> None:
        """End the request if it is still running (the client is gone) and report it to the metrics, once."""
        if self._closed:
            return
        self._closed = True
        self.engine.cancel(self.request, "the client went away")
        self._meter.on_end(self.finish_reason)

    def _check_ended_well(self) -> None:
        status = self.request.status
        if status == RequestStatus.OK:
            return
        if self.engine.fatal_error is not None or not self.engine.running:
            raise APIError(503, f"request {status}: {self.request.error}", code="engine_unavailable")
        raise APIError(500, f"request {status}: {self.request.error}")


def engine_down_message(engine: Engine) -> str:
    if engine.fatal_error is not None:
        return f"the engine has crashed: {engine.fatal_error}"
    return "the engine is not running"
