"""Which prompt form a server takes, asked once when an endpoint run starts (``--endpoint-prompt auto``).

OpenAI's completions API takes a prompt as text or as token ids; vLLM and
``python -m engine serve`` take both, llama.cpp's server and ``transformers
serve`` refuse ids (422, or 500). Token ids are what the in-process engines
get, so they are tried first, then the text of the same ids, then a chat
message. Each try is a one-token, non-streamed completion before the warm-up,
outside every timed window. The first form answered 200 is the run's; if none
is, the run sends token ids and every request fails with the server's own
answer (a server that is down, a wrong model name or API key), and what each
try got is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx

from workloads.endpoint.spec import EndpointSpec, SentPrompt

PROBE_TEXT = "Hello"
ORDER: tuple[SentPrompt, ...] = ("tokens", "text", "chat")  # closest to the engines' input first
ANSWER_CHARS = 200  # of a refusal, in run.json


@dataclass(frozen=True)
class PromptChoice:
    """The form a run sends its prompts in, and why."""

    sent: SentPrompt
    how: str  # "given" (by the flags) or "probed"
    tried: tuple[tuple[SentPrompt, str], ...] = ()  # each form asked, with the answer: "ok" or the refusal

    def line(self) -> str:
        """In words, e.g. ``text (asked: tokens refused with HTTP 422: ...; text ok)``."""
        if self.how == "given":
            return f"{self.sent} (as given)"
        asked = "; ".join(f"{form} {answer}" for form, answer in self.tried)
        if all(answer != "ok" for _, answer in self.tried):
            return f"{self.sent} (no form was answered: {asked})"
        return f"{self.sent} (asked: {asked})"

    def describe(self) -> dict[str, Any]:
        return {"sent": self.sent, "how": self.how, "tried": dict(self.tried)}


def probe_body(spec: EndpointSpec, form: SentPrompt, tokenizer: Any) -> dict[str, Any]:
    body: dict[str, Any] = {**spec.extra_body, "model": spec.model, "max_tokens": 1, "temperature": 0.0}
    if form == "chat":
        body["messages"] = [{"role": "user", "content": PROBE_TEXT}]
    elif form == "text":
        body["prompt"] = PROBE_TEXT
    else:
        body["prompt"] = list(tokenizer(PROBE_TEXT, add_special_tokens=False).input_ids)
    return body


def choose_prompt(client: httpx.Client, spec: EndpointSpec, tokenizer: Any) -> PromptChoice:
    """The form ``spec`` fixes, or the first of ``ORDER`` the server answers (module docstring)."""
    if spec.fixed_prompt is not None:
        return PromptChoice(spec.fixed_prompt, "given")
    tried: list[tuple[SentPrompt, str]] = []
    for form in ORDER:
        try:
            response = client.post(spec.api_url(form), json=probe_body(spec, form, tokenizer), headers=spec.headers)
        except httpx.HTTPError as exc:
            tried.append((form, f"failed: {type(exc).__name__}: {exc}"[:ANSWER_CHARS]))
            if isinstance(exc, httpx.TransportError):
                break  # nothing answers there: the other forms would not be answered either
            continue
        if response.status_code == 200:
            tried.append((form, "ok"))
            return PromptChoice(form, "probed", tuple(tried))
        tried.append((form, f"refused: HTTP {response.status_code}: {response.text.strip()}"[:ANSWER_CHARS]))
    return PromptChoice("tokens", "probed", tuple(tried))
