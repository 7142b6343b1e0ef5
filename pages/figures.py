"""Pure Plotly figure builders: a DataFrame in, a ``go.Figure`` out, nothing else touched.

Every chart of the dashboard is built here, so every chart colours an engine
the same way (``ENGINE_COLORS``, defined once) and the builders can be tested
on hand-made frames. A builder draws one trace per value of its ``group``
column (by default ``engine``; the Runs page groups by run ``label``) and takes
that trace's colour from the group's engine. Column names are those of
``metrics.schema`` (timeseries, requests, summary).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go

ENGINE_COLORS = {"ar": "#7F7F7F", "baseline": "#4C78A8", "pd": "#F58518", "pdv": "#54A24B"}
ENGINE_LABELS = {"ar": "AR", "baseline": "Baseline", "pd": "PD", "pdv": "PDV"}
OTHER_COLOR = "#B279A2"  # an engine this dashboard does not know yet

# token kinds of engine.request.TokenKind, as the Inspect page paints them
KIND_COLORS = {
    "accepted": "#B7E4B0",  # drafted and kept: speculation paid off
    "correction": "#F7B6A8",  # the verifier's token at the first rejected position
    "bonus": "#C9B8F0",  # the verifier's extra token after a fully accepted draft
    "first": "#D9D9D9",  # sampled by the verifier at the end of prefill
    "decode": "#DCE8F5",  # plain verifier step (AR, or L = 0)
}
KIND_LABELS = {
    "accepted": "accepted draft token",
    "correction": "correction",
    "bonus": "bonus",
    "first": "first token",
    "decode": "decode (no draft)",
}
LANE_DASH = {"waiting": "dot", "queue_prefill": "dash", "queue_decode": "solid", "queue_verify": "dashdot"}
LANE_LABELS = {
    "waiting": "admission",
    "queue_prefill": "prefill",
    "queue_decode": "decode",
    "queue_verify": "verify",
}
HEIGHT = 320


def engine_color(engine: str) -> str:
    return ENGINE_COLORS.get(str(engine), OTHER_COLOR)


def engine_label(engine: str) -> str:
    return ENGINE_LABELS.get(str(engine), str(engine))


def _figure(title: str, x_title: str, y_title: str, height: int = HEIGHT) -> go.Figure:
    fig = go.Figure()
    _style(fig, title, x_title, y_title, height)
    return fig


def _style(fig: go.Figure, title: str, x_title: str, y_title: str, height: int = HEIGHT) -> None:
    fig.update_layout(
        title={"text": title, "font": {"size": 15}},
        height=height,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        # the legend shares the title's row, on the right: below the plot it would cover the x-axis title
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1},
        xaxis_title=x_title,
        yaxis_title=y_title,
    )


def _legend(fig: go.Figure) -> go.Figure:
    """Up to three legend entries fit beside the title; more go under the plot (they would cover the title)."""
    entries = sum(1 for t in fig.data if t.showlegend is not False)
    if entries > 3:
        fig.update_layout(
            legend={"yanchor": "top", "y": -0.3, "xanchor": "left", "x": 0}, height=fig.layout.height + 50
        )
    return fig


def _waiting(fig: go.Figure, message: str = "waiting for data") -> go.Figure:
    fig.add_annotation(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def _groups(df: pd.DataFrame, group: str) -> list[tuple[str, str, pd.DataFrame]]:
    """(trace name, engine, rows) per group, in order of first appearance."""
    out = []
    for key, rows in df.groupby(group, sort=False):
        engine = str(rows["engine"].iloc[0])
        name = engine_label(engine) if group == "engine" else str(key)
        out.append((name, engine, rows))
    return out


def line_over_time(
    ts: pd.DataFrame,
    column: str,
    title: str,
    y_title: str,
    group: str = "engine",
    shape: str = "linear",
    smooth_s: float = 0.0,
) -> go.Figure:
    """One line per group of ``column`` against ``t_s`` (seconds since the run's start).

    ``smooth_s`` > 0 draws a moving average over that many seconds of samples: at a few
    hertz, a window without a finished step reads 0 and the raw line is mostly spikes.
    """
    fig = _figure(title, "seconds since the run started", y_title)
    rows = ts.dropna(subset=[column]) if column in ts else ts.iloc[0:0]
    if rows.empty:
        return _waiting(fig)
    for name, engine, g in _groups(rows, group):
        y = g[column]
        if smooth_s > 0 and len(g) > 1:
            period = float(g["t_s"].diff().median())
            y = y.rolling(max(1, round(smooth_s / period)), min_periods=1).mean()
        fig.add_trace(
            go.Scatter(
                x=g["t_s"],
                y=y,
                name=name,
                mode="lines+markers" if len(g) < 4 else "lines",
                line={"color": engine_color(engine), "shape": shape},
                legendgroup=name,
            )
        )
    return _legend(fig)


def throughput_over_time(ts: pd.DataFrame, group: str = "engine", smooth_s: float = 2.0) -> go.Figure:
    title = f"Throughput ({smooth_s:g} s moving average)" if smooth_s else "Throughput"
    return line_over_time(ts, "tokens_per_s", title, "output tokens / s", group, smooth_s=smooth_s)


def draft_length_over_time(ts: pd.DataFrame, group: str = "engine") -> go.Figure:
    return line_over_time(ts, "draft_len", "Draft length L", "tokens drafted per step", group, shape="hv")


def acceptance_over_time(ts: pd.DataFrame, group: str = "engine") -> go.Figure:
    # per sampling window, unsmoothed: the samples hold each window's ratio, not its counts, and a moving
    # average of ratios would weigh a window with one drafted token like one with fifty
    title = "Acceptance per sampling window"
    fig = line_over_time(ts, "acceptance_rate", title, "accepted / drafted", group)
    if fig.data:
        fig.update_yaxes(range=[0, 1.05])
    return fig


def latency_histogram(requests: pd.DataFrame, column: str, title: str) -> go.Figure:
    """Overlaid histograms of a request column (ms), one per engine; completed requests only."""
    fig = _figure(title, "milliseconds", "requests")
    rows = requests.dropna(subset=[column]) if column in requests else requests.iloc[0:0]
    if "status" in rows:
        rows = rows[rows["status"] == "ok"]
    if rows.empty:
        return _waiting(fig)
    # one set of 20 bins for every engine, so that bar heights compare across engines
    lo, hi = float(rows[column].min()), float(rows[column].max())
    size = (hi - lo) / 20 * (1 + 1e-9) if hi > lo else 1.0  # a hair wider, so the largest value is in bin 20
    bins = {"start": lo, "end": lo + 20 * size, "size": size}
    for name, engine, g in _groups(rows, "engine"):
        fig.add_trace(
            go.Histogram(
                x=g[column], name=name, marker={"color": engine_color(engine)}, opacity=0.65, xbins=bins, bingroup=1
            )
        )
    fig.update_layout(barmode="overlay")
    return _legend(fig)


def queue_depths(ts: pd.DataFrame, engine: str) -> go.Figure:
    """One engine's queues over time: admission (``waiting``) and every lane it has."""
    fig = _figure(f"{engine_label(engine)} queues", "seconds since the run started", "items queued", height=240)
    rows = ts[ts["engine"] == engine] if "engine" in ts else ts.iloc[0:0]
    present = [c for c in LANE_DASH if c in rows and rows[c].notna().any()]
    if rows.empty or not present:
        return _waiting(fig)
    for column in present:
        fig.add_trace(
            go.Scatter(
                x=rows["t_s"],
                y=rows[column],
                name=LANE_LABELS[column],
                mode="lines",
                line={"color": engine_color(engine), "dash": LANE_DASH[column], "shape": "hv"},
            )
        )
    fig.update_yaxes(rangemode="tozero")
    return _legend(fig)


def device_utilisation(ts: pd.DataFrame, group: str = "engine") -> go.Figure:
    """GPU SM and memory use when measured (NVML); otherwise this process's CPU % and RSS (right axis).

    One legend entry per group: the first series is solid, the second dotted (the axis titles say which).
    """
    on_gpu = "gpu_util" in ts and ts["gpu_util"].notna().any()
    x_title = "seconds since the run started"
    if on_gpu:
        fig = _figure("GPU utilisation (NVML)", x_title, "SM % (solid), memory % (dotted)")
        series = (("gpu_util", "SM %", "solid", "y"), ("gpu_mem_util", "memory %", "dot", "y"))
    else:
        fig = _figure("CPU and RSS of this process (no GPU)", x_title, "CPU % (solid)")
        series = (("cpu_util", "CPU %", "solid", "y"), ("rss_mb", "RSS MiB", "dot", "y2"))
        fig.update_layout(yaxis2={"title": {"text": "RSS MiB (dotted)"}, "overlaying": "y", "side": "right"})
    drawn = 0
    for i, (column, what, dash, axis) in enumerate(series):
        rows = ts.dropna(subset=[column]) if column in ts else ts.iloc[0:0]
        for name, engine, g in _groups(rows, group) if not rows.empty else []:
            fig.add_trace(
                go.Scatter(
                    x=g["t_s"],
                    y=g[column],
                    yaxis=axis,
                    name=name,
                    mode="lines",
                    line={"color": engine_color(engine), "dash": dash},
                    legendgroup=name,
                    showlegend=i == 0,
                    hovertemplate=f"{name} {what}: %{{y:.1f}}<extra></extra>",
                )
            )
            drawn += 1
    # percentages are 0..100 by definition; a single mis-measured window must not squash the rest
    fig.update_layout(yaxis={"range": [0, 105]})
    return _legend(fig) if drawn else _waiting(fig)


def metric_vs_load(summary: pd.DataFrame, metrics: Mapping[str, str], x: str, title: str, y_title: str) -> go.Figure:
    """Summary metrics against the load (``concurrency`` or ``request_rate``): one line per engine and metric.

    ``metrics`` maps column -> legend suffix (e.g. ``{"tpot_p95_ms": "p95"}``); a second metric is dashed.
    """
    x_title = "concurrency (requests in flight)" if x == "concurrency" else "request rate (requests / s)"
    fig = _figure(title, x_title, y_title)
    fig.update_yaxes(rangemode="tozero")
    loads = summary[x].dropna().unique() if x in summary else []
    # an infinite rate ("all at once") has no place on a numeric axis, and Plotly would drop it silently
    categorical = any(math.isinf(v) for v in loads)
    if categorical:
        order = [_load_text(v) for v in sorted(loads)]
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=order)
    dashes = ("solid", "dash", "dot", "dashdot")
    drawn = 0
    for name, engine, g in _groups(summary, "engine") if not summary.empty else []:
        g = g.sort_values(x)
        for (column, suffix), dash in zip(metrics.items(), dashes, strict=False):
            if column not in g or g[column].isna().all():
                continue
            label = f"{name} {suffix}".strip()
            fig.add_trace(
                go.Scatter(
                    x=g[x].map(_load_text) if categorical else g[x],
                    y=g[column],
                    name=label,
                    mode="lines+markers",
                    line={"color": engine_color(engine), "dash": dash},
                    legendgroup=name,
                )
            )
            drawn += 1
    return _legend(fig) if drawn else _waiting(fig, "no finished runs yet")


