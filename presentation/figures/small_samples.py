"""Figures that fit a few requests per engine: every request as a point, acceptance as a running rate.

A comparison's engines finish a handful of requests each: overlapping
histograms of eight values look like distributions and carry none, and an
acceptance rate per sampling window jumps between 0 and 1 when a window holds
one step. Here every request is a point beside its engine's box (median and
quartiles), and acceptance is the running rate over the requests finished so
far (accepted / drafted summed in finishing order), which settles as they add up.
Inputs are request frames (``engine`` plus ``metrics.schema`` request columns).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from presentation.figures.base import completed_with, groups, new_figure, place_legend, waiting


def latency_points(requests: pd.DataFrame, column: str, title: str) -> go.Figure:
    """One box per engine with every completed request's ``column`` (ms) drawn as a point beside it."""
    fig = new_figure(title, "milliseconds", "")
    rows = completed_with(requests, column)
    if rows.empty:
        return waiting(fig)
    for name, _, g, style in groups(rows, "engine"):
        fig.add_trace(
            go.Box(
                x=g[column],
                name=name,
                marker={"color": style["color"], "size": 6},
                line={"color": style["color"]},
                boxpoints="all",
                jitter=0.4,
                pointpos=0,
                fillcolor="rgba(0,0,0,0)",
                orientation="h",
                hoverinfo="x",
            )
        )
    fig.update_layout(showlegend=False)
    fig.update_yaxes(autorange="reversed")  # engines top to bottom in the page's order
    return fig


def acceptance_so_far(requests: pd.DataFrame) -> go.Figure:
    """Accepted / drafted over the requests finished so far, one line per engine that drafts."""
    fig = new_figure("Acceptance over the requests finished so far", "requests finished", "accepted / drafted")
    needed = {"drafted_tokens", "accepted_tokens"}
    rows = requests[requests["drafted_tokens"] > 0] if needed <= set(requests) else requests.iloc[0:0]
    if rows.empty:
        return waiting(fig, "no engine has drafted yet")
    for name, _, g, style in groups(rows, "engine"):
        rate = g["accepted_tokens"].cumsum() / g["drafted_tokens"].cumsum()
        x = list(range(1, len(g) + 1))
        fig.add_trace(go.Scatter(x=x, y=rate, name=name, mode="lines+markers", line=style))
    fig.update_yaxes(range=[0, 1.05])
    return place_legend(fig)
