"""Bad input to the server: every kind answered with an OpenAI-style error, and the engine serves on."""

import httpx

from engine.serve.limits import MAX_BODY_BYTES
from tests.support.serve import MODEL, served, uvicorn_thread

CHAT = "/v1/chat/completions"
COMPLETIONS = "/v1/completions"
HI = [{"role": "user", "content": "hi"}]
JSON = {"content-type": "application/json"}

# (what, path, raw body, status, words the message must hold); tiny's context is 2048 tokens
BAD = [
    ("malformed JSON", COMPLETIONS, b'{"prompt": "x",', 400, "not valid JSON"),
    ("not UTF-8", COMPLETIONS, b'{"prompt": "\xff\xfe\xfd", "max_tokens": 2}', 400, "parsing the body"),
    ("wrong type", COMPLETIONS, b'{"prompt": "x", "max_tokens": "ten"}', 400, "max_tokens"),
    ("no prompt", COMPLETIONS, b'{"max_tokens": 2}', 400, "prompt: Field required"),
    ("unknown model", COMPLETIONS, b'{"model": "gpt-9", "prompt": "x"}', 404, "does not exist"),
    ("empty prompt", COMPLETIONS, b'{"prompt": ""}', 400, "empty prompt"),
    ("empty messages", CHAT, b'{"messages": []}', 400, "must not be empty"),
    ("prompt over the context", COMPLETIONS, b'{"prompt": "' + b"x" * 3000 + b'"}', 400, "exceeds the model context"),
    ("max_tokens 0", COMPLETIONS, b'{"prompt": "x", "max_tokens": 0}', 400, "max_tokens must be >= 1"),
    ("max_tokens over the context", COMPLETIONS, b'{"prompt": "x", "max_tokens": 4000}', 400, "exceeds the model"),
    ("temperature < 0", COMPLETIONS, b'{"prompt": "x", "temperature": -1}', 400, "temperature must be"),
    ("top_p 0", COMPLETIONS, b'{"prompt": "x", "top_p": 0}', 400, "top_p must be in (0, 1]"),
    ("top_p > 1", CHAT, b'{"messages": [{"role": "user", "content": "x"}], "top_p": 1.01}', 400, "top_p must be"),
    ("n > 1", CHAT, b'{"messages": [{"role": "user", "content": "x"}], "n": 2}', 400, "one choice per request"),
    ("unknown role", CHAT, b'{"messages": [{"role": "robot", "content": "x"}]}', 400, "messages.0.role"),
    ("10 MB body", COMPLETIONS, b'{"prompt": "' + b"x" * 10_000_000 + b'"}', 413, f"larger than {MAX_BODY_BYTES}"),
]


def test_every_bad_request_gets_its_error_and_the_next_good_one_is_served(tiny_pair):
    server = served(tiny_pair, "baseline", max_cache_tokens=8192)
    with uvicorn_thread(server.app) as url, httpx.Client(base_url=url, timeout=60) as http:
        for what, path, body, status, says in BAD:
            response = http.post(path, content=body, headers=JSON)
            assert response.status_code == status, (what, response.text)
            error = response.json()["error"]
            assert set(error) == {"message", "type", "param", "code"}, what
            assert says in error["message"], (what, error["message"])
        good = http.post(COMPLETIONS, json={"model": MODEL, "prompt": "hello", "max_tokens": 4, "temperature": 0})
        health = http.get("/health")
    assert good.status_code == 200 and good.json()["usage"]["completion_tokens"] == 4
    assert health.status_code == 200
    assert server.engine.budget.used == 0 and server.engine.fatal_error is None
    # only the requests that reached the engine's admission check were submitted; each ended rejected
    stats = server.engine.stats()
    assert stats.outcomes.rejected == 3 and stats.outcomes.ok == 1 and stats.accounting_problem() is None


def test_a_streamed_body_over_the_limit_is_refused_without_a_declared_length(tiny_pair):
    server = served(tiny_pair, "ar")
    chunks = (b"x" * 1_000_000 for _ in range(MAX_BODY_BYTES // 1_000_000 + 2))  # chunked: no Content-Length
    with uvicorn_thread(server.app) as url, httpx.Client(base_url=url, timeout=60) as http:
        try:
            response = http.post(COMPLETIONS, content=chunks, headers=JSON)
        except httpx.WriteError:  # the server may close the connection while the client still sends
            response = None
        assert http.get("/health").status_code == 200
    if response is not None:
        assert response.status_code == 413 and "larger than" in response.json()["error"]["message"]
    assert server.submitted == []
