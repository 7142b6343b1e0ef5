"""The README's first command: ``streamlit run app.py`` on the default ``smol`` pair, one Live run end to end.

Headless through ``streamlit.testing.v1.AppTest``, with the page's own defaults
(preset, drafter, controller, engines); only the run is kept small: 2 requests
of 8 tokens.
"""

from __future__ import annotations

import json

from streamlit.testing.v1 import AppTest

from dashboard.settings import session_defaults
from metrics.runs import list_run_dirs, load_run_dir
from tests.dashboard.test_apptest import APP, ENGINES, LABELS, ended, rerun_until, wait_for_no_threads
from workloads.drivers.rounds import DEFAULT_ROUNDS

REQUESTS = 2
TOKENS = 8


def test_live_run_on_the_default_smol_pair_completes_in_every_engine(tmp_path, monkeypatch):
    runs_dir = tmp_path / "runs"
    monkeypatch.setenv("PDV_RUNS_DIR", str(runs_dir))
    monkeypatch.delenv("PDV_DEFAULT_PRESET", raising=False)
    at = AppTest.from_file(APP, default_timeout=120)
    at.run()
    assert not at.exception, at.exception
    assert at.selectbox(key="live.preset").value == "smol"
    at.number_input(key="live.num_requests").set_value(REQUESTS)
    at.number_input(key="live.max_new_tokens").set_value(TOKENS)
    at.button(key="live.start").click().run()
    assert not at.exception, at.exception
    rerun_until(at, ended("live"), timeout=480)

    assert not at.error, [e.value for e in at.error]
    assert "Finished" in at.success[0].value
    # the default rounds: 5, then more until every interval is within ±10 % – at most the default's 12
    most = session_defaults()["live.rounds"]
    texts = [p.proto.text for p in at.get("progress")]
    rounds = int(texts[0].split("round ")[1].split(" of ")[0])
    assert DEFAULT_ROUNDS <= rounds <= most
    assert texts == [f"{REQUESTS}/{REQUESTS} requests · done · round {rounds} of {most}"] * len(ENGINES)
    assert rounds == most or "Rounds ended:" in " ".join(i.value for i in [*at.info, *at.success])
    assert list(at.table[0].value.columns) == LABELS
    (info,) = list_run_dirs(runs_dir)
    run = load_run_dir(info.path)
    assert list(run.frames.summary["engine"]) == list(ENGINES)
    assert (run.frames.summary["completed"] == rounds * REQUESTS).all()  # pooled over the rounds
    assert run.runs[0]["models"]["preset"] == "smol"
    # greedy by default: every engine returns the verifier's own tokens
    outputs = [json.loads(line) for line in (info.path / "outputs.jsonl").read_text().splitlines()]
    by_engine: dict[str, list] = {}
    for row in outputs:
        by_engine.setdefault(row["engine"], []).append((row["request_id"], row["output_token_ids"]))
    assert len({tuple(sorted(map(str, rows))) for rows in by_engine.values()}) == 1, by_engine
    assert wait_for_no_threads() == []
