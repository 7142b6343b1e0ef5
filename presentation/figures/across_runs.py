"""Figures that set runs or engines side by side: latency distributions, metrics against load, summary bars,
acceptance by draft position.

Inputs are request frames (``engine`` plus ``metrics.schema`` request columns),
summary frames, and ``metrics.frames.cdf`` and ``position_frame`` frames with a ``label``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import pandas as pd
import plotly.graph_objects as go

from presentation.figures.base import HEIGHT, completed_with, groups, new_figure, place_legend, stack_widths, waiting
from presentation.palette import engine_color, run_style

MARKERS = ("circle", "square", "diamond", "triangle-up", "x", "star")


def latency_histogram(requests: pd.DataFrame, column: str, title: str) -> go.Figure:
    """Overlaid histograms of a request column (ms), one per engine; completed requests only."""
    fig = new_figure(title, "milliseconds", "requests")
    rows = completed_with(requests, column)
    if rows.empty:
        return waiting(fig)
    # one set of 20 bins for every engine, so that bar heights compare across engines
    lo, hi = float(rows[column].min()), float(rows[column].max())
    size = (hi - lo) / 20 * (1 + 1e-9) if hi > lo else 1.0  # a hair wider, so the largest value is in bin 20
    bins = {"start": lo, "end": lo + 20 * size, "size": size}
    for name, _, g, style in groups(rows, "engine"):
        fig.add_trace(
            go.Histogram(x=g[column], name=name, marker={"color": style["color"]}, opacity=0.65, xbins=bins, bingroup=1)
        )
    fig.update_layout(barmode="overlay")
    return place_legend(fig)


def cdf_lines(cdf: pd.DataFrame, title: str, x_title: str, group: str = "label") -> go.Figure:
    """Empirical CDFs (``metrics.frames.cdf`` plus a ``label``): one line per run."""
    fig = new_figure(title, x_title, "share of requests")
    if cdf.empty:
        return waiting(fig)
    for name, _, g, style in groups(cdf, group):
        fig.add_trace(go.Scatter(x=g["value"], y=g["fraction"], name=name, mode="lines", line={**style, "shape": "hv"}))
    fig.update_yaxes(range=[0, 1.02])
    return place_legend(fig)


def metric_vs_load(summary: pd.DataFrame, metrics: Mapping[str, str], x: str, title: str, y_title: str) -> go.Figure:
    """Summary metrics against the load (``concurrency`` or ``request_rate``): one line per engine and metric.

    ``metrics`` maps column -> legend suffix (e.g. ``{"tpot_p95_ms": "p95"}``); a second metric is dashed.
    """
    x_title = "concurrency (requests in flight)" if x == "concurrency" else "request rate (requests / s)"
    fig = new_figure(title, x_title, y_title)
    fig.update_yaxes(rangemode="tozero")
    loads = sorted(summary[x].dropna().unique()) if x in summary else []
    categorical = load_axis(fig, loads)
    dashes = ("solid", "dash", "dot", "dashdot")
    drawn = 0
    engines = groups(summary, "engine") if not summary.empty else []
    for i, (name, engine, g, _) in enumerate(engines):
        g = g.sort_values(x)
        # engines often agree (the same L, no drafts): the first drawn widest, each later one thinner, and
        # a marker symbol each, keep every engine in sight
        wider = len(engines) - 1 - i
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
                    line={"color": engine_color(engine), "dash": dash, "width": 1.5 + 1.5 * wider},
                    marker={"symbol": MARKERS[i % len(MARKERS)], "size": 6 + 2.5 * wider},
                    legendgroup=name,
                )
            )
            drawn += 1
    if not drawn:
        return waiting(fig, "no finished runs yet" if summary.empty else "no run has a value for this")
    cover_values(fig)
    return place_legend(fig)


def cover_values(fig: go.Figure, at_least: float = 0.0) -> None:
    """Put ticks at a round step from 0 up to the first tick at or above every trace's largest value (and
    ``at_least``), and end the y range a little above that tick: no line or marker runs past the top tick,
    whichever ticks Plotly would have picked for two metrics on one axis (draft length and tokens per step).
    Mutates ``fig``'s y axis."""
    top = max(
        [at_least, *(float(v) for trace in fig.data for v in (trace.y if trace.y is not None else ()))],
        key=lambda v: v if math.isfinite(v) else -math.inf,
    )
    top = top if math.isfinite(top) and top > 0 else 1.0
    step = round_step(top / TICKS)
    last = math.ceil(top / step - 1e-9) * step  # the top tick: the first multiple of the step at or above top
    fig.update_yaxes(tickmode="linear", tick0=0, dtick=step, range=[0, last + step / 4])


TICKS = 5  # about this many steps from 0 to the top tick


