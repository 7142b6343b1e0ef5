"""The endpoint client against a server that takes text prompts only, as llama.cpp's server does
(``tests.support.text_only_server``: token ids refused with a 422, no usage, ``min_tokens``)."""

from __future__ import annotations

import json
import math

import pytest

from metrics.runs import load_run_dir
from tests.support.serve import uvicorn_thread
from tests.support.text_only_server import NATURAL_TOKENS, text_only_server
from workloads.__main__ import main
from workloads.endpoint.spec import EndpointSpec

N = 4
TRACE_ARGS = [
    "--concurrency", "2", "--num-requests", str(N), "--dataset", "synthetic", "--input-len", "16",
    "--output-len", "6", "--preset", "tiny", "--device", "cpu", "--seed", "1", "--warmup", "0",
]  # fmt: skip


def replay(url: str, tmp_path, *flags: str, rounds: int = 1) -> int:
    return main([
        "replay", "--engines", "ar", "--endpoint", url, "--model", "smol", "--label", "llama", *TRACE_ARGS,
        "--rounds", str(rounds), "--out", str(tmp_path / "runs"), *flags,
    ])  # fmt: skip


def streamed(bodies: list[dict]) -> list[dict]:
    return [b for b in bodies if b.get("stream")]


def test_auto_sends_the_text_of_the_traces_ids_to_a_server_that_refuses_ids_and_says_so(tiny_pair, tmp_path, capsys):
    bodies: list[dict] = []
    with uvicorn_thread(text_only_server(bodies)) as url:
        code = replay(url, tmp_path, "--ignore-eos", "--endpoint-body", '{"repeat_penalty": 1.0}')
    out = capsys.readouterr().out
    assert code == 0
    run = load_run_dir(tmp_path / "runs")
    requests = run.frames.requests
    assert (requests["status"] == "ok").all() and len(requests) == 2 * N

    # the probe asked for ids first, was refused, then text was answered; every request went as text
    probes = [b for b in bodies if not b.get("stream")]
    assert [type(b["prompt"]).__name__ for b in probes] == ["list", "str"]
    sent = streamed(bodies)
    assert len(sent) == N and all(isinstance(b["prompt"], str) for b in sent)
    # the text is the very ids the in-process engine got, chat template included: tokenized back, the same ids
    ids = {tuple(tiny_pair.tokenizer(b["prompt"], add_special_tokens=False).input_ids) for b in sent}
    trace_ids = {tuple(json.loads(p)) if isinstance(p, str) else tuple(p)
                 for p in run.frames.outputs.loc[run.frames.outputs["engine"] == "ar", "prompt_token_ids"]}  # fmt: skip
    assert ids == trace_ids
    # no ignore_eos there: min_tokens holds the end of sequence off the same way; the extra body goes along
    assert all(b["min_tokens"] == b["max_tokens"] == 6 and b["repeat_penalty"] == 1.0 for b in sent)

    endpoint = next(r for r in run.runs if r["engine"] == "llama")["endpoint"]
    assert endpoint["prompt_sent"]["sent"] == "text" and endpoint["prompt_sent"]["how"] == "probed"
    assert endpoint["prompt_sent"]["tried"]["tokens"].startswith("refused: HTTP 422")
    # no usage from the server: a length finish is max_tokens, the chunks' tokenized count settled to it
    assert endpoint["output_tokens_from"] == {"max_tokens at a length finish": N}
    assert endpoint["tokenized_over_final_usage"] == 0
    assert (requests.loc[requests["engine"] == "llama", "output_tokens"] == 6).all()
    assert "llama: prompts sent as text (asked the server: tokens refused: HTTP 422" in out
    assert "output tokens counted from max_tokens at a length finish (4 requests)" in out


def test_a_stop_finish_without_usage_is_counted_by_tokenizing_and_said_so(tiny_pair, tmp_path, capsys):
    bodies: list[dict] = []
    with uvicorn_thread(text_only_server(bodies)) as url:
        assert replay(url, tmp_path, "--endpoint-prompt", "text") == 0
    run = load_run_dir(tmp_path / "runs")
    served = run.frames.requests[run.frames.requests["engine"] == "llama"]
    assert (served["output_tokens"] == NATURAL_TOKENS).all()  # one "a" per chunk, one byte-level token each
    endpoint = next(r for r in run.runs if r["engine"] == "llama")["endpoint"]
    assert endpoint["prompt_sent"] == {"sent": "text", "how": "given", "tried": {}}
    assert endpoint["output_tokens_from"] == {"tokenized": N}
    assert not [b for b in bodies if not b.get("stream")]  # a form given is not probed
    assert "llama: prompts sent as text (as given); output tokens counted from tokenized (4 requests)" in (
        capsys.readouterr().out
    )


def test_chat_sends_the_users_message_to_the_chat_api(tiny_pair, tmp_path):
    bodies: list[dict] = []
    with uvicorn_thread(text_only_server(bodies)) as url:
        assert replay(url, tmp_path, "--endpoint-prompt", "chat", "--ignore-eos") == 0
    sent = streamed(bodies)
    assert len(sent) == N and all(b["messages"][0]["role"] == "user" and "prompt" not in b for b in sent)
    run = load_run_dir(tmp_path / "runs")
    assert (run.frames.requests["status"] == "ok").all()


def test_a_run_whose_every_request_failed_says_the_endpoint_answered_nothing(tiny_pair, tmp_path, capsys):
    # token ids forced on a server that refuses them, over two rounds (an interval needs 2): 0 tokens/s each
    bodies: list[dict] = []
    with uvicorn_thread(text_only_server(bodies)) as url:
        code = replay(url, tmp_path, "--endpoint-prompt", "tokens", rounds=2)
    captured = capsys.readouterr()
    assert code == 1
    lines = [line for line in captured.err.splitlines() if "answered nothing" in line]
    assert len(lines) == 2, captured.err
    assert all(f": the endpoint answered nothing: {N} of {N} requests failed: HTTP 422" in line for line in lines)
    assert "Traceback" not in captured.err
    run = load_run_dir(tmp_path / "runs")
    summary = run.frames.summary.set_index("engine")
    assert summary.loc["llama", "completed"] == 0
    assert math.isnan(summary.loc["llama", "tok_s_x_ar"])  # no ratio for rounds that answered nothing
    assert "llama: prompts sent as tokens (as given)" in captured.out


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"endpoint_type": "chat", "prompt": "text"}, "the chat API sends messages, not text"),
        ({"prompt": "ids"}, "endpoint prompt must be one of auto, tokens, text, chat"),
        ({"extra_body": {"temperature": 1.0}}, "extra body fields temperature are set by the replay itself"),
    ],
)
def test_bad_prompt_settings_are_one_clear_error(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EndpointSpec("http://127.0.0.1:8000", "m", **kwargs)


def test_a_bad_endpoint_body_is_a_usage_error_before_anything_loads(capsys):
    with pytest.raises(SystemExit) as stopped:  # argparse's own exit, one line on stderr
        main(["replay", "--endpoint", "http://127.0.0.1:8000", "--model", "m", "--endpoint-body", "[1]"])
    assert stopped.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--endpoint-body: needs a JSON object" in err
