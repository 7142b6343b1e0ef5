"""Figures of run directories for the shareable HTML report (``python -m workloads report``).

Inputs are the frames ``metrics.runs.load_run_dir`` reads (``metrics.schema``
columns) with a ``label`` per run, ``metrics.frames.position_frame``, and the
line style of each run (``run_styles``): every run takes its engine's colour
from ``presentation.palette``, and several runs of one engine keep that hue in
shades and dashes, so twelve lines stay twelve readable lines. Legends sit
beside the plot, never over a title or an axis. Every figure is a plain Plotly
figure; the report inlines Plotly's script once, so the page opens offline.
"""

from __future__ import annotations

from collections import Counter

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from presentation.palette import engine_color, engine_label, run_style

LANES = {"waiting": "admission", "queue_prefill": "prefill", "queue_decode": "decode", "queue_verify": "verify"}
PERCENTILES = {"p50": "circle", "p95": "diamond", "p99": "square"}  # marker symbol of each percentile
HEIGHT = 380
ROW_PX = 22  # height of one run's row on the per-run charts


def run_styles(summary: pd.DataFrame) -> dict[str, dict[str, str]]:
    """label -> line colour and dash: the nth run of an engine in ``summary`` order gets ``run_style(engine, n)``."""
    seen: Counter[str] = Counter()
    styles = {}
    for engine, label in zip(summary["engine"], summary["label"], strict=True):
        styles[str(label)] = run_style(str(engine), seen[str(engine)])
        seen[str(engine)] += 1
    return styles


def _by_run(frame: pd.DataFrame, styles: dict[str, dict[str, str]]) -> list[tuple[str, pd.DataFrame]]:
    """(label, rows) per run in ``frame``, in the order of ``styles`` (the summary table's), so legends match it."""
    groups = {str(label): rows for label, rows in frame.groupby(frame["label"].astype(str), sort=False)}
    rank = {label: i for i, label in enumerate(styles)}
    return sorted(groups.items(), key=lambda item: rank.get(item[0], len(rank)))


def _figure(title: str, x_title: str, y_title: str, height: int = HEIGHT) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        title=title, template="plotly_white", height=height, margin={"t": 60, "b": 50, "l": 60, "r": 20},
        legend={"x": 1.02, "y": 1, "xanchor": "left", "yanchor": "top"},
    )  # fmt: skip
    fig.update_xaxes(title=x_title)
    fig.update_yaxes(title=y_title)
    return fig


def _runs_height(n: int) -> int:
    return max(HEIGHT, 120 + ROW_PX * n)


def _run_bars(rows: pd.DataFrame, column: str, fmt: str, title: str, x_title: str) -> go.Figure:
    """``column`` of each run in ``rows``: one horizontal bar per run in its engine's colour, the value at its end,
    top down in the table's order."""
    fig = _figure(title, x_title, "", _runs_height(len(rows)))
    fig.add_trace(
        go.Bar(
            y=rows["label"].astype(str), x=rows[column], orientation="h", showlegend=False,
            marker_color=[engine_color(e) for e in rows["engine"]],
            text=[fmt.format(v) for v in rows[column]], textposition="outside", cliponaxis=False,
        )
    )  # fmt: skip
    fig.update_yaxes(autorange="reversed")
    return fig


def throughput_bars(summary: pd.DataFrame) -> go.Figure:
    """Output tokens/s of each run."""
    return _run_bars(summary, "output_tok_s", "{:,.1f}", "Output tokens/s per run", "output tokens/s")


def speedup_bars(summary: pd.DataFrame) -> go.Figure:
    """Each run's output tokens/s over AR's at the same load (``x_ar_tok_s``), with a line at 1 (as fast as AR)."""
    rows = summary.dropna(subset=["x_ar_tok_s"])
    title, x_title = "Output tokens/s × AR at the same load", "× AR (above 1: faster than AR)"
    fig = _run_bars(rows, "x_ar_tok_s", "{:.2f}×", title, x_title)
    fig.add_vline(x=1.0, line_dash="dash", line_color="#333")
    return fig


def latency_percentiles(summary: pd.DataFrame, metric: str) -> go.Figure:
    """p50, p95 and p99 of ``metric`` (``ttft`` or ``tpot``) per run: a row per run, a marker shape per percentile."""
    fig = _figure(f"{metric.upper()} percentiles per run", "milliseconds", "", _runs_height(len(summary)))
    labels = summary["label"].astype(str)
    colors = [engine_color(e) for e in summary["engine"]]  # each row is named: the engine's own colour suffices
    low, high = summary[f"{metric}_p50_ms"], summary[f"{metric}_p99_ms"]
    for label, lo, hi, color in zip(labels, low, high, colors, strict=True):  # the p50–p99 span of each run
        fig.add_trace(go.Scatter(x=[lo, hi], y=[label, label], mode="lines", line={"color": color}, showlegend=False))
    for q, symbol in PERCENTILES.items():
        marker = {"symbol": symbol, "size": 9, "color": colors, "line": {"width": 1, "color": "#333"}}
        fig.add_trace(go.Scatter(x=summary[f"{metric}_{q}_ms"], y=labels, mode="markers", marker=marker, name=q))
        fig.data[-1].showlegend = False
        # the legend shows the shape alone, in a neutral grey: the colour is the run's engine
        fig.add_trace(
            go.Scatter(x=[None], y=[None], mode="markers", name=q, marker={"symbol": symbol, "color": "#555"})
        )
    fig.update_yaxes(autorange="reversed")
    return fig


