"""Figures that set runs or engines side by side: latency distributions, metrics against load, summary bars,
acceptance by draft position.

Inputs are request frames (``engine`` plus ``metrics.schema`` request columns),
summary frames, and ``metrics.frames.cdf`` and ``position_frame`` frames with a ``label``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import pandas as pd
import plotly.graph_objects as go

from dashboard.figures.base import groups, new_figure, place_legend, waiting
from dashboard.palette import engine_color


def latency_histogram(requests: pd.DataFrame, column: str, title: str) -> go.Figure:
    """Overlaid histograms of a request column (ms), one per engine; completed requests only."""
    fig = new_figure(title, "milliseconds", "requests")
    rows = requests.dropna(subset=[column]) if column in requests else requests.iloc[0:0]
    if "status" in rows:
        rows = rows[rows["status"] == "ok"]
    if rows.empty:
        return waiting(fig)
    # one set of 20 bins for every engine, so that bar heights compare across engines
    lo, hi = float(rows[column].min()), float(rows[column].max())
    size = (hi - lo) / 20 * (1 + 1e-9) if hi > lo else 1.0  # a hair wider, so the largest value is in bin 20
    bins = {"start": lo, "end": lo + 20 * size, "size": size}
    for name, engine, g in groups(rows, "engine"):
        fig.add_trace(
            go.Histogram(
                x=g[column], name=name, marker={"color": engine_color(engine)}, opacity=0.65, xbins=bins, bingroup=1
            )
        )
    fig.update_layout(barmode="overlay")
    return place_legend(fig)


def cdf_lines(cdf: pd.DataFrame, title: str, x_title: str, group: str = "label") -> go.Figure:
    """Empirical CDFs (``metrics.frames.cdf`` plus a ``label``): one line per run."""
    fig = new_figure(title, x_title, "share of requests")
    if cdf.empty:
        return waiting(fig)
    for name, engine, g in groups(cdf, group):
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
    return place_legend(fig)


def metric_vs_load(summary: pd.DataFrame, metrics: Mapping[str, str], x: str, title: str, y_title: str) -> go.Figure:
    """Summary metrics against the load (``concurrency`` or ``request_rate``): one line per engine and metric.

    ``metrics`` maps column -> legend suffix (e.g. ``{"tpot_p95_ms": "p95"}``); a second metric is dashed.
    """
    x_title = "concurrency (requests in flight)" if x == "concurrency" else "request rate (requests / s)"
    fig = new_figure(title, x_title, y_title)
    fig.update_yaxes(rangemode="tozero")
    loads = summary[x].dropna().unique() if x in summary else []
    # an infinite rate ("all at once") has no place on a numeric axis, and Plotly would drop it silently
    categorical = any(math.isinf(v) for v in loads)
    if categorical:
        order = [_load_text(v) for v in sorted(loads)]
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=order)
    dashes = ("solid", "dash", "dot", "dashdot")
    drawn = 0
    for name, engine, g in groups(summary, "engine") if not summary.empty else []:
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
    return place_legend(fig) if drawn else waiting(fig, "no finished runs yet")


def _load_text(value: float) -> str:
    return "all at once" if math.isinf(value) else f"{value:g}"


def summary_bars(summary: pd.DataFrame, metrics: Mapping[str, str], title: str, y_title: str) -> go.Figure:
    """Grouped bars: one bar per run (``label``) and metric, coloured by engine; later metrics lighter."""
    fig = new_figure(title, "", y_title)
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
        return waiting(fig, "no runs selected")
    fig.update_layout(barmode="group", showlegend=len(metrics) > 1)
    return place_legend(fig)


def acceptance_by_position(positions: pd.DataFrame, group: str = "label") -> go.Figure:
    """vLLM's acceptance at each draft position (``per_draft``, accepted / draft steps): one line per run.

    ``positions`` is a ``metrics.frames.position_frame`` (plus a ``label``). The
    hover adds P(accepted | drafted) (``rate``) and the counts. A run read from
    files that did not count draft steps has no per-draft values: its legend
    entry says so rather than drawing a line from another definition.
    """
    fig = new_figure("Acceptance by draft position", "draft position", "accepted / draft steps")
    if positions.empty:
        return waiting(fig, "no drafted tokens")
    hover = (
        "position %{x}"
        "<br>per draft step (vLLM): %{y:.2f} = %{customdata[1]:d} accepted / %{customdata[3]:d} draft steps"
        "<br>when drafted: %{customdata[0]:.2f} = %{customdata[1]:d} accepted / %{customdata[2]:d} drafted"
        "<extra>%{fullData.name}</extra>"
    )
    for name, engine, g in groups(positions, group):
        g = g.sort_values("position")
        uncounted = g["per_draft"].isna().all()
        fig.add_trace(
            go.Scatter(
                x=g["position"],
                y=g["per_draft"],
                name=f"{name} (file without draft-step counts)" if uncounted else name,
                mode="lines+markers",
                line={"color": engine_color(engine)},
                customdata=g[["rate", "accepted", "drafted", "drafts"]].to_numpy(),
                hovertemplate=hover,
            )
        )
    fig.update_xaxes(tickmode="linear", tick0=1, dtick=1)  # positions are whole numbers
    fig.update_yaxes(range=[0, 1.02])
    return place_legend(fig)
