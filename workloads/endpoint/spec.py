"""Which OpenAI-compatible server a replay drives, as the CLI's ``--endpoint`` flags give it.

An endpoint takes the place of an engine in a sweep: its runs carry its
``label`` where an engine's carry ``ar``/``pdv``, so the two sit side by side in
every run file and chart. The URL is the server's base (``http://host:8000``
or ``http://host:8000/v1``, as the ``openai`` client takes it); the API path
and ``/metrics`` are derived from it.

How a prompt is sent (``prompt``): the trace's token ids, exactly what an
in-process engine gets (``tokens``, as vLLM and ``python -m engine serve``
take them); the text of those ids (``text``, for servers whose completions
take strings only, as llama.cpp's does); or the user's message to
``/v1/chat/completions`` (``chat``, the server applies its own template).
``auto`` asks the server once when the run starts (``workloads.endpoint.probe``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Literal
from urllib.parse import urlsplit

from engine.config import ENGINES

EndpointType = Literal["completions", "chat"]
ENDPOINT_TYPES: tuple[EndpointType, ...] = ("completions", "chat")
SentPrompt = Literal["tokens", "text", "chat"]
PromptForm = Literal["auto", "tokens", "text", "chat"]
PROMPT_FORMS: tuple[PromptForm, ...] = ("auto", "tokens", "text", "chat")
DEFAULT_LABEL = "endpoint"
# what the replay puts in a body itself (``workloads.endpoint.stream.request_body``)
BODY_FIELDS = frozenset({
    "model", "prompt", "messages", "max_tokens", "stream", "stream_options", "temperature", "top_p", "top_k", "seed",
    "ignore_eos", "min_tokens",
})  # fmt: skip
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # it goes into run ids and file-safe names


@dataclass(frozen=True)
class EndpointSpec:
    url: str  # base URL, with or without a trailing /v1
    model: str  # the server's model name (``/v1/models``)
    label: str = DEFAULT_LABEL  # the "engine" column of its runs
    api_key: str | None = None  # sent as ``Authorization: Bearer``; never written to run files
    endpoint_type: EndpointType = "completions"
    prompt: PromptForm = "auto"  # auto: token ids where the server takes them, else text, else chat
    # fields added to every request body, for a server's own sampling options (llama.cpp's repeat_penalty)
    extra_body: dict[str, Any] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"endpoint URL must be http(s)://host[:port][/v1], got {self.url!r}")
        try:
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError:
            raise ValueError(f"endpoint URL has a bad port: {self.url!r}") from None
        if not self.model:
            raise ValueError("an endpoint needs the model name the server serves (--model)")
        if not LABEL.fullmatch(self.label):
            raise ValueError(f"endpoint label must be letters, digits, '.', '_' or '-', got {self.label!r}")
        if self.label in ENGINES:
            raise ValueError(f"endpoint label {self.label!r} is an engine's name; choose another (--label)")
        if self.endpoint_type not in ENDPOINT_TYPES:
            raise ValueError(f"endpoint type must be one of {', '.join(ENDPOINT_TYPES)}, got {self.endpoint_type!r}")
        if self.prompt not in PROMPT_FORMS:
            raise ValueError(f"endpoint prompt must be one of {', '.join(PROMPT_FORMS)}, got {self.prompt!r}")
        if self.endpoint_type == "chat" and self.prompt in ("tokens", "text"):
            raise ValueError(f"the chat API sends messages, not {self.prompt}: use --endpoint-type completions")
        clash = sorted(set(self.extra_body) & BODY_FIELDS)
        if clash:
            raise ValueError(f"extra body fields {', '.join(clash)} are set by the replay itself")

    @property
    def root(self) -> str:
        """The server's root, without ``/v1``."""
        return self.url.rstrip("/").removesuffix("/v1")

    @property
    def fixed_prompt(self) -> SentPrompt | None:
        """The form every request is sent in, when the flags fix it; ``None``: ask the server (``auto``)."""
        if self.endpoint_type == "chat" or self.prompt == "chat":
            return "chat"
        return None if self.prompt == "auto" else self.prompt

    def api_url(self, sent: SentPrompt) -> str:
        path = "chat/completions" if sent == "chat" else "completions"
        return f"{self.root}/v1/{path}"

    @property
    def metrics_url(self) -> str:
        return f"{self.root}/metrics"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def describe(self) -> dict[str, Any]:
        """For run.json: everything but the API key."""
        return {
            "url": self.url,
            "model": self.model,
            "label": self.label,
            "endpoint_type": self.endpoint_type,
            "prompt": self.prompt,
            **({"extra_body": self.extra_body} if self.extra_body else {}),
        }