def over_time(
    ts: pd.DataFrame,
    column: str,
    title: str,
    y_title: str,
    styles: dict[str, dict[str, str]],
    x: str = "t_s",
    x_title: str = "seconds since the run started",
) -> go.Figure:
    """``column`` against ``x`` (by default seconds since each run started): one panel per engine (so a dozen
    runs do not tangle), one line per run in its engine's colour, each repeat in its own shade and dash."""
    data = ts.dropna(subset=[column])
    engines = list(dict.fromkeys(data["engine"].astype(str)))
    if not engines:
        return _figure(f"{title} (no run recorded it)", x_title, y_title)
    fig = make_subplots(
        rows=len(engines), cols=1, shared_xaxes=True, shared_yaxes=True, vertical_spacing=0.08,
        subplot_titles=[engine_label(e) for e in engines],
    )  # fmt: skip
    for row, engine in enumerate(engines, start=1):
        for label, g in _by_run(data[data["engine"].astype(str) == engine], styles):
            line = styles.get(str(label), {})
            fig.add_trace(go.Scatter(x=g[x], y=g[column], name=str(label), mode="lines", line=line), row=row, col=1)
        fig.update_yaxes(title=y_title, row=row, col=1)
    fig.update_xaxes(title=x_title, row=len(engines), col=1)
    _panel_layout(fig, title, len(engines))
    return fig


def acceptance_so_far(requests: pd.DataFrame, styles: dict[str, dict[str, str]]) -> go.Figure:
    """Accepted / drafted over each run's requests finished so far, one panel per engine, one line per run.

    A rate per sampling window jumps between 0 and 1 when a window holds one
    verify step; the running rate over finished requests (summed in round, then
    finishing order) settles as they add up, as the dashboard draws it. Runs
    that drafted nothing (AR) have no line.
    """
    needed = {"drafted_tokens", "accepted_tokens", "finish_s", "round"}
    rows = requests[requests["drafted_tokens"] > 0] if needed <= set(requests) else requests.iloc[0:0]
    title, x_title, y_title = "Acceptance over the requests finished so far", "requests finished", "accepted / drafted"
    if rows.empty:
        return _figure(f"{title} (no run drafted)", x_title, y_title)
    running = []
    for _, g in rows.groupby(rows["label"].astype(str), sort=False):
        g = g.sort_values(["round", "finish_s"], kind="stable")
        rate = g["accepted_tokens"].cumsum() / g["drafted_tokens"].cumsum()
        running.append(g.assign(finished=range(1, len(g) + 1), running_acceptance=rate))
    fig = over_time(pd.concat(running), "running_acceptance", title, y_title, styles, x="finished", x_title=x_title)
    fig.update_yaxes(range=[0, 1.05])
    return fig


def _panel_layout(fig: go.Figure, title: str, panels: int) -> None:
    fig.update_layout(
        title=title, template="plotly_white", height=120 + 170 * panels, margin={"t": 80, "b": 50, "l": 60, "r": 20},
        legend={"x": 1.02, "y": 1, "xanchor": "left", "yanchor": "top"},
    )  # fmt: skip


def queue_depths(ts: pd.DataFrame, styles: dict[str, dict[str, str]]) -> go.Figure:
    """Each lane's queue depth over time, one panel per lane some run has, one line per run."""
    lanes = {c: lane for c, lane in LANES.items() if c in ts and ts[c].notna().any()}
    if not lanes:
        return _figure("Lanes' queue depth (no run recorded queues)", "seconds since the run started", "")
    fig = make_subplots(
        rows=len(lanes), cols=1, shared_xaxes=True, vertical_spacing=0.06,
        subplot_titles=[f"{lane} queue" for lane in lanes.values()],
    )  # fmt: skip
    shown: set[str] = set()
    for row, column in enumerate(lanes, start=1):
        for label, g in _by_run(ts.dropna(subset=[column]), styles):
            name = str(label)
            line = styles.get(name, {})
            trace = go.Scatter(
                x=g["t_s"], y=g[column], name=name, mode="lines", line=line,
                legendgroup=name, showlegend=name not in shown,  # one legend entry per run, in its first panel
            )  # fmt: skip
            fig.add_trace(trace, row=row, col=1)
            shown.add(name)
        fig.update_yaxes(title="queued", row=row, col=1)
    fig.update_xaxes(title="seconds since the run started", row=len(lanes), col=1)
    _panel_layout(fig, "Lanes' queue depth (requests or blocks waiting)", len(lanes))
    return fig


def acceptance_by_position(positions: pd.DataFrame, styles: dict[str, dict[str, str]]) -> go.Figure:
    """P(position k accepted | k drafted) per run and draft position."""
    fig = _figure("Acceptance by draft position", "draft position k", "accepted / drafted at k")
    for label, g in _by_run(positions, styles):
        style = styles.get(str(label), {})
        fig.add_trace(go.Scatter(x=g["position"], y=g["rate"], name=str(label), mode="lines+markers", line=style))
    fig.update_yaxes(range=[0, 1.02])
    fig.update_xaxes(dtick=1)
    return fig
