"""The dashboard's pure helpers on hand-made frames: comparison tables, × AR, token pieces, step bars."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dashboard import comparison, tables
from dashboard.token_view import legend_html, pieces_html, token_pieces
from engine.request import Request, StepRecord
from presentation import figures, palette
from tests.support.hand_frames import summary


def test_speed_up_chart_draws_each_engine_over_ar_at_each_load_with_ar_as_the_line_at_one():
    s = pd.concat([summary(), summary().query("engine == 'pd'").assign(engine="ar", output_tok_s=[20.0, 5.0, 10.0])])
    fig = figures.speedup_vs_load(comparison.with_times_ar(s), "concurrency")
    assert [t.name for t in fig.data] == ["Baseline", "PD", "PDV"]
    for trace in fig.data:  # every engine makes 10 tok/s x C; AR 5, 10 and 20 at C = 1, 2, 4
        assert list(trace.x) == [1, 2, 4] and list(trace.y) == pytest.approx([2.0, 2.0, 2.0])
    assert [shape.y0 for shape in fig.layout.shapes] == [1.0]
    without_ar = figures.speedup_vs_load(comparison.with_times_ar(summary()), "concurrency")
    assert not without_ar.data and "switch AR on" in without_ar.layout.annotations[0].text


def test_times_ar_compares_runs_at_the_same_load_and_within_the_same_directory_only():
    s = pd.DataFrame({
        "directory": ["a", "a", "a", "b"], "engine": ["ar", "pdv", "pdv", "pdv"], "concurrency": [1, 1, 4, 1],
        "request_rate": [math.nan] * 4, "output_tok_s": [10.0, 15.0, 40.0, 30.0], "tpot_p50_ms": [100.0, 80.0, 5, 5],
        "tpot_p99_ms": [200.0, 300.0, 5, 5],
    })  # fmt: skip
    out = comparison.with_times_ar(s, within=["directory"])
    assert list(out["x_ar_tok_s"][:2]) == [1.0, 1.5] and list(out["x_ar_tpot_p50"][:2]) == [1.0, 0.8]
    assert out["x_ar_tpot_p99"][1] == 1.5
    assert out["x_ar_tok_s"][2:].isna().all()  # no AR run at C=4, none in directory b


def test_summary_table_has_human_headers_key_columns_first_and_dashes_for_what_does_not_apply():
    s = summary().assign(num_requests=4, completed=3, failed=1, goodput_req_s=math.nan, tpot_p50_ms=4.0,
                         ttft_p50_ms=30.0, mean_acceptance_length=1.5, mean_draft_len=3.0)  # fmt: skip
    s.loc[s["engine"] == "pd", "engine"] = "ar"
    s.loc[s["engine"] == "ar", ["acceptance_rate", "mean_acceptance_length", "mean_draft_len"]] = math.nan  # no draft
    s.loc[s["engine"] == "baseline", "output_tok_s"] *= 2  # twice AR's at every load
    key = list(comparison.summary_table(s).data.columns)
    # what a comparison is read by, and nothing else: the table fits a laptop's width
    assert key == ["Engine", "Load", "Output tok/s", "tok/s × AR", "TPOT p50 (ms)", "TTFT p50 (ms)", "Tokens / step",
                   "Draft L", "Acceptance"]  # fmt: skip
    assert list(comparison.summary_table(s).data["Load"][:3]) == ["C=4", "C=1", "C=2"]
    assert list(comparison.summary_table(s, columns=comparison.BY_RUN).data.columns)[:2] == ["Run", "Output tok/s"]
    styled = comparison.summary_table(s, columns=comparison.ALL)
    headers = list(styled.data.columns)
    assert headers[:8] == ["Run", "Engine", "Concurrency", "Requests ok", "Output tok/s", "tok/s × AR",
                           "TPOT p50 × AR", "TPOT p99 × AR"]  # fmt: skip
    assert "Request rate (req/s)" not in headers and "Goodput (req/s)" not in headers  # a closed loop, no SLOs
    assert not any("_" in h for h in headers)
    html = styled.to_html()
    assert "None" not in html and "nan" not in html and "—" in html  # AR's acceptance does not apply
    assert "2.00×" in html and "1.00×" in html and "3/4" in html


def test_live_comparison_is_one_column_per_engine_with_ratios_against_ar():
    from metrics.summary import RunSummary

    def run(engine, tok_s, tpot):
        return RunSummary("r", engine, 4, None, 8, 8, 0, 1.0, tok_s, 1.0, 10.0, 20.0, 30.0, tpot, tpot, tpot,
                          None, None, None, None, None if engine == "ar" else 0.5, None, None)  # fmt: skip

    table = comparison.comparison_table([run("ar", 20.0, 50.0), run("pdv", 30.0, 40.0), None], ["ar", "pdv", "pd"])
    assert list(table.columns) == ["AR", "PDV", "PD"]
    assert table.loc["tok/s × AR"].tolist() == ["1.00×", "1.50×", "—"]
    assert table.loc["TPOT p50 × AR"].tolist() == ["1.00×", "0.80×", "—"]
    assert table.loc["Acceptance"].tolist() == ["—", "0.50", "—"]


def test_step_bars_show_drafted_and_accepted_per_step():
    request = Request("r", [1, 2, 3])
    request.steps.extend([StepRecord(4, 4), StepRecord(4, 1), StepRecord(2, 0)])
    steps = tables.steps_frame(request.steps)
    fig = figures.step_bars(steps, "pdv")
    assert [t.name for t in fig.data] == ["drafted", "accepted"]
    assert list(fig.data[0].y) == [4, 4, 2] and list(fig.data[1].y) == [4, 1, 0]
    assert list(fig.data[0].x) == [1, 2, 3]
    assert fig.data[0].marker.color != fig.data[1].marker.color  # the two legend swatches differ


def test_token_pieces_join_to_the_full_text_and_hold_back_split_characters():
    text = "a é😀<b>"
    data = text.encode()

    def decode(ids: list[int]) -> str:
        return bytes(ids).decode("utf-8", errors="replace")

    kinds = [("accepted", "correction", "bonus")[i % 3] for i in range(len(data))]
    pieces = token_pieces(decode, list(data), kinds)
    assert "".join(p.text for p in pieces) == text
    assert sum(p.tokens for p in pieces) == len(data)
    emoji = next(p for p in pieces if p.text == "😀")
    assert emoji.tokens == 4 and emoji.kind == kinds[data.index("😀".encode()) + 3]
    html = pieces_html(pieces)
    assert "&lt;" in html and "&gt;" in html and "<b>" not in html
    assert all(label in legend_html() for label in palette.KIND_LABELS.values())


def test_token_pieces_refuse_mismatched_kinds():
    with pytest.raises(ValueError):
        token_pieces(lambda ids: "", [1, 2], ["first"])


def test_tile_text_marks_unmeasured_values():
    assert tables.fmt(None) == "—" and tables.fmt(math.nan) == "—"
    assert tables.fmt(1234.4, " ms") == "1,234 ms"
    assert tables.fmt(0.456, digits=2) == "0.46"


def test_a_panels_suffix_tree_line_gives_the_end_size_of_an_ended_run_and_the_latest_tokens_of_a_running_one():
    from dataclasses import replace

    from engine.suffix_tree import TreeSize
    from metrics.timeseries import TimeseriesRow
    from workloads.drivers.arrivals import ClosedLoop
    from workloads.drivers.live import RunSnapshot
    from workloads.drivers.run_state import RunState

    def row(tokens):
        values = {f: None for f in TimeseriesRow.__dataclass_fields__}
        return TimeseriesRow(**values | {"t_s": 1.0, "window_s": 0.25, "tokens_per_s": 0.0, "rss_mb": 1.0,
                                         "suffix_tree_tokens": tokens})  # fmt: skip

    running = replace(RunSnapshot.empty("pdv", ClosedLoop(2), RunState.RUNNING, 4), timeseries=(row(800), row(1234)))
    assert tables.suffix_tree_text(running) == "Suffix tree: 1,234 tokens so far"
    assert tables.suffix_tree_text(replace(running, timeseries=(row(None),))) is None  # drafts without a tree

    class Ended:  # the one field the line reads of a RunResult
        suffix_tree = TreeSize(tokens=24514, sequences=312, nodes=29855)

    ended = replace(running, result=Ended())
    assert tables.suffix_tree_text(ended) == "Suffix tree: 24,514 tokens in 312 outputs (29,855 nodes)"
