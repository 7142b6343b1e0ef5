"""The presentation room's figure builders on hand-made frames: colours, legends, axes, bins and ticks."""

from __future__ import annotations

import math

import pandas as pd
import pytest

from metrics.frames import position_frame, with_labels, with_mean_draft_length
from presentation import figures, palette
from tests.support.hand_frames import ENGINES, requests, series, summary, trace_colors


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


def test_mean_draft_length_is_drafted_tokens_per_verify_step_of_each_run():
    s = pd.DataFrame({"run_id": ["a", "b"], "engine": ["pdv", "ar"]})
    r = pd.DataFrame({"run_id": ["a", "a", "b"], "drafted_tokens": [8, 4, 0], "verify_steps": [2, 2, 0]})
    out = with_mean_draft_length(s, r)
    assert out.loc[0, "mean_draft_len"] == pytest.approx(3.0)
    assert math.isnan(out.loc[1, "mean_draft_len"])  # AR: no verify steps, so no draft length (not 0)


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
