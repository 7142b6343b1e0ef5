"""Which OpenAI-compatible server a replay drives, as the CLI's ``--endpoint`` flags give it.

An endpoint takes the place of an engine in a sweep: its runs carry its
``label`` where an engine's carry ``ar``/``pdv``, so the two sit side by side in
every run file and chart. The URL is the server's base (``http://host:8000``
or ``http://host:8000/v1``, as the ``openai`` client takes it); the API path
and ``/metrics`` are derived from it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from engine.config import ENGINES

EndpointType = Literal["completions", "chat"]
ENDPOINT_TYPES: tuple[EndpointType, ...] = ("completions", "chat")
DEFAULT_LABEL = "endpoint"
LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")  # it goes into run ids and file-safe names


@dataclass(frozen=True)
class EndpointSpec:
    url: str  # base URL, with or without a trailing /v1
    model: str  # the server's model name (``/v1/models``)
    label: str = DEFAULT_LABEL  # the "engine" column of its runs
    api_key: str | None = None  # sent as ``Authorization: Bearer``; never written to run files
    endpoint_type: EndpointType = "completions"

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

    @property
    def root(self) -> str:
        """The server's root, without ``/v1``."""
        return self.url.rstrip("/").removesuffix("/v1")

    @property
    def api_url(self) -> str:
        path = "chat/completions" if self.endpoint_type == "chat" else "completions"
        return f"{self.root}/v1/{path}"

    @property
    def metrics_url(self) -> str:
        return f"{self.root}/metrics"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}

    def describe(self) -> dict[str, Any]:
        """For run.json: everything but the API key."""
        return {"url": self.url, "model": self.model, "label": self.label, "endpoint_type": self.endpoint_type}
