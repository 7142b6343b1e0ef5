"""The real ``python -m engine serve`` (uvicorn, tiny preset, loopback) under the official ``openai`` client."""

import os
import subprocess
import sys
import threading

import httpx
import openai
import pytest

from tests.support import ROOT as ROOT_DIR
from tests.support.serve import in_process_greedy

ROOT = ROOT_DIR
KEY = "test-key"
START_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def base_url(tmp_path_factory):
    command = [sys.executable, "-m", "engine", "serve", "--preset", "tiny", "--engine", "pdv", "--device", "cpu"]
    command += ["--host", "127.0.0.1", "--port", "0", "--api-key", KEY, "--served-model-name", "tiny-pdv"]
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    log = tmp_path_factory.mktemp("serve") / "stderr.txt"
    with open(log, "w") as stderr:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=stderr, text=True)
    ready: list[str] = []
    reader = threading.Thread(target=lambda: ready.append(proc.stdout.readline()), daemon=True)
    reader.start()
    reader.join(START_TIMEOUT_S)
    try:
        line = ready[0] if ready else ""
        assert "http://127.0.0.1:" in line, f"no ready line: {line!r}; stderr: {log.read_text()}"
        yield line.strip().rsplit(" ", 1)[-1]
    finally:
        proc.terminate()
        proc.wait(30)


@pytest.fixture(scope="module")
def client(base_url):
    return openai.OpenAI(base_url=base_url, api_key=KEY, max_retries=0, timeout=60)


def test_the_server_prints_one_ready_line_with_its_url(base_url):
    assert base_url.startswith("http://127.0.0.1:") and base_url.endswith("/v1")
    assert httpx.get(base_url.removesuffix("/v1") + "/health").status_code == 200


def test_completions_plain_and_streamed_give_the_in_process_greedy_text(client, tiny_pair):
    prompt = "Once upon a time"
    expected = tiny_pair.decode(in_process_greedy(tiny_pair, tiny_pair.encode_prompt(prompt, raw=True), 24))
    extra = {"ignore_eos": True}
    plain = client.completions.create(model="tiny-pdv", prompt=prompt, max_tokens=24, temperature=0, extra_body=extra)
    assert plain.choices[0].text == expected and plain.choices[0].finish_reason == "length"
    assert (plain.usage.prompt_tokens, plain.usage.completion_tokens) == (len(prompt), 24)
    chunks = list(
        client.completions.create(
            model="tiny-pdv",
            prompt=prompt,
            max_tokens=24,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=extra,
        )
    )
    assert "".join(c.choices[0].text for c in chunks if c.choices) == expected
    assert chunks[-1].choices == [] and chunks[-1].usage.completion_tokens == 24
    assert chunks[-1].usage.total_tokens == len(prompt) + 24


def test_chat_plain_and_streamed_give_the_in_process_greedy_text(client, tiny_pair):
    messages = [{"role": "user", "content": "Tell me a story"}]
    expected_ids = in_process_greedy(tiny_pair, tiny_pair.encode_prompt("Tell me a story"), 20)
    plain = client.chat.completions.create(model="tiny-pdv", messages=messages, max_tokens=20, temperature=0)
    assert plain.choices[0].message.content == tiny_pair.decode(expected_ids)
    assert plain.choices[0].message.role == "assistant"
    assert plain.usage.completion_tokens == len(expected_ids)
    stream = client.chat.completions.create(
        model="tiny-pdv",
        messages=messages,
        max_completion_tokens=20,
        temperature=0,
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
    assert text == tiny_pair.decode(expected_ids)
    assert chunks[0].choices[0].delta.role == "assistant"
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "length"
    assert chunks[-1].usage.completion_tokens == len(expected_ids) and chunks[-1].usage.prompt_tokens == 15


def test_the_client_raises_the_servers_errors(client, base_url):
    with pytest.raises(openai.BadRequestError, match="n=2 is not supported"):
        client.completions.create(model="tiny-pdv", prompt="x", n=2)
    with pytest.raises(openai.NotFoundError, match="does not exist"):
        client.completions.create(model="gpt-4o", prompt="x")
    with pytest.raises(openai.AuthenticationError):
        openai.OpenAI(base_url=base_url, api_key="wrong", max_retries=0).models.list()
    assert [m.id for m in client.models.list().data] == ["tiny-pdv"]
