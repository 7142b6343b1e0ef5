"""/metrics: vLLM's series names, and counters that add up to what the server answered."""

import json
import time

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from engine.config import ControllerConfig
from engine.draft_source import SourceKind
from engine.serve.metrics import BUSY_WINDOW_S, EngineCollector
from tests.support.serve import MODEL, served, wait_until

VLLM_SERIES = {
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:prompt_tokens_total",
    "vllm:generation_tokens_total",
    "vllm:request_success_total",
    "vllm:time_to_first_token_seconds_count",
    "vllm:inter_token_latency_seconds_count",
    "vllm:e2e_request_latency_seconds_count",
    "vllm:spec_decode_num_drafts_total",
    "vllm:spec_decode_num_draft_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_total",
    "vllm:spec_decode_num_accepted_tokens_per_pos_total",
}


def scrape(client: TestClient) -> dict[tuple[str, tuple], float]:
    """Every sample as (name, sorted labels) -> value."""
    response = client.get("/metrics")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/plain")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


def total(samples: dict, name: str, **labels) -> float:
    return sum(v for (n, ls), v in samples.items() if n == name and set(labels.items()) <= set(ls))


def test_every_series_is_exposed_under_vllms_and_pdverifys_names(tiny_pair):
    server = served(tiny_pair, "pdv")
    with TestClient(server.app) as client:
        samples = scrape(client)
    names = {name for name, _ in samples}
    assert VLLM_SERIES <= names
    assert {"pdverify:lane_queue_depth", "pdverify:lane_busy_fraction", "pdverify:draft_length"} <= names
    lanes = {dict(labels)["lane"] for name, labels in samples if name == "pdverify:lane_queue_depth"}
    assert lanes == {"prefill", "decode", "verify"}
    positions = {dict(ls)["position"] for n, ls in samples if n == "vllm:spec_decode_num_accepted_tokens_per_pos_total"}
    assert positions == {str(p) for p in range(8)}  # the controller's max draft length, zeros included
    assert all(dict(ls)["model_name"] == MODEL for n, ls in samples if n.startswith("vllm:"))


@pytest.mark.parametrize("engine", ["baseline", "pdv"])
def test_counters_add_up_to_what_was_served(tiny_pair, engine):
    # a fixed L: the cost controller, reading a profile timed on a busy machine, may leave L at 0 throughout
    server = served(tiny_pair, engine, controller=ControllerConfig(kind="fixed"))
    bodies = [
        ("/v1/completions", {"prompt": "count me", "max_tokens": 25, "temperature": 0}),
        ("/v1/completions", {"prompt": "and me", "max_tokens": 17, "stream": True}),
        ("/v1/chat/completions", {"messages": [{"role": "user", "content": "me too"}], "max_tokens": 30, "seed": 1}),
    ]
    usages = []
    with TestClient(server.app) as client:
        for path, body in bodies:
            if body.get("stream"):
                body["stream_options"] = {"include_usage": True}
                with client.stream("POST", path, json=body) as response:
                    usages.append(_final_usage(response.iter_lines()))
            else:
                usages.append(client.post(path, json=body).json()["usage"])
        samples = scrape(client)
        stats = server.engine.stats()
    requests = server.submitted
    assert total(samples, "vllm:prompt_tokens_total") == sum(u["prompt_tokens"] for u in usages)
    assert total(samples, "vllm:generation_tokens_total") == sum(u["completion_tokens"] for u in usages)
    assert total(samples, "vllm:generation_tokens_total") == stats.tokens_emitted
    assert total(samples, "vllm:request_success_total", finished_reason="length") == 3
    drafts = sum(1 for r in requests for s in r.steps if s.draft_len > 0)
    assert total(samples, "vllm:spec_decode_num_drafts_total") == drafts > 0
    assert total(samples, "vllm:spec_decode_num_draft_tokens_total") == stats.drafted > 0
    assert total(samples, "vllm:spec_decode_num_accepted_tokens_total") == stats.accepted
    assert total(samples, "vllm:spec_decode_num_accepted_tokens_per_pos_total") == stats.accepted
    first_pos = sum(1 for r in requests for s in r.steps if s.accepted >= 1)
    assert total(samples, "vllm:spec_decode_num_accepted_tokens_per_pos_total", position="0") == first_pos
    emissions = sum(len(set(r.token_times)) for r in requests)
    assert total(samples, "vllm:time_to_first_token_seconds_count") == 3
    assert total(samples, "vllm:e2e_request_latency_seconds_count") == 3
    assert total(samples, "vllm:inter_token_latency_seconds_count") == emissions - 3  # one gap per step, not per token
    assert total(samples, "vllm:num_requests_running") == total(samples, "vllm:num_requests_waiting") == 0
    assert total(samples, "vllm:kv_cache_usage_perc") == 0


def _final_usage(lines) -> dict:
    payloads = [line.removeprefix("data: ") for line in lines if line.startswith("data: {")]
    return json.loads(payloads[-1])["usage"]


def test_the_ar_engine_reports_no_speculation(tiny_pair):
    server = served(tiny_pair, "ar")
    with TestClient(server.app) as client:
        client.post("/v1/completions", json={"prompt": "plain", "max_tokens": 10})
        samples = scrape(client)
    assert total(samples, "vllm:generation_tokens_total") == 10
    assert total(samples, "vllm:spec_decode_num_drafts_total") == 0
    assert not any(n == "pdverify:draft_length" for n, _ in samples)
    assert not any(n == "vllm:spec_decode_num_accepted_tokens_per_pos_total" for n, _ in samples)


def test_lane_busy_fraction_covers_the_recent_window(tiny_pair):
    server = served(tiny_pair, "baseline")
    collector = EngineCollector(server.engine, MODEL)
    lane = "loop"
    now = time.perf_counter()
    collector._busy.clear()
    collector._busy.append((now - 10.0, {lane: 0.0}))
    assert BUSY_WINDOW_S == 5.0
    assert collector._busy_fractions(now - 4.0, {lane: 3.0})[lane] == pytest.approx(0.5)  # since start: 3 of 6 s
    assert collector._busy_fractions(now, {lane: 3.0})[lane] == pytest.approx(0.3)  # no snapshot 5 s old but start
    assert collector._busy_fractions(now + 2.0, {lane: 5.0})[lane] == pytest.approx(2 / 6)  # the newest >= 5 s old


def test_the_server_keeps_one_suffix_tree_across_requests(tiny_pair):
    # a fixed L, so that the second request drafts wherever the tree has a match, however the profile was timed
    server = served(tiny_pair, "baseline", drafter="suffix", controller=ControllerConfig(kind="fixed"))
    body = {"prompt": "say it again", "max_tokens": 16, "temperature": 0, "ignore_eos": True}
    tree = ("pdverify:suffix_tree_size", (("unit", "sequences"),))
    with TestClient(server.app) as client:
        first = client.post("/v1/completions", json=body).json()["choices"][0]["text"]
        # the engine teaches its tree as it retires a request, just after the answer went out
        assert wait_until(lambda: scrape(client)[tree] == 1)
        second = client.post("/v1/completions", json=body).json()["choices"][0]["text"]
        assert wait_until(lambda: scrape(client)[tree] == 2)
        held = scrape(client)[("pdverify:suffix_tree_size", (("unit", "tokens"),))]
    assert second == first and held == 32
    # the second request drafted from the first one's output, which only the global tree holds
    steps = server.submitted[1].steps
    assert any(s.source is not None and s.source.kind is SourceKind.GLOBAL and s.accepted for s in steps)
