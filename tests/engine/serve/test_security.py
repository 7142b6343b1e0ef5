"""Security defaults: loopback by default, the API key on every /v1 route (constant time, never echoed or
logged), and no request field reaching a file path, a shell or ``eval``."""

import ast
import hmac
import subprocess
import sys

import httpx
import pytest
from fastapi.testclient import TestClient

from engine.__main__ import _parser
from metrics.schema import RUN_FILES
from tests.support import ROOT as ROOT_DIR
from tests.support.serve import served

ROOT = ROOT_DIR
KEY = "sk-do-not-leak-4f9c2a"


def test_the_server_binds_to_loopback_unless_told_otherwise():
    assert _parser().parse_args(["serve"]).host == "127.0.0.1"
    assert _parser().parse_args(["serve", "--host", "0.0.0.0"]).host == "0.0.0.0"


def test_every_v1_route_needs_the_key_and_it_is_compared_in_constant_time(tiny_pair, monkeypatch):
    compared, constant_time = [], hmac.compare_digest

    def recording_compare(a, b):
        compared.append((a, b))
        return constant_time(a, b)

    monkeypatch.setattr("engine.serve.auth.hmac.compare_digest", recording_compare)
    app = served(tiny_pair, "ar", api_key=KEY).app
    routes = [(m, r.path) for r in app.routes if r.path.startswith("/v1") for m in sorted(r.methods)]
    assert {p for _, p in routes} == {"/v1/models", "/v1/completions", "/v1/chat/completions"}
    body = {"prompt": "x", "messages": [{"role": "user", "content": "x"}], "max_tokens": 1}
    with TestClient(app) as client:
        for method, path in routes:
            for headers in ({}, {"Authorization": "Bearer wrong"}, {"Authorization": f"Bearer {KEY}x"}):
                answer = client.request(method, path, json=body, headers=headers)
                assert answer.status_code == 401, (method, path, headers)
                assert KEY not in answer.text
            good = client.request(method, path, json=body, headers={"Authorization": f"Bearer {KEY}"})
            assert good.status_code == 200, (method, path, good.text)
    assert len(compared) == 4 * len(routes) and all(b == f"Bearer {KEY}".encode() for _, b in compared)


def test_the_key_appears_in_no_log_no_output_and_no_run_file(tmp_path, capsys):
    from workloads.__main__ import main

    log = tmp_path / "server.log"
    command = [sys.executable, "-m", "engine", "serve", "--preset", "tiny", "--device", "cpu", "--port", "0"]
    with open(log, "w") as stderr:
        proc = subprocess.Popen(
            [*command, "--api-key", KEY], cwd=ROOT, stdout=subprocess.PIPE, stderr=stderr, text=True
        )
    try:
        ready = proc.stdout.readline()
        url = ready.strip().rsplit(" ", 1)[-1]
        assert url.startswith("http://127.0.0.1:"), ready
        assert httpx.get(f"{url}/models", headers={"Authorization": "Bearer nope"}).status_code == 401
        out = tmp_path / "run"
        args = ["replay", "--endpoint", url, "--model", "tiny", "--api-key", KEY, "--num-requests", "3"]
        args += ["--dataset", "synthetic"]
        args += ["--input-len", "8", "--output-len", "4", "--preset", "tiny", "--device", "cpu", "--out", str(out)]
        assert main(args) == 0
    finally:
        proc.terminate()
        proc.wait(30)
    replay_output = capsys.readouterr()
    printed = ready + proc.stdout.read() + log.read_text() + replay_output.out + replay_output.err
    assert KEY not in printed
    files = list(out.iterdir())
    assert sorted(f.name for f in files) == sorted(RUN_FILES) and not any(KEY in f.read_text() for f in files)


# calls through which a request's text could reach the file system, a shell or the interpreter
DANGEROUS = {"eval", "exec", "compile", "open", "__import__", "system", "popen", "Popen", "run", "call",
             "check_output", "loads", "Path"}  # fmt: skip


def test_no_serving_module_calls_eval_a_shell_or_the_file_system():
    found = []
    for module in sorted((ROOT / "engine" / "serve").glob("*.py")):
        for node in ast.walk(ast.parse(module.read_text())):
            if isinstance(node, ast.Call):
                name = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
                if name in DANGEROUS and not (name == "run" and module.name == "server.py"):  # asyncio.run
                    found.append(f"{module.name}:{node.lineno} {name}")
    assert found == []


@pytest.mark.parametrize(
    "field",
    [{"model": "../../../../etc/passwd"}, {"prompt": "$(touch /tmp/MARK) `id` ; cat /etc/passwd"},
     {"stop": ["__import__('os').system('id')"]}, {"prompt": "{{7*7}} %s %n MARK"}],
)  # fmt: skip
def test_no_request_field_reaches_a_file_a_shell_or_eval(tiny_pair, field):
    marker = "MARK-7f3e"
    body = {"prompt": "hello", "max_tokens": 2, **{k: _marked(v, marker) for k, v in field.items()}}
    events = []

    def audit(event: str, args: tuple) -> None:
        if recording and event in ("open", "os.system", "subprocess.Popen", "exec", "compile", "os.exec"):
            if marker in repr(args):
                events.append(event)

    recording = False
    sys.addaudithook(audit)  # process-wide and permanent; it only records while ``recording``
    with TestClient(served(tiny_pair, "ar").app) as client:
        recording = True
        answer = client.post("/v1/completions", json=body)
        recording = False
    assert answer.status_code in (200, 404), answer.text
    assert events == []


def _marked(value, marker):
    return [f"{v} {marker}" for v in value] if isinstance(value, list) else f"{value}{marker}"
