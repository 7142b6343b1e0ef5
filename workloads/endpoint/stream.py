"""One request streamed from an OpenAI-compatible server into a ``Request``, timed as ``vllm bench serve`` times it.

The ``Request`` is filled through its own methods, so every metric derived
from it means what it means for an in-process engine:

* arrival – just before the HTTP request is sent (``EndpointEngine.submit``);
* each chunk that carries output is one ``emit`` at the chunk's arrival: its
  tokens share that time, as the tokens of one verify step do, so TTFT is the
  first chunk with content and every chunk is one gap of the ITL;
* how many tokens a chunk carries comes from the server's ``usage`` (asked for
  with ``stream_options.include_usage`` and ``continuous_usage_stats``, as vLLM
  has them): the growth of ``completion_tokens`` since the last chunk. A
  server that sends usage only at the end (in a chunk of its own, as vLLM
  without ``continuous_usage_stats``, or on the chunk with the finish reason,
  as ``transformers serve``) has its chunks counted by tokenizing their text
  and the difference settled at the end; one that sends none is counted by
  tokenizing alone (``TokenCount``), except that a stream ending with the
  finish reason ``length`` made exactly ``max_tokens`` tokens, by the API's
  definition: its count is settled to that, as with a final usage (llama.cpp's
  server streams no usage at all);
* the end – when the stream closes after a finish reason: an ``emit`` with no
  tokens, so E2E runs to the end of the stream.

The token ids a server streams are text: a chunk's ids are its text tokenized
with the pair's tokenizer, cut or filled (with the end-of-sequence id: a
counted token with no text) to the count the server gave. A request that gets
an HTTP error, an error event, a transport error or timeout, or a stream that
ends without a finish reason (cut off) fails with that text.
"""

from __future__ import annotations

import asyncio
import enum
import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from engine.request import FinishReason, Request, RequestStatus, TokenKind
from workloads.endpoint.spec import EndpointSpec, SentPrompt

ERROR_TEXT_CHARS = 300  # enough for a server's error message, short enough for a CSV cell


class TokenCount(enum.StrEnum):
    """Where a request's output token count came from (run.json ``endpoint.output_tokens_from``)."""

    USAGE = "usage"  # usage on every chunk (continuous_usage_stats)
    FINAL_USAGE = "final usage"  # chunks counted by tokenizing, the total from the final usage chunk
    LENGTH = "max_tokens at a length finish"  # no usage: chunks tokenized, the total max_tokens
    TOKENIZED = "tokenized"  # no usage: the text tokenized with the pair's tokenizer


@dataclass
class Streamed:
    """What the stream of one request left besides the ``Request``: its text and how its tokens were counted."""

    text: list[str] = field(default_factory=list)
    count: TokenCount = TokenCount.TOKENIZED
    # tokens counted by tokenizing beyond the total the server gave (final usage, or max_tokens at a length
    # finish): they were emitted as they arrived and cannot be taken back
    over_usage: int = 0


def request_body(spec: EndpointSpec, request: Request, sent: SentPrompt, tokenizer: Any) -> dict[str, Any]:
    """The JSON body: the trace's prompt in the form ``sent``, the run's sampling parameters, streaming with usage."""
    params = request.params
    body: dict[str, Any] = {
        **spec.extra_body,  # none of the fields below (``EndpointSpec`` checks)
        "model": spec.model,
        "max_tokens": params.max_new_tokens,
        "temperature": params.temperature,
        "top_p": params.top_p,
        "stream": True,
        "stream_options": {"include_usage": True, "continuous_usage_stats": True},
    }
    if sent == "chat":
        # the server applies its chat template, as the trace's ids were made with the pair's
        body["messages"] = [{"role": "user", "content": request.prompt or ""}]
    elif sent == "text":
        # the text of the very ids, chat template included: the server tokenizes it back
        body["prompt"] = tokenizer.decode(list(request.prompt_token_ids), skip_special_tokens=False)
    else:
        body["prompt"] = list(request.prompt_token_ids)  # exactly the tokens an in-process engine gets
    if params.top_k is not None:
        body["top_k"] = params.top_k
    if params.seed is not None:
        body["seed"] = params.seed
    if params.stop_token_ids == ():  # --ignore-eos: the trace fixes output lengths
        body["ignore_eos"] = True
        body["min_tokens"] = params.max_new_tokens  # the same for servers without ignore_eos (llama.cpp's)
    return body