def round_step(rough: float) -> float:
    """The smallest of 1, 2, 2.5 and 5 times a power of ten that is at least ``rough`` (> 0)."""
    power = 10 ** math.floor(math.log10(rough))
    return next(m * power for m in (1, 2, 2.5, 5, 10) if m * power >= rough * (1 - 1e-9))


def load_axis(fig: go.Figure, loads: Sequence[float]) -> bool:
    """Ticks at the loads that ran (never 1.5 requests in flight); a log axis when they span a decade or more.

    Returns whether the axis is categorical: an infinite rate ("all at once") has
    no place on a numeric axis, and Plotly would drop it silently.
    """
    if any(math.isinf(v) for v in loads):
        fig.update_xaxes(type="category", categoryorder="array", categoryarray=[_load_text(v) for v in loads])
        return True
    if loads:
        spans_decade = min(loads) > 0 and max(loads) / min(loads) >= 10
        fig.update_xaxes(
            type="log" if spans_decade else "linear", tickmode="array", tickvals=list(loads),
            ticktext=[_load_text(v) for v in loads],
        )  # fmt: skip
    return False


def speedup_vs_load(summary: pd.DataFrame, x: str) -> go.Figure:
    """Each engine's output tokens/s over AR's at the same load (``x_ar_tok_s``), with AR's own 1.0 as a line."""
    engines = summary[summary["engine"] != "ar"] if "engine" in summary else summary
    has_ar = "engine" in summary and (summary["engine"] == "ar").any()
    title, y_title = "Speed-up over AR (output tokens/s ÷ AR's)", "× AR"
    if not has_ar or engines.empty:
        message = "switch AR on to measure speed-ups" if not has_ar else "only AR ran: switch on another engine"
        return waiting(new_figure(title, "", y_title), message if not summary.empty else "no finished runs yet")
    fig = metric_vs_load(engines, {"x_ar_tok_s": ""}, x, title, y_title)
    fig.add_hline(y=1.0, line={"color": engine_color("ar"), "dash": "dash", "width": 2})
    cover_values(fig, at_least=1.0)  # AR's line stays in view when every engine is far below it
    fig.add_annotation(
        text="AR = 1.0 (above: faster than AR)", xref="paper", x=0, xanchor="left", y=1.0, yanchor="bottom",
        showarrow=False, font={"color": engine_color("ar"), "size": 11}, bgcolor="rgba(255,255,255,0.8)",
    )  # fmt: skip
    return fig


def _load_text(value: float) -> str:
    return "all at once" if math.isinf(value) else f"{value:g}"


def summary_bars(summary: pd.DataFrame, metrics: Mapping[str, str], title: str, y_title: str) -> go.Figure:
    """Horizontal bars, one row per run (``label``), coloured by engine (several runs of one engine in its shades).

    Rows leave room for long run names however many runs are open. With several
    metrics (``{"tpot_p50_ms": "p50", ...}``) each gets a bar per run with its own
    fill pattern – solid, hatched, dotted – which the legend shows.
    """
    fig = new_figure(title, y_title, "")
    present = {column: suffix for column, suffix in metrics.items() if column in summary}
    if not present or summary.empty:
        return waiting(fig, "no runs selected")
    seen: dict[str, int] = {}
    colors = []
    for engine in summary["engine"]:
        colors.append(run_style(engine, seen.get(engine, 0))["color"])
        seen[engine] = seen.get(engine, 0) + 1
    for (column, suffix), pattern in zip(present.items(), ("", "/", "."), strict=False):
        fig.add_trace(
            go.Bar(
                y=summary["label"],
                x=summary[column],
                orientation="h",
                name=suffix,
                marker={"color": colors, "pattern": {"shape": pattern, "fgcolor": "#333333", "solidity": 0.3}},
                hovertemplate="%{y}<br>" + suffix + ": %{x:.2f}<extra></extra>",
            )
        )
    rows = len(summary) * (len(present) * 12 + 10)
    fig.update_layout(barmode="group", showlegend=len(present) > 1, height=max(HEIGHT, 110 + rows))
    fig.update_yaxes(autorange="reversed", automargin=True)  # the first run on top, as in the table
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
    for name, _, g, style in groups(positions, group):
        g = g.sort_values("position")
        uncounted = g["per_draft"].isna().all()
        fig.add_trace(
            go.Scatter(
                x=g["position"],
                y=g["per_draft"],
                name=f"{name} (file without draft-step counts)" if uncounted else name,
                mode="lines+markers",
                line=style,
                customdata=g[["rate", "accepted", "drafted", "drafts"]].to_numpy(),
                hovertemplate=hover,
            )
        )
    fig.update_xaxes(tickmode="linear", tick0=1, dtick=1)  # positions are whole numbers
    fig.update_yaxes(range=[0, 1.02])
    return place_legend(stack_widths(fig))
