"""The replay against ``transformers serve``, transformers' own OpenAI server: software PD-Verify did not write.

The server runs as a user would start it, in a subprocess on a free port: the
smol preset's verifier (SmolLM2-135M-Instruct) from the conversion cache, on
the CPU, with ``--continuous-batching``. The same replay runs the in-process AR
engine and the server on one trace, greedy, so their outputs can be compared.
The second test pins down where the server departs from vLLM's API, as
docs/usage.md lists it, so the list fails here when transformers changes; the
third feeds its stream's shape to the replay's reader without a server; the last leaves the prompt form
to ``auto``, which finds that the server takes text prompts only.
"""

from __future__ import annotations

import json
import sys

import httpx
import pytest

from engine.config import SamplingParams
from engine.models.presets import smol_verifier_dir
from engine.request import FinishReason, Request, RequestStatus
from metrics.runs import load_run_dir
from metrics.schema import RUN_FILES
from tests.support.serve import sse_events
from tests.support.thirdparty import free_port, server_process
from workloads.__main__ import main
from workloads.endpoint.stream import Streamed, StreamReader, TokenCount

N = 2  # requests
MAX_TOKENS = 4  # few tokens: the server decodes one token per step on 2 shared CPU cores


@pytest.fixture(scope="module")
def transformers_serve(tmp_path_factory):
    """(base URL, model name): the model name is the directory the server was started with."""
    model = str(smol_verifier_dir())
    port = free_port()
    argv = [sys.executable, "-m", "transformers.cli.transformers", "serve", model, "--continuous-batching",
            "--device", "cpu", "--host", "127.0.0.1", "--port", str(port)]  # fmt: skip
    log = tmp_path_factory.mktemp("transformers-serve") / "server.log"
    with server_process(argv, f"http://127.0.0.1:{port}", log) as url:
        yield url, model


def test_replay_against_transformers_serve_completes_every_request_with_the_verifiers_greedy_output(
    transformers_serve, tmp_path
):
    url, model = transformers_serve
    out = tmp_path / "runs"
    code = main([
        "replay", "--engines", "ar", "--endpoint", url, "--model", model, "--label", "transformers-serve",
        "--endpoint-type", "chat", "--concurrency", "2", "--num-requests", str(N), "--max-new-tokens",
        str(MAX_TOKENS), "--temperature", "0", "--preset", "smol", "--device", "cpu", "--seed", "0",
        "--warmup", "0", "--sample-hz", "2", "--rounds", "1", "--out", str(out),
    ])  # fmt: skip  # one round: the comparison is the outputs, not × AR
    assert code == 0
    assert all((out / name).is_file() for name in RUN_FILES)
    run = load_run_dir(out)
    requests, outputs = run.frames.requests, run.frames.outputs
    assert list(run.frames.summary["engine"]) == ["ar", "transformers-serve"]
    assert len(requests) == 2 * N and (requests["status"] == "ok").all(), requests[["engine", "status", "error"]]

    # the same verifier, greedy, on the same trace: the same text as the in-process engine
    texts = {e: dict(zip(g["request_id"], g["text"], strict=True)) for e, g in outputs.groupby("engine")}
    assert texts["transformers-serve"] == texts["ar"]
    tokens = {e: dict(zip(g["request_id"], g["output_tokens"], strict=True)) for e, g in requests.groupby("engine")}
    assert tokens["transformers-serve"] == tokens["ar"]
    served = requests[requests["engine"] == "transformers-serve"]
    assert (served["ttft_ms"] > 0).all() and (served["e2e_ms"] >= served["ttft_ms"]).all()

    endpoint = next(r for r in run.runs if r["engine"] == "transformers-serve")["endpoint"]
    # usage arrives only on the chunk with the finish reason: chunks counted by tokenizing, settled by it
    assert endpoint["output_tokens_from"] == {"final usage": N}
    assert endpoint["tokenized_over_final_usage"] == 0
    # no /metrics: the scraped series stay empty, and run.json says why
    assert endpoint["metrics_scraped"] is False and "404" in endpoint["metrics_error"]
    series = run.frames.timeseries
    assert series.loc[series["engine"] == "transformers-serve", "running"].isna().all()


