"""The server's refusals and failures: OpenAI-style error bodies, the API key, a crashed engine, lost clients."""

import time

import httpx
import pytest
from fastapi.testclient import TestClient

from engine.request import RequestStatus
from tests.support.serve import MODEL, served, uvicorn_thread, wait_until

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def client(tiny_pair):
    with TestClient(served(tiny_pair, "baseline", max_cache_tokens=1024).app) as client:
        yield client


def _error(response: httpx.Response, status: int) -> dict:
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]
    return error


@pytest.mark.parametrize(
    ("path", "body", "param", "says"),
    [
        (COMPLETIONS, {"prompt": "x", "n": 2}, "n", "n=2 is not supported"),
        (CHAT, {"messages": HI, "n": 3}, "n", "one choice per request"),
        (COMPLETIONS, {"prompt": "x", "logprobs": 2}, "logprobs", "log probabilities"),
        (CHAT, {"messages": HI, "logprobs": True}, "logprobs", "log probabilities"),
        (CHAT, {"messages": HI, "tools": [{"type": "function", "function": {"name": "f"}}]}, "tools", "tool"),
        (CHAT, {"messages": HI, "functions": [{"name": "f"}]}, "functions", "function calling"),
        (COMPLETIONS, {"prompt": "x", "echo": True}, "echo", "not supported"),
        (COMPLETIONS, {"prompt": "x", "presence_penalty": 0.5}, "presence_penalty", "not supported"),
        (COMPLETIONS, {"prompt": ["a", "b"]}, "prompt", "one prompt per request"),
        (COMPLETIONS, {"prompt": ""}, None, "empty prompt"),
        (COMPLETIONS, {"prompt": "", "stream": True}, None, "empty prompt"),  # refused before the stream starts
        (CHAT, {"messages": []}, "messages", "must not be empty"),
        (COMPLETIONS, {"prompt": "x" * 3000}, None, "exceeds the model context of 2048 tokens"),
        (CHAT, {"messages": [{"role": "user", "content": "x" * 3000}]}, None, "exceeds the model context"),
        (COMPLETIONS, {"prompt": "x", "max_tokens": 1500}, None, "more than the whole budget"),
        (COMPLETIONS, {"prompt": "x", "max_tokens": 0}, "max_tokens", "max_tokens must be >= 1"),
        (CHAT, {"messages": HI, "max_completion_tokens": -1}, "max_completion_tokens", "max_completion_tokens must be"),
        (COMPLETIONS, {"prompt": "x", "temperature": -0.5}, "temperature", "temperature must be"),
        (COMPLETIONS, {"prompt": "x", "top_p": 0}, "top_p", "top_p must be in (0, 1]"),
        (COMPLETIONS, {"prompt": "x", "top_p": 1.5}, "top_p", "top_p must be in (0, 1]"),
        (COMPLETIONS, {"prompt": "x", "seed": -2}, "seed", "seed must be >= 0"),
        (COMPLETIONS, {"prompt": "x", "stop": [""]}, "stop", "must not be empty"),
        (COMPLETIONS, {"prompt": "x", "stream_options": {"include_usage": True}}, "stream_options", "stream is true"),
        (COMPLETIONS, {"prompt": [1, -4]}, "prompt", "prompt token ids must be non-negative"),
        (COMPLETIONS, {"prompt": "x", "max_tokens": "many"}, "max_tokens", "valid integer"),
        (COMPLETIONS, {"max_tokens": 3}, "prompt", "Field required"),
        (CHAT, {"messages": [{"role": "tool", "content": "x"}]}, "messages.0.role", "Input should be"),
    ],
)
def test_a_request_the_server_cannot_serve_is_a_400_naming_the_field(client, path, body, param, says):
    error = _error(client.post(path, json={"model": MODEL, **body}), 400)
    assert error["type"] == "invalid_request_error" and error["param"] == param
    assert says in error["message"]
    assert "max_new_tokens" not in error["message"]  # the engine's name, which no client sends
    assert "cmpl-" not in error["message"]  # nor the request's internal id


def test_malformed_json_is_a_400_in_the_same_shape(client):
    error = _error(client.post(COMPLETIONS, content=b"{not json", headers={"content-type": "application/json"}), 400)
    assert "not valid JSON" in error["message"]


def test_an_unknown_model_or_path_is_a_404(client):
    error = _error(client.post(COMPLETIONS, json={"model": "gpt-9", "prompt": "x"}), 404)
    assert error["code"] == "model_not_found" and "'gpt-9' does not exist" in error["message"]
    assert _error(client.get("/v1/nothing"), 404)["message"] == "Not Found"


