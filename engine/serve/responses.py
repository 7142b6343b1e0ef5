"""The bodies sent back: completions, chat completions, their stream chunks, usage and the model list.

Shapes are OpenAI's (the fields its Python client reads), with ``logprobs``
always null since this server returns none.
"""

from __future__ import annotations

import time
from typing import Literal

from pydantic import BaseModel, Field


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int

    @classmethod
    def of(cls, prompt_tokens: int, completion_tokens: int) -> Usage:
        return cls(
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_tokens=prompt_tokens + completion_tokens,
        )


def _now() -> int:
    return int(time.time())


class Choice(BaseModel):
    index: int = 0  # always 0: one choice per request
    logprobs: None = None
    finish_reason: str | None = None  # "stop" or "length" once the output has ended


class CompletionChoice(Choice):
    text: str


class Answer(BaseModel):
    """What every completion body and chunk starts with."""

    id: str
    created: int = Field(default_factory=_now)
    model: str


class CompletionResponse(Answer):  # also each chunk of a streamed completion
    object: Literal["text_completion"] = "text_completion"
    choices: list[CompletionChoice]
    usage: Usage | None = None


class ChatMessageOut(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str


class ChatChoice(Choice):
    message: ChatMessageOut


class ChatCompletionResponse(Answer):
    object: Literal["chat.completion"] = "chat.completion"
    choices: list[ChatChoice]
    usage: Usage


class ChatDelta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None


class ChatChunkChoice(Choice):
    delta: ChatDelta


class ChatCompletionChunk(Answer):
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    choices: list[ChatChunkChoice]
    usage: Usage | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int = Field(default_factory=_now)
    owned_by: str = "pdverify"
    max_model_len: int  # vLLM's extension: prompt + output tokens the verifier can attend to


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]
