"""The replay against llama.cpp's own server (llama-cpp-python's), started as a user starts it: software
PD-Verify did not write, on the very GGUF file the smol preset converts from.

Marked slow, and skipped with its reason where llama-cpp-python is not installed:
it builds from source (about 10 minutes on 2 cores; ``pip install -r
requirements-llama.txt``, which ``python -m workloads bench --parts llama-cpp``
also runs itself). The first test drives the server with ``replay --endpoint``
and the prompt form left to ``auto``; the second pins down where the server
departs from vLLM's API, as the endpoint client meets it.
"""

from __future__ import annotations

import httpx
import pytest

from engine.models.presets import smol_gguf_path
from metrics.runs import load_run_dir
from tests.support.thirdparty import free_port
from workloads.__main__ import main
from workloads.bench.llama_server import ALIAS, PLAIN, installed_version, serve, server_argv

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        installed_version() is None,
        reason="llama-cpp-python[server] is not installed (pip install -r requirements-llama.txt: a 10-minute build)",
    ),
]
N = 2
MAX_TOKENS = 8


@pytest.fixture(scope="module")
def llama_server(tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("llama-cpp") / "server.log"
    with serve(server_argv(smol_gguf_path(), port, PLAIN), f"http://127.0.0.1:{port}", log) as url:
        yield url


def test_replay_against_llama_cpp_sends_text_after_its_server_refuses_ids_and_completes_every_request(
    llama_server, tmp_path, capsys
):
    out = tmp_path / "runs"
    code = main([
        "replay", "--engines", "ar", "--endpoint", llama_server, "--model", ALIAS, "--label", "llama.cpp",
        "--endpoint-body", '{"repeat_penalty": 1.0}', "--concurrency", "2", "--num-requests", str(N),
        "--max-new-tokens", str(MAX_TOKENS), "--ignore-eos", "--preset", "smol", "--device", "cpu", "--seed", "0",
        "--warmup", "0", "--sample-hz", "2", "--rounds", "1", "--out", str(out),
    ])  # fmt: skip
    assert code == 0
    run = load_run_dir(out)
    requests = run.frames.requests
    assert (requests["status"] == "ok").all(), requests[["engine", "status", "error"]]
    endpoint = next(r for r in run.runs if r["engine"] == "llama.cpp")["endpoint"]
    assert endpoint["prompt_sent"]["sent"] == "text"
    # its error handler answers a body its schema refuses with a 500, not a 422
    refused = endpoint["prompt_sent"]["tried"]["tokens"]
    assert refused.startswith("refused: HTTP 500") and "Input should be a valid string" in refused
    # no usage in its stream; min_tokens held its end of sequence off, so each stream ended by length
    assert endpoint["output_tokens_from"] == {"max_tokens at a length finish": N}
    served = requests[requests["engine"] == "llama.cpp"]
    assert (served["output_tokens"] == MAX_TOKENS).all() and (served["ttft_ms"] > 0).all()
    assert endpoint["metrics_scraped"] is False  # it has no /metrics
    assert "llama.cpp: prompts sent as text (asked the server: tokens refused: HTTP 500" in capsys.readouterr().out


def test_llama_cpp_departs_from_vllms_api_where_the_endpoint_client_meets_it(llama_server):
    body = {"model": ALIAS, "prompt": "The capital of France is", "max_tokens": 2, "temperature": 0}
    # a prompt of token ids is refused, with a 500 and the schema's message
    ids = httpx.post(f"{llama_server}/v1/completions", json={**body, "prompt": [504, 3575]}, timeout=60)
    assert ids.status_code == 500 and "Input should be a valid string" in ids.text
    # vLLM's extra fields are ignored, not refused: ignore_eos does nothing there, min_tokens does
    assert (
        httpx.post(f"{llama_server}/v1/completions", json={**body, "ignore_eos": True}, timeout=60).status_code == 200
    )
    # its stream carries no usage, on no chunk
    stream_options = {"include_usage": True, "continuous_usage_stats": True}
    with httpx.stream(
        "POST", f"{llama_server}/v1/completions", json={**body, "stream": True, "stream_options": stream_options},
        timeout=120,
    ) as response:  # fmt: skip
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line.startswith("data:")]
    assert lines[-1] == "data: [DONE]" and not any('"usage"' in line for line in lines)
    assert httpx.get(f"{llama_server}/health", timeout=10).status_code == 404
