"""The OpenAI-compatible routes over the tiny pair, in-process: outputs, streaming, stop strings."""

import pytest
from fastapi.testclient import TestClient

from engine.config import ControllerConfig
from engine.request import RequestStatus
from tests.support.serve import MODEL, in_process_greedy, served, sse_events, wait_until


@pytest.fixture
def pdv(tiny_pair):
    server = served(tiny_pair, "pdv")
    with TestClient(server.app) as client:
        yield server, client


def _greedy(max_tokens: int, **extra) -> dict:
    return {"model": MODEL, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True, **extra}


def test_models_lists_the_one_served_model_with_its_context(tiny_pair, pdv):
    _, client = pdv
    body = client.get("/v1/models").json()
    assert body["object"] == "list"
    assert [(m["id"], m["object"], m["max_model_len"]) for m in body["data"]] == [(MODEL, "model", 2048)]
    assert client.get("/health").status_code == 200


@pytest.mark.parametrize("engine", ["ar", "baseline", "pd", "pdv"])
def test_greedy_completion_is_token_for_token_the_in_process_engines(tiny_pair, engine):
    server = served(tiny_pair, engine)
    prompt = "The quick brown fox"
    with TestClient(server.app) as client:
        plain = client.post("/v1/completions", json=_greedy(40, prompt=prompt)).json()
        with client.stream("POST", "/v1/completions", json=_greedy(40, prompt=prompt, stream=True)) as response:
            events = sse_events(response.iter_lines())
    reference = in_process_greedy(tiny_pair, tiny_pair.encode_prompt(prompt, raw=True), 40)
    assert [r.output_token_ids for r in server.submitted] == [reference, reference]
    assert plain["choices"][0]["text"] == tiny_pair.decode(reference)
    assert plain["choices"][0]["finish_reason"] == "length"
    assert plain["usage"] == {"prompt_tokens": len(prompt), "completion_tokens": 40, "total_tokens": len(prompt) + 40}
    assert "".join(e["choices"][0]["text"] for e in events[:-1]) == tiny_pair.decode(reference)
    assert events[-1] == "[DONE]"


def test_a_chat_message_is_encoded_as_generate_encodes_it(tiny_pair, pdv):
    server, client = pdv
    body = _greedy(12, messages=[{"role": "user", "content": [{"type": "text", "text": "Hi there"}]}])
    answer = client.post("/v1/chat/completions", json=body).json()
    reference = in_process_greedy(tiny_pair, tiny_pair.encode_prompt("Hi there"), 12)
    assert server.submitted[0].prompt_token_ids == tiny_pair.encode_prompt("Hi there")
    assert answer["object"] == "chat.completion"
    assert answer["choices"][0]["message"] == {"role": "assistant", "content": tiny_pair.decode(reference)}
    assert answer["usage"]["completion_tokens"] == 12