def test_transformers_serve_departs_from_vllms_api_as_the_usage_docs_say(transformers_serve):
    url, model = transformers_serve
    body = {"model": model, "prompt": "The capital of France is", "max_tokens": 2, "temperature": 0}
    # vLLM's extra fields are refused whole, not ignored
    for extra in ({"ignore_eos": True}, {"top_k": 5}, {"max_completion_tokens": 2}):
        response = httpx.post(f"{url}/v1/completions", json={**body, **extra}, timeout=60)
        assert response.status_code == 422 and next(iter(extra)) in response.text
    # a completion prompt must be text, not token ids
    response = httpx.post(f"{url}/v1/completions", json={**body, "prompt": [504, 3575, 282]}, timeout=60)
    assert response.status_code in (400, 422) and "string" in response.text
    # the model name is the path it was started with
    response = httpx.post(f"{url}/v1/completions", json={**body, "model": "smol"}, timeout=60)
    assert response.status_code == 400 and "pinned" in response.text
    assert httpx.get(f"{url}/metrics", timeout=10).status_code == 404

    # stream_options: usage once, on the chunk with the finish reason; continuous_usage_stats is ignored
    stream_options = {"include_usage": True, "continuous_usage_stats": True}
    with httpx.stream(
        "POST", f"{url}/v1/completions", json={**body, "stream": True, "stream_options": stream_options}, timeout=120
    ) as response:
        assert response.status_code == 200
        events = sse_events(response.iter_lines())
    assert "[DONE]" not in events  # the stream just closes after the finish reason
    chunks = events
    with_usage = [c for c in chunks if c.get("usage")]
    assert with_usage == [chunks[-1]], json.dumps(chunks)
    assert chunks[-1]["choices"][0]["finish_reason"] == "length"
    assert chunks[-1]["usage"]["completion_tokens"] == 2


@pytest.mark.parametrize(("server_total", "tokens", "over"), [(9, 9, 0), (3, 4, 1)])
def test_usage_on_the_finish_chunk_settles_the_count_of_text_chunks_without_usage(
    tiny_pair, server_total, tokens, over
):
    # as transformers serve streams: text chunks without usage, then usage on the chunk with the finish reason
    request = Request("r", [1, 2, 3], SamplingParams(max_new_tokens=16))
    request.mark_arrived()
    streamed = Streamed()
    reader = StreamReader(request, tiny_pair.tokenizer, streamed, lambda count: None)
    reader.chunk({"choices": [{"index": 0, "text": "ab"}]})  # the byte-level tiny tokenizer: 2 tokens a chunk
    reader.chunk({"choices": [{"index": 0, "text": "cd"}]})
    finish = {"index": 0, "text": "", "finish_reason": "length"}
    reader.chunk({"choices": [finish], "usage": {"completion_tokens": server_total}})
    reader.end()
    assert streamed.count == TokenCount.FINAL_USAGE  # not "usage": the chunks carried none
    assert request.status == RequestStatus.OK and request.finish_reason == FinishReason.LENGTH
    # a larger total is filled in (tokens with no text); tokens counted beyond a smaller one are reported
    assert (request.num_output_tokens, streamed.over_usage) == (tokens, over)


def test_auto_finds_that_transformers_serve_takes_text_prompts_only_and_sends_the_text_of_the_traces_ids(
    transformers_serve, tmp_path
):
    url, model = transformers_serve
    out = tmp_path / "runs"
    code = main([
        "replay", "--engines", "ar", "--endpoint", url, "--model", model, "--label", "transformers-serve",
        "--concurrency", "2", "--num-requests", str(N), "--max-new-tokens", str(MAX_TOKENS), "--temperature", "0",
        "--preset", "smol", "--device", "cpu", "--seed", "0", "--warmup", "0", "--sample-hz", "2", "--rounds", "1",
        "--out", str(out),
    ])  # fmt: skip  # no --endpoint-prompt: auto
    assert code == 0
    run = load_run_dir(out)
    assert (run.frames.requests["status"] == "ok").all()
    sent = next(r for r in run.runs if r["engine"] == "transformers-serve")["endpoint"]["prompt_sent"]
    assert sent["sent"] == "text" and sent["how"] == "probed"
    refused = sent["tried"]["tokens"]  # 400 "prompt must be a string." (422 in other versions)
    assert refused.startswith(("refused: HTTP 400", "refused: HTTP 422")) and "string" in refused
    assert sent["tried"]["text"] == "ok"
    # the text of the very ids, tokenized back by the server: the verifier's greedy text, as in process
    outputs = run.frames.outputs
    texts = {e: dict(zip(g["request_id"], g["text"], strict=True)) for e, g in outputs.groupby("engine")}
    assert texts["transformers-serve"] == texts["ar"]
