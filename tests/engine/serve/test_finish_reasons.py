"""Every way a text can end, plain and streamed, through AR (a token per chunk) and PDV (a step's tokens per chunk):
the two answers agree on text, finish reason and usage, and the text is the greedy text cut where it should be."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from engine.config import ControllerConfig
from engine.serve.text import REPLACEMENT
from tests.support.serve import MODEL, in_process_greedy, served, sse_events, wait_until

MAX_TOKENS = 40
PROMPT = [7, 3, 11, 2]
# a fixed L: the cost controller picks L from this machine's timing, and then the chunks (hence where a stop string
# falls) would differ from the probe's
FIXED = ControllerConfig(kind="fixed", draft_len=4)
ENDINGS = ["length", "stop string in one chunk", "stop string split across chunks", "stop string absent", "end token"]


def _body(**extra) -> dict:
    return {"model": MODEL, "prompt": PROMPT, "max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True, **extra}


def _plain(client: TestClient, body: dict) -> tuple[str, str, dict]:
    answer = client.post("/v1/completions", json=body).json()
    choice = answer["choices"][0]
    return choice["text"], choice["finish_reason"], answer["usage"]


def _streamed(client: TestClient, body: dict) -> tuple[str, str, dict, list[str]]:
    options = {"stream": True, "stream_options": {"include_usage": True}}
    with client.stream("POST", "/v1/completions", json={**body, **options}) as response:
        events = sse_events(response.iter_lines())
    assert events[-1] == "[DONE]"
    chunks = [e for e in events[:-1] if e["choices"]]
    (usage,) = [e["usage"] for e in events[:-1] if not e["choices"]]
    pieces = [c["choices"][0]["text"] for c in chunks]
    finishes = [c["choices"][0]["finish_reason"] for c in chunks]
    assert all(f is None for f in finishes[:-1])  # only the last chunk carries the finish reason
    return "".join(pieces), finishes[-1], usage, pieces


def _one_chunk_stop(pieces: list[str], text: str) -> str:
    """A one-character stop string: it always arrives within one chunk."""
    return next(ch for ch in text[3:] if ch.isascii() and ch.isprintable() and ch != " ")


def _split_stop(pieces: list[str], text: str) -> str:
    """Two characters from either side of a chunk boundary, first found there in the text. Any characters but the
    replacement character (the random verifier's bytes are rarely printable ASCII on both sides of a boundary)."""
    at = 0
    for left, right in zip(pieces, pieces[1:], strict=False):
        at += len(left)
        if left and right:
            stop = left[-1] + right[0]
            if REPLACEMENT not in stop and text.find(stop) == at - 1:
                return stop
    raise AssertionError(f"no chunk boundary to split a stop string across in {pieces!r}")


@pytest.mark.parametrize("ending", ENDINGS)
@pytest.mark.parametrize("engine", ["ar", "pdv"])
def test_plain_and_streamed_answers_agree_on_every_ending(tiny_pair, monkeypatch, engine, ending):
    reference = in_process_greedy(tiny_pair, PROMPT, MAX_TOKENS)
    full = tiny_pair.decode(reference)
    server = served(tiny_pair, engine, controller=FIXED)
    with TestClient(server.app) as client:
        _streamed(client, _body())  # the suffix drafter learns this output: the requests below draft it alike
        _, _, _, pieces = _streamed(client, _body())  # where this engine's chunks fall for this prompt
        body, expected_text, expected_reason, expected_tokens = _body(), full, "length", MAX_TOKENS
        if ending == "stop string in one chunk" or ending == "stop string split across chunks":
            stop = (_one_chunk_stop if ending == "stop string in one chunk" else _split_stop)(pieces, full)
            body = _body(stop=["never appears \u2603", stop])
            expected_text, expected_reason = full[: full.index(stop)], "stop"
            # the count ends at the token that completed the stop string, however many tokens a step emitted
            expected_tokens = next(k for k in range(1, MAX_TOKENS + 1) if stop in tiny_pair.decode(reference[:k]))
        elif ending == "stop string absent":
            body = _body(stop="never appears \u2603")
        elif ending == "end token":
            at = next(i for i in range(5, MAX_TOKENS) if reference.index(reference[i]) == i)
            monkeypatch.setattr(tiny_pair, "eos_token_ids", (reference[at],))  # the random verifier never says it
            body = _body(ignore_eos=False)
            expected_text, expected_reason = tiny_pair.decode(reference[: at + 1]), "stop"
            expected_tokens = at + 1
        plain = _plain(client, body)
        streamed = _streamed(client, body)[:3]
        assert wait_until(lambda: server.engine.stats().unfinished == 0 and server.engine.budget.used == 0)
    assert plain == streamed  # text, finish reason and usage
    text, reason, usage = plain
    assert (text, reason) == (expected_text, expected_reason)
    assert usage["prompt_tokens"] == len(PROMPT)
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    assert usage["completion_tokens"] == expected_tokens
