"""What every dashboard figure shares: size, title and legend placement, the empty state, grouping.

Builders start from ``new_figure``, draw one trace per ``groups`` entry and end
with ``place_legend`` (or ``waiting`` when there is nothing to draw yet).
"""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from dashboard.palette import engine_label

HEIGHT = 320


def new_figure(title: str, x_title: str, y_title: str, height: int = HEIGHT) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        title={"text": title, "font": {"size": 15}},
        height=height,
        margin={"l": 10, "r": 10, "t": 50, "b": 10},
        # the legend shares the title's row, on the right: below the plot it would cover the x-axis title
        legend={"orientation": "h", "yanchor": "bottom", "y": 1.02, "xanchor": "right", "x": 1},
        xaxis_title=x_title,
        yaxis_title=y_title,
    )
    return fig


def place_legend(fig: go.Figure) -> go.Figure:
    """Up to three legend entries fit beside the title; more go under the plot (they would cover the title)."""
    entries = sum(1 for t in fig.data if t.showlegend is not False)
    if entries > 3:
        fig.update_layout(
            legend={"yanchor": "top", "y": -0.3, "xanchor": "left", "x": 0}, height=fig.layout.height + 50
        )
    return fig


def waiting(fig: go.Figure, message: str = "waiting for data") -> go.Figure:
    fig.add_annotation(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def groups(df: pd.DataFrame, group: str) -> list[tuple[str, str, pd.DataFrame]]:
    """(trace name, engine, rows) per group, in order of first appearance."""
    out = []
    for key, rows in df.groupby(group, sort=False):
        engine = str(rows["engine"].iloc[0])
        name = engine_label(engine) if group == "engine" else str(key)
        out.append((name, engine, rows))
    return out