def test_with_an_api_key_only_health_and_metrics_are_open(tiny_pair):
    with TestClient(served(tiny_pair, "ar", api_key="sesame").app) as client:
        good = {"Authorization": "Bearer sesame"}
        assert _error(client.get("/v1/models"), 401)["code"] == "invalid_api_key"
        assert _error(client.get("/v1/models", headers={"Authorization": "Bearer wrong"}), 401)
        assert _error(client.post(COMPLETIONS, content=b"{not json"), 401)  # the key is checked first
        assert client.get("/v1/models", headers=good).status_code == 200
        answer = client.post(COMPLETIONS, json={"prompt": "x", "max_tokens": 2}, headers=good)
        assert answer.status_code == 200 and answer.json()["usage"]["completion_tokens"] == 2
        assert client.get("/health").status_code == 200 and client.get("/metrics").status_code == 200


def test_a_crashed_engine_makes_health_and_new_requests_503(tiny_pair, monkeypatch):
    server = served(tiny_pair, "baseline")
    with TestClient(server.app) as client:
        assert client.get("/health").status_code == 200

        def crash(running):
            raise RuntimeError("simulated scheduler bug")

        monkeypatch.setattr(server.engine, "_admit", crash)  # the next loop iteration kills the lane
        in_flight = client.post(COMPLETIONS, json={"prompt": "x", "max_tokens": 5})
        assert wait_until(lambda: server.engine.fatal_error is not None)
        health = _error(client.get("/health"), 503)
        late = _error(client.post(CHAT, json={"messages": HI}), 503)
    assert in_flight.status_code in (200, 503)  # it may have been answered before the crash
    assert "simulated scheduler bug" in health["message"] and health["type"] == "server_error"
    assert late["code"] == "engine_unavailable"


def test_a_request_failed_mid_stream_ends_with_an_error_event(tiny_pair, monkeypatch):
    server = served(tiny_pair, "baseline")
    with TestClient(server.app) as client:

        def broken_step(seqs, verify_queue=0):
            raise RuntimeError("simulated device error")

        monkeypatch.setattr(server.engine, "_step", broken_step)
        with client.stream("POST", COMPLETIONS, json={"prompt": "x", "max_tokens": 5, "stream": True}) as response:
            lines = [line for line in response.iter_lines() if line]
        plain = _error(client.post(COMPLETIONS, json={"prompt": "x", "max_tokens": 5}), 500)
    assert response.status_code == 200 and lines[-1] == "data: [DONE]"
    assert '"error"' in lines[-2] and "simulated device error" in lines[-2]
    assert "simulated device error" in plain["message"] and plain["type"] == "server_error"


def _slow_steps(server, monkeypatch, seconds: float = 0.01) -> None:
    step = server.engine._step

    def slow(seqs, verify_queue=0):
        time.sleep(seconds)
        return step(seqs, verify_queue)

    monkeypatch.setattr(server.engine, "_step", slow)


@pytest.mark.parametrize("engine", ["baseline", "pdv"])
def test_a_client_that_disconnects_mid_stream_cancels_its_request(tiny_pair, monkeypatch, engine):
    server = served(tiny_pair, engine)
    _slow_steps(server, monkeypatch)
    body = {"prompt": "long", "max_tokens": 1500, "ignore_eos": True, "stream": True}
    with uvicorn_thread(server.app) as url, httpx.Client(base_url=url, timeout=30) as http:
        with http.stream("POST", COMPLETIONS, json=body) as response:
            first = next(line for line in response.iter_lines() if line.startswith("data: "))
        # leaving the block closed the connection after one chunk
        assert wait_until(lambda: server.engine.budget.used == 0), f"{server.engine.budget.used} KV tokens held"
        (request,) = server.submitted
        assert request.status == RequestStatus.CANCELLED and request.error == "the client went away"
        assert 0 < request.num_output_tokens < 1500 and '"text"' in first
        assert http.get("/health").status_code == 200  # the engine serves on


def test_a_client_that_gives_up_on_a_plain_request_cancels_it(tiny_pair, monkeypatch):
    server = served(tiny_pair, "pd")
    _slow_steps(server, monkeypatch)
    body = {"prompt": "long", "max_tokens": 1500, "ignore_eos": True}
    with uvicorn_thread(server.app) as url:
        with pytest.raises(httpx.ReadTimeout):
            httpx.post(f"{url}{COMPLETIONS}", json=body, timeout=0.5)
        assert wait_until(lambda: server.engine.budget.used == 0), f"{server.engine.budget.used} KV tokens held"
        (request,) = server.submitted
        assert request.status == RequestStatus.CANCELLED and 0 < request.num_output_tokens < 1500
