"""Chat on the ``smol`` pair, which has a chat template (``tiny`` has none): the server's most common call.

A chat request without ``max_tokens`` or ``temperature`` gets the documented
defaults (docs/usage.md: temperature 1 as OpenAI's; max_tokens whatever the
context and the KV budget leave after the prompt; 16 for a completion).
System and multi-turn messages reach the engine as exactly the ids of
transformers' ``apply_chat_template`` for the same messages, and the greedy
answer is the verifier's own ``generate`` text. A template that raises on a
conversation gets one 400 with a JSON body, and the server serves the next
request as before.

The KV budget is 192 tokens, so the default chat request (which runs to the
room left, or to the end-of-sequence token) stays short on two cores.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest
from fastapi.testclient import TestClient

from engine.config import ControllerConfig
from engine.models.pair import load_model_pair
from engine.serve.protocol import DEFAULT_COMPLETION_MAX_TOKENS, DEFAULT_TEMPERATURE
from tests.support.greedy import hf_greedy
from tests.support.serve import served, wait_until

CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
KV_BUDGET = 192
# a fixed L: no step-cost profile to measure, and the drafts cover the speculative path
ENGINE_CONFIG = dict(max_cache_tokens=KV_BUDGET, controller=ControllerConfig(kind="fixed", draft_len=3))
CONVERSATION = [
    {"role": "system", "content": "You are a terse assistant."},
    {"role": "user", "content": "Name a prime number."},
    {"role": "assistant", "content": "Seven."},
    {"role": "user", "content": "Another one?"},
]
# Gemma's rule: no system role. The template raises through transformers' ``raise_exception``.
REFUSES_SYSTEM = "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}"


@pytest.fixture(scope="module")
def smol_pair(profiles_dir):
    return load_model_pair("smol", device="cpu")


def transformers_ids(tokenizer, messages: list[dict]) -> list[int]:
    """The reference rendering: transformers' own ``apply_chat_template``, tokenized by it, with the assistant's
    turn opened."""
    ids = tokenizer.apply_chat_template(messages, tokenize=True, add_generation_prompt=True, return_dict=False)
    return list(ids)


def test_a_chat_request_without_max_tokens_or_temperature_gets_the_documented_defaults(smol_pair):
    server = served(smol_pair, "baseline", **ENGINE_CONFIG)
    messages = [{"role": "user", "content": "Say hello."}]
    with TestClient(server.app) as client:
        answer = client.post(CHAT, json={"messages": messages})
        completion = client.post(COMPLETIONS, json={"prompt": "Once upon a time"})
    assert answer.status_code == 200, answer.text
    assert completion.status_code == 200, completion.text

    chat_request, completion_request = server.submitted
    prompt_ids = transformers_ids(smol_pair.tokenizer, messages)
    assert chat_request.prompt_token_ids == prompt_ids
    room = min(smol_pair.max_context, KV_BUDGET - 1) - len(prompt_ids)
    assert chat_request.params.max_new_tokens == room
    assert chat_request.params.temperature == DEFAULT_TEMPERATURE == 1.0
    assert completion_request.params.max_new_tokens == DEFAULT_COMPLETION_MAX_TOKENS == 16
    assert completion_request.params.temperature == DEFAULT_TEMPERATURE

    body = answer.json()
    choice, usage = body["choices"][0], body["usage"]
    # unseeded, as the common call is: any text may come, even an end token first (empty content)
    assert choice["message"]["role"] == "assistant" and isinstance(choice["message"]["content"], str)
    assert usage["prompt_tokens"] == len(prompt_ids)
    # it ran to its end-of-sequence token within the room, or used the room up exactly
    if choice["finish_reason"] == "length":
        assert usage["completion_tokens"] == room
    else:
        assert choice["finish_reason"] == "stop" and 1 <= usage["completion_tokens"] <= room
    assert completion.json()["usage"]["completion_tokens"] <= 16


@pytest.mark.parametrize("stream", [False, True])
def test_system_and_multi_turn_messages_go_through_the_template_as_transformers_renders_them(smol_pair, stream):
    server = served(smol_pair, "baseline", **ENGINE_CONFIG)
    # content as a string and as a list of text parts (OpenAI's two forms) render the same
    as_parts = [{**m, "content": [{"type": "text", "text": m["content"]}]} for m in CONVERSATION[:2]]
    body = {"max_tokens": 8, "temperature": 0, "stream": stream}
    with TestClient(server.app) as client:
        answers = [client.post(CHAT, json={**body, "messages": m}) for m in (CONVERSATION, as_parts)]
    assert [a.status_code for a in answers] == [200, 200], [a.text for a in answers]

    conversation_ids = transformers_ids(smol_pair.tokenizer, CONVERSATION)
    assert server.submitted[0].prompt_token_ids == conversation_ids
    assert server.submitted[1].prompt_token_ids == transformers_ids(smol_pair.tokenizer, CONVERSATION[:2])
    assert server.submitted[0].output_token_ids == hf_greedy(smol_pair.verifier.model, conversation_ids, 8, stop=True)


def test_a_chat_template_that_refuses_the_messages_gets_a_400_json_and_breaks_nothing(smol_pair):
    tokenizer = copy.deepcopy(smol_pair.tokenizer)
    tokenizer.chat_template = REFUSES_SYSTEM + smol_pair.tokenizer.chat_template
    pair = dataclasses.replace(smol_pair, tokenizer=tokenizer)
    server = served(pair, "baseline", **ENGINE_CONFIG)
    greedy = {"max_tokens": 6, "temperature": 0}
    with TestClient(server.app) as client:
        refused = client.post(CHAT, json={**greedy, "messages": CONVERSATION})
        refused_streamed = client.post(CHAT, json={**greedy, "messages": CONVERSATION, "stream": True})
        served_after = client.post(CHAT, json={**greedy, "messages": CONVERSATION[1:2]})
        assert wait_until(lambda: server.engine.stats().unfinished == 0 and server.engine.budget.used == 0)
        assert client.get("/health").status_code == 200

    for answer in (refused, refused_streamed):
        assert answer.status_code == 400 and answer.headers["content-type"] == "application/json"
        error = answer.json()["error"]
        assert error["param"] == "messages" and error["type"] == "invalid_request_error"
        assert "the chat template refused these messages" in error["message"]
        assert "System role not supported" in error["message"]
    assert served_after.status_code == 200, served_after.text
    (request,) = server.submitted  # the refused ones never reached the engine
    user_turn_ids = transformers_ids(tokenizer, CONVERSATION[1:2])
    assert request.prompt_token_ids == user_turn_ids
    assert request.output_token_ids == hf_greedy(smol_pair.verifier.model, user_turn_ids, 6, stop=True)
