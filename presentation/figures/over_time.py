"""Figures against time (``t_s``, seconds since the run started): one line per engine or run.

Inputs are time series frames (``metrics.schema`` timeseries columns plus
``engine``, and ``label`` on the Runs page).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from presentation.figures.base import groups, new_figure, place_legend, stack_widths, waiting
from presentation.palette import engine_color, engine_label

LANE_DASH = {"waiting": "dot", "queue_prefill": "dash", "queue_decode": "solid", "queue_verify": "dashdot"}
LANE_LABELS = {
    "waiting": "admission",
    "queue_prefill": "prefill",
    "queue_decode": "decode",
    "queue_verify": "verify",
}


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
    fig = new_figure(title, "seconds since the run started", y_title)
    rows = ts.dropna(subset=[column]) if column in ts else ts.iloc[0:0]
    if rows.empty:
        return waiting(fig)
    for name, _, g, style in groups(rows, group):
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
                line={**style, "shape": shape},
                legendgroup=name,
            )
        )
    return place_legend(fig)


def throughput_over_time(ts: pd.DataFrame, group: str = "engine", smooth_s: float = 2.0) -> go.Figure:
    title = f"Throughput ({smooth_s:g} s moving average)" if smooth_s else "Throughput"
    return line_over_time(ts, "tokens_per_s", title, "output tokens / s", group, smooth_s=smooth_s)


def draft_length_over_time(ts: pd.DataFrame, group: str = "engine") -> go.Figure:
    # engines with one fixed L draw the same line: stacked widths keep every one of them in sight
    return stack_widths(line_over_time(ts, "draft_len", "Draft length L", "tokens drafted per step", group, shape="hv"))


def acceptance_over_time(ts: pd.DataFrame, group: str = "engine") -> go.Figure:
    # per sampling window, unsmoothed: the samples hold each window's ratio, not its counts, and a moving
    # average of ratios would weigh a window with one drafted token like one with fifty
    title = "Acceptance per sampling window"
    fig = line_over_time(ts, "acceptance_rate", title, "accepted / drafted", group)
    if fig.data:
        fig.update_yaxes(range=[0, 1.05])
    return stack_widths(fig)


# engines whose queue chart would be a flat line at 0: said in words instead
NO_QUEUES = {"ar": "AR runs each request in one loop: it has no lane queues"}


def queue_depths(ts: pd.DataFrame, engine: str) -> go.Figure:
    """One engine's queues over time: admission (``waiting``) and every lane it has."""
    fig = new_figure(f"{engine_label(engine)} queues", "seconds since the run started", "items queued", height=240)
    if engine in NO_QUEUES:
        return waiting(fig, NO_QUEUES[engine])
    rows = ts[ts["engine"] == engine] if "engine" in ts else ts.iloc[0:0]
    present = [c for c in LANE_DASH if c in rows and rows[c].notna().any()]
    if rows.empty or not present:
        return waiting(fig)
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
    # Plotly drops the legend of a one-line chart, which would leave that line unnamed
    fig.update_layout(showlegend=True)
    return place_legend(stack_widths(fig))  # idle lanes all lie on 0


def device_utilisation(ts: pd.DataFrame, group: str = "engine") -> go.Figure:
    """GPU SM and memory use when measured (NVML); otherwise this process's CPU % and RSS (right axis).

    One legend entry per group: the first series is solid, the second dotted (the axis titles say which).
    """
    on_gpu = "gpu_util" in ts and ts["gpu_util"].notna().any()
    x_title = "seconds since the run started"
    if on_gpu:
        fig = new_figure("GPU utilisation (NVML)", x_title, "SM % (solid), memory % (dotted)")
        series = (("gpu_util", "SM %", "solid", "y"), ("gpu_mem_util", "memory %", "dot", "y"))
    else:
        # cpu_util is CPU time over wall time x every core the process may use (metrics/METRICS.md)
        fig = new_figure("CPU and RSS of this process (no GPU)", x_title, "CPU %, 100 = all its cores (solid)")
        series = (("cpu_util", "CPU % of all cores", "solid", "y"), ("rss_mb", "RSS MiB", "dot", "y2"))
        # whole MiB on ticks Plotly picks for the RSS range itself (not fractions lined up with the CPU axis)
        rss_axis = {"overlaying": "y", "side": "right", "tickformat": ",.0f", "showgrid": False, "nticks": 6}
        fig.update_layout(yaxis2={"title": {"text": "RSS MiB (dotted)"}, **rss_axis})
    drawn = 0
    for i, (column, what, dash, axis) in enumerate(series):
        rows = ts.dropna(subset=[column]) if column in ts else ts.iloc[0:0]
        for name, _, g, style in groups(rows, group) if not rows.empty else []:
            fig.add_trace(
                go.Scatter(
                    x=g["t_s"],
                    y=g[column],
                    yaxis=axis,
                    name=name,
                    mode="lines",
                    line={"color": style["color"], "dash": dash},
                    legendgroup=name,
                    showlegend=i == 0,
                    hovertemplate=f"{name} {what}: %{{y:.1f}}<extra></extra>",
                )
            )
            drawn += 1
    # percentages are 0..100 by definition; a single mis-measured window must not squash the rest
    fig.update_layout(yaxis={"range": [0, 105]})
    return place_legend(fig) if drawn else waiting(fig)