class StreamReader:
    """Turns the chunks of one response into ``emit`` calls on its ``Request``."""

    def __init__(self, request: Request, tokenizer: Any, streamed: Streamed, on_tokens: Any) -> None:
        self.reason: str | None = None  # the server's finish reason, as it said it
        self.request = request
        self.tokenizer = tokenizer
        self.streamed = streamed
        self.on_tokens = on_tokens  # (count) -> None: the engine's running total
        self.counted = 0  # tokens emitted so far
        self.usage_total: int | None = None  # the server's completion_tokens, latest
        self.chunk_without_usage = False  # a chunk with text came without usage: usage is not continuous
        self.finish_reason: FinishReason | None = None

    def _ids(self, text: str, count: int | None) -> list[int]:
        ids = list(self.tokenizer(text, add_special_tokens=False).input_ids) if text else []
        if count is None:
            return ids
        eos = self.tokenizer.eos_token_id
        return (ids + [eos if eos is not None else 0] * count)[:count]

    def chunk(self, data: dict[str, Any]) -> None:
        if "error" in data:
            error = data["error"]
            message = error.get("message", error) if isinstance(error, dict) else error
            raise ServerError(f"error event: {message}")
        usage = data.get("usage") or {}
        completion_tokens = usage.get("completion_tokens")
        choices = data.get("choices") or []
        if not choices:  # the final usage chunk
            if completion_tokens is not None:
                self.usage_total = completion_tokens
            return
        choice = choices[0]
        text = choice.get("text") if "text" in choice else (choice.get("delta") or {}).get("content")
        text = text or ""
        count = None
        if completion_tokens is not None and not self.chunk_without_usage:  # usage on every chunk so far
            count = max(completion_tokens - self.counted, 0)
            self.streamed.count = TokenCount.USAGE
        elif completion_tokens is not None:  # the final usage, on the last chunk with choices
            self.usage_total = completion_tokens
        elif text:
            self.chunk_without_usage = True
        if text or count:
            ids = self._ids(text, count)
            self.streamed.text.append(text)
            self._emit(ids)
        reason = choice.get("finish_reason")
        if reason is not None:
            self.reason = reason
            self.finish_reason = FinishReason.LENGTH if reason == "length" else FinishReason.STOP

    def _emit(self, ids: list[int]) -> None:
        self.request.emit(ids, [TokenKind.DECODE] * len(ids), None)
        self.counted += len(ids)
        self.on_tokens(len(ids))

    def end(self) -> None:
        """The stream closed: settle the count with the final usage and end the request."""
        if self.finish_reason is None:
            raise ServerError(f"the stream ended without a finish reason after {self.counted} tokens (cut off)")
        total = self.usage_total
        if total is not None and self.streamed.count != TokenCount.USAGE:
            self.streamed.count = TokenCount.FINAL_USAGE
        elif total is None and self.streamed.count == TokenCount.TOKENIZED and self.reason == "length":
            total = self.request.params.max_new_tokens  # a length finish is max_tokens reached
            self.streamed.count = TokenCount.LENGTH
        if total is not None and self.streamed.count != TokenCount.USAGE:
            if total > self.counted:  # tokens with no text (end of sequence) arrive with the end
                self._emit(self._ids("", total - self.counted))
            self.streamed.over_usage = max(self.counted - total, 0)
        self.request.emit([], [], self.finish_reason)


class ServerError(Exception):
    """The server answered, but not with a completed stream."""


def _http_error(response: httpx.Response, body: bytes) -> str:
    text = body.decode("utf-8", "replace")
    try:
        error = json.loads(text).get("error")
        text = error.get("message", text) if isinstance(error, dict) else (error or text)
    except (ValueError, AttributeError):
        pass
    return f"HTTP {response.status_code}: {str(text).strip()}"[:ERROR_TEXT_CHARS]


async def stream_request(
    client: httpx.AsyncClient,
    spec: EndpointSpec,
    sent: SentPrompt,
    request: Request,
    tokenizer: Any,
    streamed: Streamed,
    on_tokens: Any,
) -> None:
    """Send ``request`` with its prompt as ``sent``, fill it from the stream; it ends ok, failed (with why) or
    cancelled."""
    reader = StreamReader(request, tokenizer, streamed, on_tokens)
    body = request_body(spec, request, sent, tokenizer)
    try:
        async with client.stream("POST", spec.api_url(sent), json=body, headers=spec.headers) as r:
            if r.status_code != 200:
                raise ServerError(_http_error(r, await r.aread()))
            async for line in r.aiter_lines():
                if not line.startswith("data:"):
                    continue
                payload = line.removeprefix("data:").strip()
                if payload == "[DONE]":
                    break
                reader.chunk(json.loads(payload))
        reader.end()
    except asyncio.CancelledError:
        request.fail(RequestStatus.CANCELLED, "cancelled: the run stopped")
        raise
    except ServerError as exc:
        request.fail(RequestStatus.FAILED, str(exc)[:ERROR_TEXT_CHARS])
    except (httpx.HTTPError, ValueError) as exc:  # transport errors, timeouts, a body that is not JSON
        detail = str(exc) or "no detail"
        request.fail(RequestStatus.FAILED, f"{type(exc).__name__}: {detail}"[:ERROR_TEXT_CHARS])
