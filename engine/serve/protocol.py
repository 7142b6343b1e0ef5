"""The request bodies of ``/v1/completions`` and ``/v1/chat/completions``, and their checks.

Fields follow OpenAI's API with vLLM's extensions (``top_k``, ``ignore_eos``,
``stream_options.continuous_usage_stats``). Unknown fields are ignored, as
vLLM does; known features this server does not have (several choices,
logprobs, tools, penalties, ...) are refused with a 400 naming the field
instead of being silently dropped. Value checks (temperature, top_p,
max_tokens, seed) are ``SamplingParams``' own, so their messages are the
engine's.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from engine.config import FLOAT32_MAX, MAX_SEED, SamplingParams
from engine.serve.errors import APIError

# OpenAI's defaults where a request leaves a field out
DEFAULT_TEMPERATURE = 1.0
DEFAULT_COMPLETION_MAX_TOKENS = 16  # OpenAI's (and vLLM's) for /v1/completions; chat defaults to the room left

# field -> the values that ask for nothing this server lacks; any other value is refused
NEUTRAL: dict[str, tuple[Any, ...]] = {
    "n": (None, 1),
    "best_of": (None, 1),
    "logprobs": (None, False),
    "top_logprobs": (None, 0),
    "echo": (None, False),
    "suffix": (None, ""),
    "logit_bias": (None, {}),
    "presence_penalty": (None, 0),
    "frequency_penalty": (None, 0),
    "repetition_penalty": (None, 1),
    "tools": (None, []),
    "functions": (None, []),
    "tool_choice": (None, "none"),
    "function_call": (None, "none"),
    "response_format": (None, {"type": "text"}),
}
WHY_NOT = {
    "n": "one choice per request; send n requests instead",
    "best_of": "one choice per request",
    "logprobs": "log probabilities are not returned",
    "top_logprobs": "log probabilities are not returned",
    "tools": "tool and function calling are not supported",
    "functions": "tool and function calling are not supported",
    "tool_choice": "tool and function calling are not supported",
    "function_call": "tool and function calling are not supported",
}


def documented(**bounds: float) -> Any:
    """A number whose accepted range is stated in the OpenAPI schema only; ``SamplingParams`` checks it, with
    the engine's messages, so that the schema (and a tool testing against it) says what the server accepts.
    Strict: ``true`` / ``false`` or a string is refused, not read as 1 / 0."""
    return Field(default=None, strict=True, json_schema_extra=bounds)  # strict: a boolean is no number


class StreamOptions(BaseModel):
    include_usage: bool = False  # one last chunk with the request's usage
    continuous_usage_stats: bool = False  # usage (cumulative completion tokens) on every chunk; needs include_usage


class GenerationRequest(BaseModel):
    """Fields both endpoints share."""

    model_config = ConfigDict(extra="ignore")

    model: str | None = None  # None: the one served model
    max_tokens: int | None = documented(minimum=1)
    max_completion_tokens: int | None = documented(minimum=1)  # OpenAI's newer name; wins over max_tokens
    temperature: float | None = documented(minimum=0, maximum=FLOAT32_MAX)
    top_p: float | None = documented(exclusiveMinimum=0, maximum=1)
    top_k: int | None = documented(minimum=-1)  # vLLM: 0 or -1 = off
    seed: int | None = documented(minimum=0, maximum=MAX_SEED)
    stop: str | list[str] | None = None
    ignore_eos: bool = False
    stream: bool = False
    stream_options: StreamOptions | None = None
    # refused unless neutral (NEUTRAL)
    n: Any = None
    best_of: Any = None
    logprobs: Any = None
    top_logprobs: Any = None
    echo: Any = None
    suffix: Any = None
    logit_bias: Any = None
    presence_penalty: Any = None
    frequency_penalty: Any = None
    repetition_penalty: Any = None
    tools: Any = None
    functions: Any = None
    tool_choice: Any = None
    function_call: Any = None
    response_format: Any = None

    def check_supported(self) -> None:
        """Raise a 400 for the first field that asks for something this server does not do."""
        for name, neutral in NEUTRAL.items():
            value = getattr(self, name)
            if value not in neutral:
                why = WHY_NOT.get(name, "not supported by this server")
                raise APIError(400, f"{name}={value!r} is not supported: {why}", param=name)
        if self.stream_options is not None and not self.stream:
            raise APIError(400, "stream_options can only be set when stream is true", param="stream_options")
        for text in self.stop_strings:
            if not text:
                raise APIError(400, "stop strings must not be empty", param="stop")

    @property
    def stop_strings(self) -> tuple[str, ...]:
        if self.stop is None:
            return ()
        return (self.stop,) if isinstance(self.stop, str) else tuple(self.stop)

    @property
    def include_usage(self) -> bool:
        return self.stream_options is not None and self.stream_options.include_usage

    @property
    def continuous_usage(self) -> bool:
        return self.include_usage and self.stream_options.continuous_usage_stats

    def sampling_params(self, default_max_tokens: int) -> SamplingParams:
        """The engine's parameters for this request; a value ``SamplingParams`` refuses is a 400."""
        max_tokens = next((m for m in (self.max_completion_tokens, self.max_tokens) if m is not None), None)
        typed = "max_completion_tokens" if self.max_completion_tokens is not None else "max_tokens"
        top_k = None if self.top_k in (None, 0, -1) else self.top_k
        try:
            return SamplingParams(
                temperature=DEFAULT_TEMPERATURE if self.temperature is None else self.temperature,
                top_p=1.0 if self.top_p is None else self.top_p,
                top_k=top_k,
                max_new_tokens=default_max_tokens if max_tokens is None else max_tokens,
                seed=self.seed,
                stop_token_ids=() if self.ignore_eos else None,
            )
        except ValueError as exc:
            field, _, rest = str(exc).partition(" ")
            if field == "max_new_tokens":  # the engine's name: the client sent max_tokens or max_completion_tokens
                field = typed
            raise APIError(400, f"{field} {rest}", param=field) from exc


class CompletionRequest(GenerationRequest):
    # text, one text in a list, or token ids (strict, as the schema's integers: true or 1.0 is no token id)
    prompt: str | list[str] | list[StrictInt]


class TextPart(BaseModel):
    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="ignore")

    role: Literal["system", "developer", "user", "assistant"]
    content: str | list[TextPart] | None = None

    @property
    def text(self) -> str:
        if self.content is None:
            return ""
        return self.content if isinstance(self.content, str) else "".join(p.text for p in self.content)


class ChatCompletionRequest(GenerationRequest):
    messages: list[ChatMessage]
