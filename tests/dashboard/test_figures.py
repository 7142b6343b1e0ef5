"""The dashboard's pure helpers on hand-made frames: figure builders, token pieces, draft-length table."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from dashboard import comparison, tables
from dashboard.token_view import legend_html, pieces_html, token_pieces
from engine.request import Request, StepRecord
from metrics.frames import position_frame, with_labels, with_mean_draft_length
from presentation import figures, palette

ENGINES = ("baseline", "pd", "pdv")


def series() -> pd.DataFrame:
    """Two windows per engine; lanes an engine lacks are NaN, as in timeseries.csv."""
    rows = []
    lanes = {"baseline": (None, None, None), "pd": (1, 2, None), "pdv": (1, 0, 3)}
    for engine in ENGINES:
        for t in (0.25, 0.5):
            prefill, decode, verify = lanes[engine]
            rows.append(
                {
                    "engine": engine,
                    "label": f"{engine} · C=4",
                    "t_s": t,
                    "tokens_per_s": 100.0 * (ENGINES.index(engine) + 1) + t,
                    "waiting": 2,
                    "queue_prefill": prefill,
                    "queue_decode": decode,
                    "queue_verify": verify,
                    "draft_len": 4,
                    "acceptance_rate": 0.5,
                    "gpu_util": math.nan,
                    "gpu_mem_util": math.nan,
                    "cpu_util": 90.0,
                    "rss_mb": 500.0,
                }
            )
    return pd.DataFrame(rows)


def requests() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "engine": ["baseline", "baseline", "pd", "pdv", "pdv"],
            "status": ["ok", "cancelled", "ok", "ok", "ok"],
            "ttft_ms": [10.0, 999.0, 12.0, 9.0, math.nan],
            "tpot_ms": [5.0, 5.0, 4.0, 3.0, 3.5],
        }
    )


def summary() -> pd.DataFrame:
    rows = []
    for engine in ENGINES:
        for c in (4, 1, 2):  # deliberately unsorted
            rows.append(
                {
                    "run_id": f"{engine}-c{c}",
                    "engine": engine,
                    "label": f"{engine} · C={c}",
                    "concurrency": c,
                    "request_rate": math.nan,
                    "output_tok_s": 10.0 * c,
                    "tpot_p95_ms": 5.0 + c,
                    "tpot_p99_ms": 6.0 + c,
                    "acceptance_rate": 0.5 if engine != "ar" else math.nan,
                }
            )
    return pd.DataFrame(rows)


def trace_colors(fig) -> dict[str, str]:
    """Legend group (or name) -> colour of every line or bar trace."""
    out = {}
    for trace in fig.data:
        color = trace.line.color if trace.type == "scatter" else trace.marker.color
        out[trace.legendgroup or trace.name] = color
    return out


def test_time_series_draw_one_trace_per_engine_in_the_engine_colour():
    ts = series()
    for fig in (
        figures.throughput_over_time(ts),
        figures.draft_length_over_time(ts),
        figures.acceptance_over_time(ts),
        figures.device_utilisation(ts),
    ):
        colors = trace_colors(fig)
        assert colors == {palette.engine_label(e): palette.ENGINE_COLORS[e] for e in ENGINES}, fig.layout.title.text
    raw = figures.throughput_over_time(ts, smooth_s=0)
    assert [list(t.y) for t in raw.data] == [[100.25, 100.5], [200.25, 200.5], [300.25, 300.5]]


def test_acceptance_is_drawn_per_window_not_as_an_average_of_ratios():
    ts = pd.DataFrame({"engine": "pd", "t_s": [0.25, 0.5, 0.75, 1.0], "acceptance_rate": [1.0, 0.0, math.nan, 0.0]})
    (trace,) = figures.acceptance_over_time(ts).data
    assert list(trace.y) == [1.0, 0.0, 0.0]  # a window that drafted nothing has no point


def test_throughput_is_smoothed_over_the_given_seconds_of_samples():
    ts = pd.DataFrame({"engine": "pd", "t_s": [0.25, 0.5, 0.75, 1.0, 1.25], "tokens_per_s": [0, 40, 0, 40, 0]})
    (line,) = figures.throughput_over_time(ts, smooth_s=0.5).data  # two samples per point
    assert list(line.y) == [0, 20, 20, 20, 20]
    assert list(line.x) == [0.25, 0.5, 0.75, 1.0, 1.25]


def test_grouping_by_run_label_keeps_the_engine_colour():
    ts = series()
    fig = figures.throughput_over_time(ts, group="label")
    assert [t.name for t in fig.data] == [f"{e} · C=4" for e in ENGINES]
    assert [t.line.color for t in fig.data] == [palette.ENGINE_COLORS[e] for e in ENGINES]


def test_engine_colours_are_distinct_and_unknown_engines_still_get_one():
    assert len(set(palette.ENGINE_COLORS.values())) == len(palette.ENGINE_COLORS) == 4
    assert palette.engine_color("someday") == palette.OTHER_COLOR


def test_latency_histogram_counts_completed_requests_only():
    fig = figures.latency_histogram(requests(), "ttft_ms", "TTFT")
    xs = {t.name: sorted(t.x) for t in fig.data}
    assert xs == {"Baseline": [10.0], "PD": [12.0], "PDV": [9.0]}  # cancelled and NaN rows left out
    assert [t.marker.color for t in fig.data] == [palette.ENGINE_COLORS[e] for e in ENGINES]


def test_latency_histograms_of_every_engine_share_one_set_of_bins():
    frame = pd.DataFrame({"engine": ["ar"] * 50 + ["pdv"] * 3, "status": "ok",
                          "ttft_ms": [float(i) for i in range(50)] + [400.0, 410.0, 420.0]})  # fmt: skip
    fig = figures.latency_histogram(frame, "ttft_ms", "TTFT")
    bins = [(t.xbins.start, t.xbins.end, t.xbins.size) for t in fig.data]
    assert len(bins) == 2 and bins[0] == bins[1]
    start, end, size = bins[0]
    assert start == 0 and end >= 420 and round((end - start) / size) == 20 and size == pytest.approx(21)


def test_queue_depths_draw_only_the_lanes_an_engine_has():
    ts = series()
    names = {e: [t.name for t in figures.queue_depths(ts, e).data] for e in ENGINES}
    assert names == {
        "baseline": ["admission"],
        "pd": ["admission", "prefill", "decode"],
        "pdv": ["admission", "prefill", "decode", "verify"],
    }
    assert {t.line.color for t in figures.queue_depths(ts, "pd").data} == {palette.ENGINE_COLORS["pd"]}


def test_a_one_line_queue_chart_keeps_its_legend_and_ar_says_it_has_no_queues():
    ts = series()
    baseline = figures.queue_depths(ts, "baseline")
    assert [t.name for t in baseline.data] == ["admission"] and baseline.layout.showlegend is True
    ar = figures.queue_depths(ts.assign(engine="ar"), "ar")
    assert ar.data == () and "no lane queues" in ar.layout.annotations[0].text


def test_legend_rows_count_each_entry_at_its_own_width():
    from presentation.figures.base import legend_rows

    assert legend_rows(["AR", "PD", "PDV", "Baseline"]) == 1
    # one long run name among short ones: not every entry as wide as the longest
    assert legend_rows(["runs/bench-20261125 · pdv c4", "AR", "PD"]) == 1
    assert legend_rows(["a very long run name of forty chars x" + str(i) for i in range(4)]) == 4


def test_device_chart_says_cpu_without_gpu_counters_and_gpu_with_them():
    ts = series()
    cpu = figures.device_utilisation(ts)
    assert "CPU" in cpu.layout.title.text and "no GPU" in cpu.layout.title.text
    assert {t.hovertemplate.split(":")[0].split(" ", 1)[1] for t in cpu.data} == {"CPU % of all cores", "RSS MiB"}
    # what 100 % means is on the axis; RSS has ticks of its own in whole MiB
    assert "100 = all its cores" in cpu.layout.yaxis.title.text
    assert cpu.layout.yaxis2.tickformat == ",.0f" and cpu.layout.yaxis2.tickmode is None
    gpu_ts = ts.assign(gpu_util=50.0, gpu_mem_util=20.0)
    gpu = figures.device_utilisation(gpu_ts)
    assert "GPU" in gpu.layout.title.text and "CPU" not in gpu.layout.title.text
    assert len(gpu.data) == 2 * len(ENGINES)


def test_metric_vs_load_sorts_by_load_and_dashes_the_second_metric():
    fig = figures.metric_vs_load(summary(), {"tpot_p95_ms": "p95", "tpot_p99_ms": "p99"}, "concurrency", "TPOT", "ms")
    assert len(fig.data) == 2 * len(ENGINES)
    first = fig.data[0]
    assert list(first.x) == [1, 2, 4] and list(first.y) == [6.0, 7.0, 9.0]
    assert {t.line.dash for t in fig.data} == {"solid", "dash"}
    for trace in fig.data:
        engine = trace.legendgroup
        assert trace.line.color == palette.ENGINE_COLORS[{v: k for k, v in palette.ENGINE_LABELS.items()}[engine]]


def test_an_all_at_once_rate_keeps_its_point_on_the_rate_axis():
    rates = summary().assign(concurrency=math.nan)
    rates["request_rate"] = rates["run_id"].map(lambda r: {"c1": 1.0, "c2": 2.0, "c4": math.inf}[r.split("-")[1]])
    fig = figures.metric_vs_load(rates, {"output_tok_s": ""}, "request_rate", "Throughput", "tok/s")
    assert list(fig.data[0].x) == ["1", "2", "all at once"]  # a numeric axis would have dropped inf
    assert fig.layout.xaxis.type == "category" and list(fig.layout.xaxis.categoryarray) == ["1", "2", "all at once"]
    finite = figures.metric_vs_load(summary(), {"output_tok_s": ""}, "concurrency", "Throughput", "tok/s")
    assert finite.layout.xaxis.type != "category"


def test_summary_bars_colour_each_run_by_its_engine_and_later_runs_of_it_in_its_shades():
    s = summary()
    fig = figures.summary_bars(s, {"output_tok_s": "tok/s"}, "Throughput", "tok/s")
    assert list(fig.data[0].y) == list(s["label"]) and fig.data[0].orientation == "h"
    expected = [palette.run_style(e, i)["color"] for e in ENGINES for i in range(3)]  # three runs per engine
    assert list(fig.data[0].marker.color) == expected
    assert expected[0] == palette.ENGINE_COLORS["baseline"] and len(set(expected)) == len(expected)
    assert fig.layout.showlegend is False


def test_percentile_bars_differ_by_fill_pattern_which_the_legend_shows():
    s = summary()
    fig = figures.summary_bars(s, {"tpot_p95_ms": "p95", "tpot_p99_ms": "p99"}, "TPOT", "ms")
    assert [t.name for t in fig.data] == ["p95", "p99"] and fig.layout.showlegend is True
    assert [t.marker.pattern.shape for t in fig.data] == ["", "/"]
    assert list(fig.data[1].x) == list(s["tpot_p99_ms"])
    many = figures.summary_bars(pd.concat([s] * 4), {"tpot_p95_ms": "p95"}, "TPOT", "ms")
    assert many.layout.height > fig.layout.height  # each run keeps its row


def test_several_runs_of_one_engine_keep_its_hue_in_distinct_shades_and_dashes():
    ts = pd.concat([series().assign(label=series()["label"] + f" #{i}") for i in range(3)], ignore_index=True)
    fig = figures.throughput_over_time(ts, group="label")
    pd_lines = [t.line for t in fig.data if t.name.startswith("pd ·")]
    assert len(pd_lines) == 3 and pd_lines[0].color == palette.ENGINE_COLORS["pd"]
    assert len({line.color for line in pd_lines}) == 3 and len({line.dash for line in pd_lines}) == 3
    assert all(palette.run_style("pd", i)["color"] not in palette.ENGINE_COLORS.values() for i in (1, 2))


def test_legend_sits_between_the_title_and_the_plot_and_grows_the_figure():
    fig = figures.throughput_over_time(series())
    assert (fig.layout.title.yref, fig.layout.title.yanchor, fig.layout.title.automargin) == ("container", "top", True)
    legend = fig.layout.legend
    assert (legend.yref, legend.yanchor, legend.orientation, legend.maxheight) == ("container", "top", "h", 1)
    title_band = (1 - legend.y) * fig.layout.height
    assert title_band >= 30 and fig.layout.margin.t >= title_band + 28  # the legend's band lies under the title
    labelled = pd.concat([series().assign(label=lambda f, i=i: f["label"] + f" #{i}") for i in range(4)])
    assert figures.throughput_over_time(labelled, group="label").layout.height > fig.layout.height  # 12 entries


def test_lines_that_may_lie_on_each_other_are_drawn_widest_first():
    fig = figures.draft_length_over_time(series())  # every engine at L = 4: one line on top of the others
    widths = [t.line.width for t in fig.data]
    assert widths == sorted(widths, reverse=True) and len(set(widths)) == len(ENGINES)


def test_concurrency_ticks_are_the_loads_and_the_axis_is_logarithmic_across_a_decade():
    fig = figures.metric_vs_load(summary(), {"output_tok_s": ""}, "concurrency", "Throughput", "tok/s")
    assert list(fig.layout.xaxis.tickvals) == [1, 2, 4] and fig.layout.xaxis.type == "linear"
    wide = summary().assign(concurrency=lambda f: f["concurrency"].map({1: 1, 2: 4, 4: 16}))
    fig = figures.metric_vs_load(wide, {"output_tok_s": ""}, "concurrency", "Throughput", "tok/s")
    assert list(fig.layout.xaxis.tickvals) == [1, 4, 16] and list(fig.layout.xaxis.ticktext) == ["1", "4", "16"]
    assert fig.layout.xaxis.type == "log"
    assert len({t.marker.symbol for t in fig.data}) == len(ENGINES)  # engines that agree are still told apart


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


def test_cdf_lines_one_per_label():
    cdf = pd.DataFrame(
        {"label": ["a", "a", "b"], "engine": ["pd", "pd", "pdv"], "value": [1.0, 2.0, 3.0], "fraction": [0.5, 1, 1]}
    )
    fig = figures.cdf_lines(cdf, "TTFT", "ms")
    assert [t.name for t in fig.data] == ["a", "b"]
    assert [t.line.color for t in fig.data] == [palette.ENGINE_COLORS["pd"], palette.ENGINE_COLORS["pdv"]]


def test_acceptance_by_position_plots_accepted_per_draft_step_and_nan_for_files_without_draft_counts():
    new = {"run_id": "n", "engine": "pdv", "position_acceptance": [
        {"position": 1, "drafted": 5, "accepted": 4, "drafts": 5},
        {"position": 2, "drafted": 4, "accepted": 2, "drafts": 5},
        {"position": 3, "drafted": 2, "accepted": 1, "drafts": 5},
    ]}  # fmt: skip
    old = {"run_id": "o", "engine": "pd", "position_acceptance": [{"position": 1, "drafted": 4, "accepted": 3}]}
    ar = {"run_id": "a", "engine": "ar", "position_acceptance": []}
    runs_summary = pd.DataFrame({"run_id": ["n", "o", "a"], "engine": ["pdv", "pd", "ar"],
                                 "concurrency": [1, 1, 1], "request_rate": [math.nan] * 3})  # fmt: skip
    frame = with_labels(position_frame([new, old, ar]), runs_summary)
    fig = figures.acceptance_by_position(frame)
    fresh, stale = fig.data
    assert fresh.name == "pdv · C=1" and fresh.line.color == palette.ENGINE_COLORS["pdv"]
    assert list(fresh.x) == [1, 2, 3]
    assert list(fresh.y) == pytest.approx([4 / 5, 2 / 5, 1 / 5])  # vLLM: accepted at k / draft steps
    assert [row[0] for row in fresh.customdata] == pytest.approx([4 / 5, 2 / 4, 1 / 2])  # P(accepted | drafted)
    assert "file without draft-step counts" in stale.name
    assert all(math.isnan(y) for y in stale.y)  # no per-draft value is made up for an old file
    assert fig.layout.xaxis.dtick == 1


def test_empty_frames_give_an_empty_chart_that_says_so():
    empty = series().iloc[0:0]
    for fig in (
        figures.throughput_over_time(empty),
        figures.queue_depths(empty, "pdv"),
        figures.device_utilisation(empty),
        figures.latency_histogram(requests().iloc[0:0], "ttft_ms", "TTFT"),
        figures.metric_vs_load(summary().iloc[0:0], {"output_tok_s": ""}, "concurrency", "x", "y"),
        figures.acceptance_by_position(position_frame([])),
    ):
        assert not fig.data
        assert fig.layout.annotations, fig.layout.title.text  # "waiting for data" / "no finished runs yet"


def test_step_bars_show_drafted_and_accepted_per_step():
    request = Request("r", [1, 2, 3])
    request.steps.extend([StepRecord(4, 4), StepRecord(4, 1), StepRecord(2, 0)])
    steps = tables.steps_frame(request)
    fig = figures.step_bars(steps, "pdv")
    assert [t.name for t in fig.data] == ["drafted", "accepted"]
    assert list(fig.data[0].y) == [4, 4, 2] and list(fig.data[1].y) == [4, 1, 0]
    assert list(fig.data[0].x) == [1, 2, 3]
    assert fig.data[0].marker.color != fig.data[1].marker.color  # the two legend swatches differ


def test_mean_draft_length_is_drafted_tokens_per_verify_step_of_each_run():
    s = pd.DataFrame({"run_id": ["a", "b"], "engine": ["pdv", "ar"]})
    r = pd.DataFrame({"run_id": ["a", "a", "b"], "drafted_tokens": [8, 4, 0], "verify_steps": [2, 2, 0]})
    out = with_mean_draft_length(s, r)
    assert out.loc[0, "mean_draft_len"] == pytest.approx(3.0)
    assert math.isnan(out.loc[1, "mean_draft_len"])  # AR: no verify steps, so no draft length (not 0)


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


def test_each_engines_speed_up_is_its_tokens_per_second_over_ars_in_the_same_view():
    from types import SimpleNamespace as NS

    from dashboard.tables import times_ar

    def run(engine, tok_s):
        return NS(engine=engine, summary=None if tok_s is None else NS(output_tok_s=tok_s))

    runs = [run("ar", 20.0), run("baseline", 27.0), run("pdv", None)]
    assert times_ar(runs) == {"ar": 1.0, "baseline": pytest.approx(1.35)}
    assert times_ar([run("baseline", 27.0), run("ar", None)]) == {}  # AR has no figure yet: nothing to compare


def test_draft_length_and_tokens_per_step_share_a_y_range_that_covers_both():
    s = summary().assign(mean_draft_len=[0.4, 0.8, 0.6] * 3, mean_acceptance_length=[1.3, 2.5, 1.9] * 3)
    fig = figures.metric_vs_load(
        s, {"mean_draft_len": "mean L", "mean_acceptance_length": "tokens/step"}, "concurrency", "L", "tokens"
    )
    drawn = [y for trace in fig.data for y in trace.y]
    assert max(drawn) == 2.5 and min(drawn) == 0.4
    low, high = fig.layout.yaxis.range
    assert low == 0 and high >= max(drawn)  # no line runs above the top of the axis
    s.loc[s["engine"] == "pd", "engine"] = "ar"
    speedup = figures.speedup_vs_load(s.assign(x_ar_tok_s=[0.3, 0.5, 0.4] * 3), "concurrency")
    assert speedup.layout.yaxis.range[1] >= 1.0  # AR's line at 1.0 stays in view


@pytest.mark.parametrize("highest", [0.81, 1.0, 2.6, 2.51, 7.3, 14.0])
def test_the_top_tick_of_a_load_chart_is_at_or_above_every_line(highest):
    # ticks Plotly picks itself stop at 2.5 on a 0-2.86 axis: a tokens/step line at 2.6 would run past the top tick
    s = summary().assign(mean_draft_len=[0.4, 0.8, 0.6] * 3, mean_acceptance_length=[1.0, highest / 2, highest] * 3)
    fig = figures.metric_vs_load(
        s, {"mean_draft_len": "mean L", "mean_acceptance_length": "tokens/step"}, "concurrency", "L", "tokens"
    )
    axis = fig.layout.yaxis
    assert axis.tickmode == "linear" and axis.tick0 == 0 and axis.dtick > 0
    low, high = axis.range
    ticks = [k * axis.dtick for k in range(int(high / axis.dtick) + 1)]
    drawn = max(0.8, 1.0, highest)
    assert low == 0 and ticks[-1] >= drawn - 1e-9, (ticks, drawn)
    assert 3 <= len(ticks) <= 7  # a readable number of ticks, not one per hundredth