def test_each_chunk_carries_the_tokens_of_one_engine_step_and_its_cumulative_usage(tiny_pair, pdv):
    server, client = pdv
    options = {"include_usage": True, "continuous_usage_stats": True}
    body = _greedy(60, prompt="speculate", stream=True, stream_options=options)
    with client.stream("POST", "/v1/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        events = sse_events(response.iter_lines())
    *chunks, usage_chunk, done = events
    request = server.submitted[0]
    # cumulative token counts at the end of each engine emission (tokens of one step share one time)
    times = request.token_times
    boundaries = {i + 1 for i in range(len(times)) if i + 1 == len(times) or times[i + 1] != times[i]}
    counts = [c["usage"]["completion_tokens"] for c in chunks]
    assert counts == sorted(counts) and set(counts) <= boundaries and counts[-1] == 60
    assert max(b - a for a, b in zip([0, *counts], counts, strict=False)) > 1  # a step emitted several tokens
    assert all(c["usage"]["prompt_tokens"] == len("speculate") for c in chunks)
    assert [c["choices"][0]["finish_reason"] for c in chunks] == [None] * (len(chunks) - 1) + ["length"]
    assert usage_chunk["choices"] == [] and usage_chunk["usage"]["completion_tokens"] == 60
    assert usage_chunk["usage"]["total_tokens"] == 60 + len("speculate")
    assert done == "[DONE]"


def test_a_chat_stream_opens_with_the_assistant_role_and_reports_usage_once(tiny_pair, pdv):
    _, client = pdv
    body = _greedy(10, messages=[{"role": "user", "content": "hi"}], stream=True)
    body["stream_options"] = {"include_usage": True}
    with client.stream("POST", "/v1/chat/completions", json=body) as response:
        *chunks, usage_chunk, done = sse_events(response.iter_lines())
    assert chunks[0]["object"] == "chat.completion.chunk"
    assert chunks[0]["choices"][0]["delta"] == {"role": "assistant", "content": ""}
    assert all(c["usage"] is None for c in chunks) and chunks[-1]["choices"][0]["finish_reason"] == "length"
    text = "".join(c["choices"][0]["delta"]["content"] for c in chunks)
    assert text == tiny_pair.decode(in_process_greedy(tiny_pair, tiny_pair.encode_prompt("hi"), 10))
    assert usage_chunk["usage"] == {"prompt_tokens": 2, "completion_tokens": 10, "total_tokens": 12}
    assert done == "[DONE]"


def _stop_inside(text: str) -> tuple[str, int]:
    """A two-character stop string first found well inside ``text``, and where."""
    for i in range(8, len(text) - 2):
        candidate = text[i : i + 2]
        if "\ufffd" not in candidate and text.find(candidate) == i:
            return candidate, i
    raise AssertionError(f"no usable stop string in {text!r}")


@pytest.mark.parametrize("stream", [False, True])
def test_a_stop_string_cuts_the_text_ends_with_stop_and_frees_the_request(tiny_pair, pdv, stream):
    server, client = pdv
    full = client.post("/v1/completions", json=_greedy(200, prompt="abc")).json()["choices"][0]["text"]
    stop, at = _stop_inside(full)
    body = _greedy(200, prompt="abc", stop=["never appears \u2603", stop], stream=stream)
    if stream:
        with client.stream("POST", "/v1/completions", json=body) as response:
            chunks = sse_events(response.iter_lines())[:-1]
        text = "".join(c["choices"][0]["text"] for c in chunks)
        finish = chunks[-1]["choices"][0]["finish_reason"]
    else:
        choice = client.post("/v1/completions", json=body).json()["choices"][0]
        text, finish = choice["text"], choice["finish_reason"]
    assert (text, finish) == (full[:at], "stop")
    cut = server.submitted[1]
    assert wait_until(lambda: server.engine.budget.used == 0)
    assert cut.status == RequestStatus.CANCELLED and cut.num_output_tokens < 200


def test_an_end_of_sequence_token_ends_with_stop_unless_eos_is_ignored(tiny_pair, pdv, monkeypatch):
    server, client = pdv
    prompt_ids = [1, 2, 3]
    reference = in_process_greedy(tiny_pair, prompt_ids, 30)
    at = next(i for i in range(5, 30) if reference.index(reference[i]) == i)
    monkeypatch.setattr(tiny_pair, "eos_token_ids", (reference[at],))  # the random verifier never says <eos>
    ended = client.post("/v1/completions", json={**_greedy(30, prompt=prompt_ids), "ignore_eos": False}).json()
    ignored = client.post("/v1/completions", json=_greedy(30, prompt=prompt_ids)).json()
    assert ended["choices"][0]["finish_reason"] == "stop" and ended["usage"]["completion_tokens"] == at + 1
    assert ended["choices"][0]["text"] == tiny_pair.decode(reference[: at + 1])
    assert ignored["choices"][0]["finish_reason"] == "length" and ignored["usage"]["completion_tokens"] == 30
    assert server.submitted[0].params.stop_token_ids is None and server.submitted[1].params.stop_token_ids == ()


def test_sampling_fields_reach_the_engine(tiny_pair, pdv):
    server, client = pdv
    body = {"prompt": "x", "max_completion_tokens": 5, "max_tokens": 9, "temperature": 0.7, "top_p": 0.9}
    assert client.post("/v1/completions", json={**body, "top_k": 20, "seed": 3}).status_code == 200
    assert client.post("/v1/completions", json={**body, "top_k": -1}).status_code == 200
    first, second = (r.params for r in server.submitted)
    assert (first.max_new_tokens, first.temperature, first.top_p, first.top_k, first.seed) == (5, 0.7, 0.9, 20, 3)
    assert second.top_k is None and second.seed is None


def test_a_seeded_sampled_completion_repeats(tiny_pair):
    # the draft model at a fixed L proposes from the request alone, every step; the suffix drafter's tree learns from
    # earlier outputs, so a repeat there drafts differently: same distribution, not same tokens (failure-behaviour.md)
    server = served(tiny_pair, "pdv", drafter="model", controller=ControllerConfig(kind="fixed", draft_len=4))
    body = {"prompt": "seeded", "max_tokens": 20, "temperature": 1.0, "seed": 11}
    with TestClient(server.app) as client:
        texts = [client.post("/v1/completions", json=body).json()["choices"][0]["text"] for _ in range(2)]
    assert texts[0] == texts[1]
    assert any(step.draft_len for step in server.submitted[1].steps)  # the repeat drafted: the seed held through it
