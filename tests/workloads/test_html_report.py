"""The shareable report: one self-contained HTML file with the runs' setup, summary, charts and CSV links."""

from __future__ import annotations

import html
import json
import re

import pandas as pd
import pytest

from engine.config import EngineConfig, SamplingParams
from presentation.palette import ENGINE_COLORS
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.environment import run_context
from workloads.drivers.run_spec import RunSettings
from workloads.drivers.sweep import SweepPlan, run_sweep
from workloads.drivers.trace import DatasetSpec, load_trace
from workloads.report.html import main


def summary_rows(page: str) -> tuple[list[str], dict[str, list[str]]]:
    """The summary table's headers, and its cells (as text) by run label."""
    table = page.split("<h2>Summary</h2>", 1)[1].split("</table>", 1)[0]
    text = lambda cell: html.unescape(re.sub(r"<[^>]+>", "", cell)).replace("●", "").strip()  # noqa: E731
    headers = [text(h) for h in re.findall(r"<th[^>]*>(.*?)</th>", table)]
    rows = {}
    for row in re.findall(r"<tr>(.*?)</tr>", table.split("<tbody>", 1)[1]):
        cells = [text(c) for c in re.findall(r"<td[^>]*>(.*?)</td>", row)]
        rows[cells[0]] = cells
    return headers, rows


@pytest.fixture(scope="module")
def report(tmp_path_factory, tiny_pair):
    """Runs of AR and PDV in one directory, Baseline alone in another, and the report of both one folder down."""
    root = tmp_path_factory.mktemp("runs")
    trace = load_trace(DatasetSpec("synthetic"), tiny_pair, 4, seed=0, max_new_tokens=8)
    params = SamplingParams(max_new_tokens=8, seed=0)
    for name, engines in (("one", ("ar", "pdv")), ("two", ("baseline",))):
        plan = SweepPlan(engines, (ClosedLoop(2),), RunSettings(EngineConfig(), params), rounds=3)
        run_sweep(tiny_pair, trace, plan, root / name, run_context(tiny_pair))
    out = root / "share" / "report.html"
    out.parent.mkdir()
    assert main([str(root / "one"), str(root / "two"), "--out", str(out)]) == 0
    return root, out.read_text()


def test_the_report_holds_every_run_and_loads_nothing_from_the_network(report):
    _, page = report
    assert re.findall(r"<script[^>]*\bsrc=", page) == []  # Plotly inline, no CDN
    markup = re.sub(r"<script[^>]*>.*?</script>", "", page, flags=re.S)  # Plotly's own code holds URLs as strings
    assert re.findall(r"\b(?:src|href)=[\"']?(?:https?:)?//", markup) == []
    assert page.count("<section") == 8 and page.count("Plotly.newPlot") == 8
    for label in ("one: AR · C=2", "one: PDV · C=2", "two: Baseline · C=2"):
        assert label in page
    # the CSV links are relative to the report's folder, shown as such, and the page says why
    assert '<a href="../one/requests.csv">../one/requests.csv</a>' in page
    assert 'href="../two/requests.csv"' in page and "Relative links open from this report's folder" in page
    common = page.split("Common to every run", 1)[1].split("</table>", 1)[0]
    assert "<th class='t'>Models</th><td class='t'>tiny</td>" in common  # shared setup shown once
    assert "Acceptance by draft position" in page and "What the columns mean" in page


def test_the_summary_has_human_headers_units_and_no_internal_names(report):
    _, page = report
    headers, rows = summary_rows(page)
    assert headers[:3] == ["Run", "Requests ok", "Output tok/s"]  # key columns first
    assert {"TTFT p50 (ms)", "TPOT p99 (ms)", "Tokens / step", "E2E p99 (s)"} <= set(headers)
    assert not [h for h in headers if "_" in h]  # no ttft_p50_ms, output_tok_s, mean_acceptance_length
    ar = rows["one: AR · C=2"]
    assert ar[headers.index("Tokens / step")] == "—"  # AR has no verify steps: not applicable, not "nan"
    assert re.fullmatch(r"\d{1,3}(,\d{3})*\.\d", rows["one: PDV · C=2"][headers.index("Output tok/s")])  # rounded


def test_each_run_is_drawn_in_its_engines_colour(report):
    _, page = report
    for engine, label in (("ar", "one: AR"), ("pdv", "one: PDV"), ("baseline", "two: Baseline")):
        assert f'<span class="dot" style="color:{ENGINE_COLORS[engine]}">●</span> {label} · C=2' in page
    throughput = page.split('id="fig-throughput"', 1)[1].split("</script>", 1)[0]
    bars = re.search(r'"marker":\{"color":\[([^\]]*)\]', throughput).group(1)
    assert bars == ",".join(f'"{ENGINE_COLORS[e]}"' for e in ("ar", "pdv", "baseline"))  # not Plotly's colorway


def test_every_run_is_set_against_ar_at_the_same_load_in_its_directory(report):
    root, page = report
    headers, rows = summary_rows(page)
    times_ar = headers.index("tok/s × AR")
    assert {"TPOT p50 × AR", "TPOT p99 × AR"} <= set(headers)
    summary = pd.read_csv(root / "one" / "summary.csv").set_index("engine")
    assert rows["one: AR · C=2"][times_ar] == "1.00× (1.00–1.00)"
    pdv = summary.loc["pdv"]  # the median over rounds of each round's ratio to AR, with the rounds' min–max
    assert rows["one: PDV · C=2"][times_ar] == (
        f"{pdv['tok_s_x_ar']:.2f}× ({pdv['tok_s_x_ar_lo']:.2f}–{pdv['tok_s_x_ar_hi']:.2f})"
    )
    assert rows["two: Baseline · C=2"][times_ar] == "—"  # no AR run in its directory
    assert 'id="fig-times-ar"' in page
    # the comparison's verdict, as run.json keeps it, on top of the summary
    verdict = json.loads((root / "one" / "run.json").read_text())["runs"][0]["verdict"]
    assert page.index("<h2>Verdict</h2>") < page.index("<h2>Summary</h2>")
    assert f"<li><strong>one · C=2:</strong> {html.escape(verdict)}" in page


def test_a_directory_without_runs_is_one_clear_error(tmp_path, capsys):
    assert main([str(tmp_path), "--out", str(tmp_path / "r.html")]) == 2
    assert "is not a run directory" in capsys.readouterr().err
    assert not (tmp_path / "r.html").exists()


def test_acceptance_is_drawn_as_the_running_rate_over_finished_requests_round_by_round():
    from presentation.report_figures import acceptance_so_far

    requests = pd.DataFrame(
        {
            "label": ["PDV · C=2", "PDV · C=2", "PDV · C=2", "AR · C=2"],
            "engine": ["pdv", "pdv", "pdv", "ar"],
            "round": [2, 1, 1, 1],
            "finish_s": [0.5, 2.0, 1.0, 1.0],
            "drafted_tokens": [4, 4, 2, 0],
            "accepted_tokens": [0, 4, 1, 0],
        }
    )
    (line,) = acceptance_so_far(requests, {"PDV · C=2": {}, "AR · C=2": {}}).data  # AR drafts nothing: no line
    assert line.name == "PDV · C=2" and list(line.x) == [1, 2, 3]
    # round 1 in finishing order (1/2, then 5/6), then round 2 (5/10): sums of counts, not a mean of ratios
    assert list(line.y) == pytest.approx([0.5, 5 / 6, 0.5])
