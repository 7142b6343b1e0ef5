"""Inspect's saved-run mode: a request of a run directory painted from its recorded token kinds, with the tiles,
step chart and proposals per source its recorded steps and requests.csv row give, as a new prompt has them."""

from __future__ import annotations

import base64
import json
from dataclasses import replace

import numpy as np
from streamlit.testing.v1 import AppTest

from dashboard.inspect_saved import NO_KINDS
from engine.draft_source import MODEL, DraftSource, SourceKind
from engine.models.tiny import tiny_tokenizer
from engine.request import StepRecord
from metrics.run_record import RequestOutput
from tests.metrics.test_export import ar_record, request, write_one
from tests.support import ROOT
from widgets.request_card import NO_STEPS

TEXT = "Speculation pays"
KINDS = ("first", "accepted", "accepted", "correction") + ("bonus",) * (len(TEXT) - 4)
# 7 drafted, 2 accepted over 3 verify steps: acceptance 0.29, tokens/step 1 + 2/3
STEPS = (StepRecord(4, 2, MODEL), StepRecord(3, 0, DraftSource(SourceKind.GLOBAL, 2)), StepRecord(0, 0, None))
TIMED = request("req-7", len(TEXT), 12.5)  # requests.csv: TTFT 100 ms, TPOT 12.5 ms


def write_saved_run(out, engine: str = "pd", steps: tuple[StepRecord, ...] | None = STEPS) -> None:
    """One run of the tiny preset whose one request's output is ``TEXT``, one kind per token, with ``steps``."""
    ids = tuple(tiny_tokenizer()(TEXT, add_special_tokens=False).input_ids)
    assert len(ids) == len(KINDS)  # the tiny tokenizer is byte-level: one token per ASCII character
    kinds = KINDS if engine != "ar" else ("first",) + ("decode",) * (len(TEXT) - 1)
    record = ar_record(f"run-{engine}")
    output = RequestOutput(f"run-{engine}", engine, "req-7", "Say something", (1, 2), ids, TEXT, 1, kinds, steps)
    key = replace(record.key, engine=engine)
    models = {"models": {"preset": "tiny"}}
    write_one(out, replace(record, key=key, requests=(TIMED,), outputs=(output,), meta=models))


def write_older_run(out, missing: str) -> None:
    """The saved run as written before outputs.jsonl had the field ``missing``."""
    write_saved_run(out)
    path = out / "outputs.jsonl"
    line = json.loads(path.read_text())
    del line[missing]
    path.write_text(json.dumps(line) + "\n")


def tiles(at: AppTest) -> dict[str, str]:
    return {m.label: m.value for m in at.metric}


def unpacked(values) -> list:
    """A figure's array as the page sends it: plain, or packed as {dtype, bdata} (base64 of the raw values)."""
    if isinstance(values, dict):
        return np.frombuffer(base64.b64decode(values["bdata"]), dtype=values["dtype"]).tolist()
    return list(values)


def step_charts(at: AppTest) -> dict[str, dict]:
    """The step charts on the page by element key (the part of the id after the hash)."""
    return {c.proto.id.split("-", 2)[-1]: json.loads(c.proto.spec) for c in at.get("plotly_chart")}


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
    assert NO_KINDS not in [i.value for i in at.info] and NO_STEPS not in [i.value for i in at.info]


def test_a_saved_speculative_request_shows_the_tiles_step_chart_and_proposals_of_a_new_prompt(runs_dir):
    write_saved_run(runs_dir / "saved")
    at = open_saved(runs_dir)
    assert not at.error, [e.value for e in at.error]
    assert tiles(at) == {
        "output tokens": str(len(TEXT)),
        "verify steps": "3",
        "acceptance": "0.29",
        "tokens / step": "1.67",
        "TTFT (ms)": "100",
        "TPOT (ms)": "12.5",
    }
    bars = step_charts(at)["inspect.saved.chart.steps"]["data"]
    assert [t["name"] for t in bars] == ["drafted", "accepted"]
    assert [unpacked(bars[0]["y"]), unpacked(bars[1]["y"])] == [[4, 3, 0], [2, 0, 0]]
    assert any(c.value == "Proposals per source" for c in at.caption)
    proposals = at.dataframe[-1].value
    assert list(proposals["source"]) == ["model", "suffix-global"]
    assert list(proposals["tokens proposed"]) == [4, 3] and list(proposals["accepted"]) == [2, 0]


def test_a_saved_ar_request_shows_its_tiles_and_an_empty_step_chart_as_a_new_prompt_does(runs_dir):
    write_saved_run(runs_dir / "saved", engine="ar", steps=())
    at = open_saved(runs_dir)
    assert not at.error, [e.value for e in at.error]
    shown = tiles(at)
    assert shown["verify steps"] == "0" and shown["acceptance"] == "—" and shown["tokens / step"] == "—"
    assert shown["TTFT (ms)"] == "100"
    (chart,) = step_charts(at).values()
    assert chart["data"] == [] and "does not draft" in json.dumps(chart["layout"])
    assert not at.dataframe and not any(c.value == "Proposals per source" for c in at.caption)
    assert NO_STEPS not in [i.value for i in at.info]  # AR's steps are recorded: there are none


def test_a_run_written_without_steps_says_so_and_shows_only_what_it_recorded(runs_dir):
    write_older_run(runs_dir / "old", "steps")
    at = open_saved(runs_dir)
    assert not at.error, [e.value for e in at.error]
    assert NO_STEPS in [i.value for i in at.info]
    shown = tiles(at)
    assert shown["verify steps"] == "—" and shown["acceptance"] == "—" and shown["TPOT (ms)"] == "12.5"
    assert not step_charts(at) and not at.dataframe


def test_a_run_written_without_token_kinds_is_shown_plain_with_a_message(runs_dir):
    write_older_run(runs_dir / "old", "token_kinds")
    at = open_saved(runs_dir)
    assert not at.error, [e.value for e in at.error]
    assert NO_KINDS in [i.value for i in at.info]
    assert TEXT in [t.value for t in at.text]
    assert not any("white-space:pre-wrap" in h.proto.body for h in at.get("html"))