def _load_text(value: float) -> str:
    return "all at once" if math.isinf(value) else f"{value:g}"


def summary_bars(summary: pd.DataFrame, metrics: Mapping[str, str], title: str, y_title: str) -> go.Figure:
    """Grouped bars: one bar per run (``label``) and metric, coloured by engine; later metrics lighter."""
    fig = _figure(title, "", y_title)
    opacities = (1.0, 0.7, 0.45)
    for (column, suffix), opacity in zip(metrics.items(), opacities, strict=False):
        if column not in summary:
            continue
        fig.add_trace(
            go.Bar(
                x=summary["label"],
                y=summary[column],
                name=suffix,
                marker={"color": [engine_color(e) for e in summary["engine"]], "opacity": opacity},
                text=[suffix] * len(summary),
                textposition="none",
                hovertemplate="%{x}<br>" + suffix + ": %{y:.2f}<extra></extra>",
            )
        )
    if not fig.data or summary.empty:
        return _waiting(fig, "no runs selected")
    fig.update_layout(barmode="group", showlegend=len(metrics) > 1)
    return _legend(fig)


def cdf_lines(cdf: pd.DataFrame, title: str, x_title: str, group: str = "label") -> go.Figure:
    """Empirical CDFs (``metrics.frames.cdf`` plus a ``label``): one line per run."""
    fig = _figure(title, x_title, "share of requests")
    if cdf.empty:
        return _waiting(fig)
    for name, engine, g in _groups(cdf, group):
        fig.add_trace(
            go.Scatter(
                x=g["value"],
                y=g["fraction"],
                name=name,
                mode="lines",
                line={"color": engine_color(engine), "shape": "hv"},
            )
        )
    fig.update_yaxes(range=[0, 1.02])
    return _legend(fig)


def step_bars(steps: pd.DataFrame, engine: str) -> go.Figure:
    """Per verify step of one request: tokens drafted and how many the verifier accepted."""
    fig = _figure("Draft length and accepted tokens per verify step", "verify step", "tokens", height=280)
    if steps.empty:
        return _waiting(fig, "no verify steps (the AR engine does not draft)")
    color = engine_color(engine)
    fig.add_trace(
        go.Bar(x=steps["step"], y=steps["draft_len"], name="drafted", marker={"color": color, "opacity": 0.35})
    )
    fig.add_trace(go.Bar(x=steps["step"], y=steps["accepted"], name="accepted", marker={"color": color}))
    fig.update_layout(barmode="overlay", bargap=0.15)
    return _legend(fig)
