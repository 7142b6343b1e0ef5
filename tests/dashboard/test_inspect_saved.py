"""Inspect's saved-run mode: a request of a run directory painted from its recorded token kinds."""

from __future__ import annotations

import json
from dataclasses import replace

from streamlit.testing.v1 import AppTest

from dashboard.inspect_saved import NO_KINDS
from engine.models.tiny import tiny_tokenizer
from metrics.run_record import RequestOutput
from tests.metrics.test_export import ar_record, write_one
from tests.support import ROOT

TEXT = "Speculation pays"
KINDS = ("first", "accepted", "accepted", "correction") + ("bonus",) * (len(TEXT) - 4)


def write_saved_run(out) -> None:
    """One run of the tiny preset whose one request's output is ``TEXT``, one kind per token."""
    ids = tuple(tiny_tokenizer()(TEXT, add_special_tokens=False).input_ids)
    assert len(ids) == len(KINDS)  # the tiny tokenizer is byte-level: one token per ASCII character
    record = ar_record("run-pd")
    output = RequestOutput("run-pd", "pd", "req-7", "Say something", (1, 2), ids, TEXT, 1, KINDS)
    key = replace(record.key, engine="pd")
    write_one(out, replace(record, key=key, outputs=(output,), meta={"models": {"preset": "tiny"}}))


def open_saved(runs_dir) -> AppTest:
    at = AppTest.from_file(str(ROOT / "app.py"), default_timeout=60)
    at.run()
    at.switch_page("pages/inspect_request.py").run()
    at.radio(key="inspect.mode").set_value("Saved run").run()
    assert not at.exception, at.exception
    return at


def test_inspect_opens_a_saved_runs_request_and_paints_its_tokens_by_kind(runs_dir):
    write_saved_run(runs_dir / "saved")
    at = open_saved(runs_dir)
    assert not at.error, [e.value for e in at.error]
    assert at.selectbox(key="inspect.saved.request").value == "req-7"
    tokens = next(h.proto.body for h in at.get("html") if "white-space:pre-wrap" in h.proto.body)
    assert tokens.count('title="accepted draft token"') == 2
    assert tokens.count('title="correction"') == 1 and tokens.count('title="first token"') == 1
    assert "Say something" in [t.value for t in at.text]
    assert NO_KINDS not in [i.value for i in at.info]


def test_a_run_written_without_token_kinds_is_shown_plain_with_a_message(runs_dir):
    write_saved_run(runs_dir / "old")
    path = runs_dir / "old" / "outputs.jsonl"
    line = json.loads(path.read_text())
    del line["token_kinds"]  # as written before the per-token record
    path.write_text(json.dumps(line) + "\n")
    at = open_saved(runs_dir)
    assert not at.error, [e.value for e in at.error]
    assert NO_KINDS in [i.value for i in at.info]
    assert TEXT in [t.value for t in at.text]
    assert not any("white-space:pre-wrap" in h.proto.body for h in at.get("html"))
