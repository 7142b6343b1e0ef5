"""Clients PD-Verify did not write, against ``python -m engine serve --preset tiny`` run as a user runs it.

* GuideLLM (``guidellm run``), a benchmark client for vLLM-style servers: its
  report's request count and token totals must equal the server's own
  ``/metrics`` counters for the run.
* ``curl``: the raw server-sent event stream, byte for byte framed as vLLM
  frames it, read the way ``vllm bench serve`` reads it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.support.thirdparty import counters, engine_serve_argv, env, free_port, server_process

N = 5  # requests
PROMPT_TOKENS, OUTPUT_TOKENS = 16, 8


@pytest.fixture(scope="module")
def our_server(tmp_path_factory):
    port = free_port()
    log = tmp_path_factory.mktemp("engine-serve") / "server.log"
    with server_process(engine_serve_argv(port), f"http://127.0.0.1:{port}", log) as url:
        yield url


def test_guidellm_reports_the_requests_and_tokens_our_metrics_count(our_server, tiny_pair, tmp_path):
    tokenizer = tmp_path / "tokenizer"  # GuideLLM builds its synthetic prompts with the served model's tokenizer
    tiny_pair.tokenizer.save_pretrained(tokenizer)
    report = tmp_path / "guidellm.json"
    before = counters(our_server)
    argv = [
        sys.executable, "-m", "guidellm", "run",
        "--backend", f"kind=openai_http,target={our_server},model=tiny,request_format=/v1/completions",
        "--profile", "kind=concurrent,streams=2",
        "--constraint", f"kind=max_requests,count={N}",
        "--data", f"kind=synthetic_text,prompt_tokens={PROMPT_TOKENS},output_tokens={OUTPUT_TOKENS}",
        "--tokenizer", f"kind=huggingface_auto,model={tokenizer}",
        "--output", f"kind=json,path={report}",
        "--disable-console",
    ]  # fmt: skip
    done = subprocess.run(argv, cwd=tmp_path, env=env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    after = counters(our_server)

    (benchmark,) = json.loads(report.read_text())["benchmarks"]
    reported = benchmark["metrics"]
    assert reported["request_totals"] == {"successful": N, "errored": 0, "incomplete": 0, "total": N}
    prompt_tokens = reported["prompt_token_count"]["successful"]["total_sum"]
    output_tokens = reported["output_token_count"]["successful"]["total_sum"]

    def served(name: str) -> float:
        return after.get(name, 0.0) - before.get(name, 0.0)

    assert served("vllm:request_success_total") == N
    assert served("vllm:prompt_tokens_total") == prompt_tokens == N * PROMPT_TOKENS
    # GuideLLM sends ignore_eos with its fixed output length: every request ran to max_tokens
    assert served("vllm:generation_tokens_total") == output_tokens == N * OUTPUT_TOKENS


def curl(*args: str) -> bytes:
    if shutil.which("curl") is None:
        pytest.fail("curl is not installed (apt-get install curl)")
    done = subprocess.run(["curl", "-sS", "-N", "--fail-with-body", *args], capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr.decode() + done.stdout.decode()
    return done.stdout


def vllm_bench_serve_read(stream: bytes) -> tuple[str, int | None]:
    """Text and output tokens as ``vllm bench serve`` takes them from a stream: ``data: `` events up to [DONE]."""
    text, output_tokens = "", None
    for event in stream.split(b"\n\n"):
        event = event.strip()
        if not event:
            continue
        payload = event.decode("utf-8").removeprefix("data: ")
        if payload == "[DONE]":
            continue
        data = json.loads(payload)
        if choices := data.get("choices"):
            text += choices[0].get("text") or (choices[0].get("delta") or {}).get("content") or ""
        elif usage := data.get("usage"):
            output_tokens = usage.get("completion_tokens")
    return text, output_tokens


@pytest.mark.parametrize("api", ["completions", "chat/completions"])
def test_curl_gets_server_sent_events_framed_as_vllm_frames_them(our_server, api, tmp_path):
    body = {"model": "tiny", "max_tokens": OUTPUT_TOKENS, "temperature": 0, "ignore_eos": True}
    body |= {"prompt": "Speculative decoding"} if api == "completions" else {
        "messages": [{"role": "user", "content": "Speculative decoding"}]}  # fmt: skip
    url, json_header = f"{our_server}/v1/{api}", ["-H", "Content-Type: application/json"]
    headers = tmp_path / "headers"
    stream = curl(url, *json_header, "-D", str(headers), "-d", json.dumps(
        body | {"stream": True, "stream_options": {"include_usage": True}}))  # fmt: skip
    assert "content-type: text/event-stream" in headers.read_text().lower()

    # every event is one "data: " line followed by a blank line; [DONE] is the last, and only once
    assert stream.endswith(b"data: [DONE]\n\n")
    events = stream.split(b"\n\n")
    assert events[-1] == b"" and events.count(b"data: [DONE]") == 1
    chunks = [json.loads(e.removeprefix(b"data: ")) for e in events[:-2]]
    assert all(e.startswith(b"data: {") and b"\n" not in e for e in events[:-2])
    kind = "text_completion" if api == "completions" else "chat.completion.chunk"
    assert {c["object"] for c in chunks} == {kind} and len({c["id"] for c in chunks}) == 1
    # include_usage: a last chunk with no choices carries the usage
    assert chunks[-1]["choices"] == [] and chunks[-1]["usage"]["completion_tokens"] == OUTPUT_TOKENS
    assert chunks[-2]["choices"][0]["finish_reason"] == "length"

    text, output_tokens = vllm_bench_serve_read(stream)
    assert output_tokens == OUTPUT_TOKENS
    whole = json.loads(curl(url, *json_header, "-d", json.dumps(body)))  # greedy: the same text unstreamed
    choice = whole["choices"][0]
    assert text == (choice["text"] if api == "completions" else choice["message"]["content"])
    assert whole["usage"]["completion_tokens"] == OUTPUT_TOKENS
