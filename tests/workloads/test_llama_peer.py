"""The llama.cpp part of the bench, end to end on the tiny pair, with a fake of llama.cpp's server in its place.

The part's own work is checked here: the servers' command lines, every engine and
both servers replayed in the same rounds, ratios to plain llama.cpp, the notes
that give its version, flags and how its tokens were counted. The real server
is in test_thirdparty_llama_cpp.py (slow: llama-cpp-python builds from source).
"""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from tests.support.serve import uvicorn_thread
from tests.support.text_only_server import text_only_server
from workloads.bench import llama_peer
from workloads.bench.common import read_csv
from workloads.bench.run import main

QUICK = ["--quick", "--preset", "tiny", "--device", "cpu"]


@pytest.fixture
def fake_llama(monkeypatch, tmp_path):
    """(bodies the fake got, argv of every server started): the part's servers are fakes on the tiny pair."""
    bodies: list[dict] = []
    started: list[list[str]] = []

    @contextmanager
    def serve(argv, url, log, ready_timeout=0.0):
        started.append(argv)
        with uvicorn_thread(text_only_server(bodies)) as fake:
            yield fake

    monkeypatch.setattr(llama_peer, "serve", serve)
    monkeypatch.setattr(llama_peer, "ensure_installed", lambda say: "0.3.36")
    monkeypatch.setattr(llama_peer, "smol_gguf_path", lambda: tmp_path / "SmolLM2-135M-Instruct.Q4_1.gguf")
    monkeypatch.setattr(llama_peer, "PRESET", "tiny")
    return bodies, started


def test_every_engine_and_both_servers_run_in_the_same_rounds_with_ratios_to_plain_llama_cpp(fake_llama, tmp_path):
    bodies, started = fake_llama
    out = tmp_path / "b"
    flags = ["--parts", "llama-cpp", "--llama-cpp-loads", "1,2", "--llama-cpp-engines", "ar"]
    assert main([*QUICK, "--out", str(out), *flags]) == 0

    plain, lookup = started
    for argv in started:  # as a user starts it on the preset's GGUF file, two threads, no request cut off
        assert argv[1:4] == ["-m", "llama_cpp.server", "--model"] and argv[4].endswith(".Q4_1.gguf")
        line = " ".join(argv)
        assert " --n_threads 2 --n_threads_batch 2 " in line and "--interrupt_requests False" in line
    assert "--draft_model" not in plain and "--draft_model prompt-lookup-decoding" in " ".join(lookup)

    rows = read_csv(out / f"{llama_peer.NAME}.csv")
    assert {(r["group"], r["label"]) for r in rows} == {
        (f"C={c}", label) for c in (1, 2) for label in ("ar", "llama.cpp", "llama.cpp-lookup")
    }
    assert all(r["completed"] == r["requests"] == "4" for r in rows)
    # text prompts, greedy without llama.cpp's repeat penalty; the load sweep's natural ends (no min_tokens)
    sent = [b for b in bodies if b.get("stream")]
    assert sent and all(isinstance(b["prompt"], str) and b["repeat_penalty"] == 1.0 for b in sent)
    assert all("min_tokens" not in b for b in sent)

    summary = [s for s in read_csv(out / "summary.csv") if s["part"] == llama_peer.NAME]
    tok_s = {(s["group"], s["label"]): s for s in summary if s["metric"] == "output_tok_s"}
    assert all(s["reference"] == "llama.cpp" for s in tok_s.values())
    assert float(tok_s[("C=1", "llama.cpp")]["ratio_median"]) == 1.0
    assert tok_s[("C=2", "ar")]["ratio_median"]  # an engine's ratio to llama.cpp, in the same rounds

    notes = [n["note"] for n in read_csv(out / "notes.csv") if n["part"] == llama_peer.NAME]
    assert any(n.startswith("llama.cpp is llama-cpp-python 0.3.36's server: python -m llama_cpp.server") for n in notes)
    assert any(n.startswith("llama.cpp: prompts sent as text (as given); output tokens counted from") for n in notes)
    assert any(n.startswith("llama.cpp-lookup: ") and "outputs equal to AR's" in n for n in notes)
    assert any(n.startswith("best engine at C = 1: ") for n in notes)
    assert not [g for g in read_csv(out / "goals.csv") if g["part"] == llama_peer.NAME]  # its goal is at C = 16


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--llama-cpp-engines", "pd"], "--llama-cpp-engines needs ar"),
        (["--llama-cpp-servers", "lookup"], "--llama-cpp-servers needs plain"),
        (["--llama-cpp-loads", "0"], "--llama-cpp-loads needs concurrencies of at least 1"),
    ],
)
def test_a_bad_llama_cpp_option_is_one_error_before_any_model_loads(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_:
        main([*QUICK, "--out", str(tmp_path / "b"), "--parts", "llama-cpp", *flags])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err and not (tmp_path / "b").exists()


def test_the_part_refuses_a_preset_whose_model_llama_cpp_does_not_serve(tmp_path, capsys):
    with pytest.raises(SystemExit, match="serves the smol preset's GGUF file; run it with --preset smol"):
        main([*QUICK, "--out", str(tmp_path / "b"), "--parts", "llama-cpp"])
