"""Values a hostile client sends beside valid requests: each gets its own answer (a 400 naming the field, or its
documented meaning), and the valid requests sent at the same time get exactly their greedy text."""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from tests.support.serve import in_process_greedy, served, uvicorn_thread, wait_until

COMPLETIONS = "/v1/completions"
CHAT = "/v1/chat/completions"
MAX_TOKENS = 10
CONTENT = "messages.0.content"

# (what, path, body, status, the error's param or None, whether the text must be the prompt's greedy text)
HOSTILE = [
    ("seed past 64 bits", COMPLETIONS, {"prompt": "one two", "seed": 2**70, "temperature": 1}, 400, "seed", False),
    ("negative seed", COMPLETIONS, {"prompt": "one two", "seed": -1, "temperature": 1}, 400, "seed", False),
    ("top_k past int64: off", COMPLETIONS, {"prompt": "one two", "top_k": 2**63, "temperature": 1}, 200, None, False),
    ("top_p 0 in float32", COMPLETIONS, {"prompt": "one two", "top_p": 1e-320, "temperature": 1}, 200, None, True),
    ("temperature past float32", COMPLETIONS, {"prompt": "one two", "temperature": 1e39}, 400, "temperature", False),
    ("lone surrogate prompt", COMPLETIONS, {"prompt": "a\ud800b"}, 400, "prompt", False),
    ("lone surrogate in a list", COMPLETIONS, {"prompt": ["\udfff"]}, 400, "prompt", False),
    # token ids are integers, as the schema says: pydantic's lax parsing would read these as 1
    ("token id true", COMPLETIONS, {"prompt": [True]}, 400, "prompt.str", False),
    ("token id 1.0", COMPLETIONS, {"prompt": [5, 1.0]}, 400, "prompt.str", False),
    ("lone surrogate chat", CHAT, {"messages": [{"role": "user", "content": "\ud83d"}]}, 400, CONTENT, False),
]


async def _send_all(url: str, bodies: list[tuple[str, dict]]) -> list[httpx.Response]:
    async with httpx.AsyncClient(base_url=url, timeout=120) as http:
        # json.dumps escapes lone surrogates (\ud800), as a hostile client's JSON would carry them
        sends = [
            http.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
            for path, body in bodies
        ]
        return await asyncio.gather(*sends)


@pytest.mark.parametrize("engine", ["baseline", "pdv"])
def test_each_hostile_value_gets_its_answer_and_its_batchmates_their_greedy_text(tiny_pair, engine):
    prompts = [f"{i} apples and" for i in range(6)]
    greedy = {"max_tokens": MAX_TOKENS, "temperature": 0, "ignore_eos": True}
    valid = [(COMPLETIONS, {"prompt": p, **greedy}) for p in prompts]
    hostile = [(path, {"max_tokens": MAX_TOKENS, "ignore_eos": True, **body}) for _, path, body, *_ in HOSTILE]
    # interleaved and all at once, so the engine batches them together as far as arrivals allow
    order = [x for pair in zip(valid, hostile, strict=False) for x in pair]
    order += valid[len(hostile) :] + hostile[len(valid) :]
    server = served(tiny_pair, engine)
    with uvicorn_thread(server.app) as url:
        answers = asyncio.run(_send_all(url, order))
        assert wait_until(lambda: server.engine.stats().unfinished == 0 and server.engine.budget.used == 0)
        health = httpx.get(f"{url}/health")
        again = httpx.post(f"{url}{COMPLETIONS}", json=valid[0][1], timeout=60)
    by_body = {id(body): answer for (_, body), answer in zip(order, answers, strict=True)}

    tokenizer = tiny_pair.tokenizer
    for (_, body), prompt in zip(valid, prompts, strict=True):
        answer = by_body[id(body)]
        assert answer.status_code == 200, answer.text
        greedy = in_process_greedy(tiny_pair, list(tokenizer(prompt).input_ids), MAX_TOKENS)
        assert answer.json()["choices"][0]["text"] == tiny_pair.decode(greedy)
    for (what, _, sent, status, param, greedy_text), (_, body) in zip(HOSTILE, hostile, strict=True):
        answer = by_body[id(body)]
        assert answer.status_code == status, (what, answer.text)
        if status == 400:
            error = answer.json()["error"]
            assert error["param"] == param and error["type"] == "invalid_request_error", (what, error)
        elif greedy_text:
            greedy = in_process_greedy(tiny_pair, list(tokenizer(sent["prompt"]).input_ids), MAX_TOKENS)
            assert answer.json()["choices"][0]["text"] == tiny_pair.decode(greedy), what
    assert health.status_code == 200 and again.status_code == 200
    assert again.json()["choices"][0]["text"] == by_body[id(valid[0][1])].json()["choices"][0]["text"]
    stats = server.engine.stats()
    assert stats.accounting_problem() is None and stats.outcomes.failed == 0 and server.engine.fatal_error is None
