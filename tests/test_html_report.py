"""The shareable report: one self-contained HTML file with the runs' setup, summary, charts and CSV links."""

from __future__ import annotations

import re

from engine.config import EngineConfig, SamplingParams
from workloads.arrivals import ClosedLoop
from workloads.environment import run_context
from workloads.html_report import main
from workloads.sweep import SweepPlan, run_sweep
from workloads.trace import DatasetSpec, load_trace


def test_the_report_holds_every_run_and_loads_nothing_from_the_network(tmp_path, tiny_pair, capsys):
    trace = load_trace(DatasetSpec("synthetic"), tiny_pair, 4, seed=0, max_new_tokens=8)
    params = SamplingParams(max_new_tokens=8, seed=0)
    for name, engines in (("one", ("ar", "pdv")), ("two", ("baseline",))):
        plan = SweepPlan(engines, (ClosedLoop(2),), EngineConfig(), params)
        run_sweep(tiny_pair, trace, plan, tmp_path / name, meta=run_context(tiny_pair))
    out = tmp_path / "share" / "report.html"
    out.parent.mkdir()
    assert main([str(tmp_path / "one"), str(tmp_path / "two"), "--out", str(out)]) == 0
    page = out.read_text()
    assert re.findall(r"<script[^>]*\bsrc=", page) == []  # Plotly inline, no CDN
    assert page.count("<section") == 7 and "Plotly.newPlot" in page
    for label in ("one: ar · C=2", "one: pdv · C=2", "two: baseline · C=2"):
        assert label in page
    assert 'href="../one/requests.csv"' in page and 'href="../two/requests.csv"' in page
    assert page.count("<td>tiny</td>") == 3 and "Acceptance by draft position" in page  # the setup table


def test_a_directory_without_runs_is_one_clear_error(tmp_path, capsys):
    assert main([str(tmp_path), "--out", str(tmp_path / "r.html")]) == 2
    assert "is not a run directory" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()
