"""What every dashboard figure shares: size, title and legend placement, the empty state, grouping.

Builders start from ``new_figure``, draw one trace per ``groups`` entry and end
with ``place_legend`` (or ``waiting`` when there is nothing to draw yet).
"""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd
import plotly.graph_objects as go

from presentation.palette import engine_label, run_style

HEIGHT = 320
TITLE_PX = 40  # the title's band at the top of a figure
LEGEND_ROW_PX = 28  # a legend row with its gap, as Plotly draws it
LEGEND_ROW_WIDTH_PX = 420  # a chart in one of two columns at 1280 px, less its margins
LEGEND_CHAR_PX = 6.5  # the legend's 12 px font
LEGEND_SWATCH_PX = 50  # the line sample and the gaps around an entry


class Group(NamedTuple):
    """One trace's rows: its legend name, its engine, and its line colour and dash (``palette.run_style``)."""

    name: str
    engine: str
    rows: pd.DataFrame
    style: dict[str, str]


def new_figure(title: str, x_title: str, y_title: str, height: int = HEIGHT) -> go.Figure:
    fig = go.Figure()
    fig.update_layout(
        # the title at the top of the figure, and the legend (place_legend) in a band between it and the
        # plot, so that however many rows the legend wraps to, it covers neither title
        title={
            "text": title,
            "font": {"size": 15},
            "x": 0,
            "xanchor": "left",
            "y": 1,
            "yref": "container",
            "yanchor": "top",
            "pad": {"t": 8},
            "automargin": True,
        },
        height=height,
        margin={"l": 10, "r": 10, "t": 10, "b": 10},
        # maxheight 1: the whole figure, so Plotly never folds a long legend into a scrolled box
        legend={"orientation": "h", "x": 0, "xanchor": "left", "y": 1, "yanchor": "bottom", "maxheight": 1},
        xaxis_title=x_title,
        yaxis_title=y_title,
    )
    return fig


def place_legend(fig: go.Figure) -> go.Figure:
    """Put the legend in a band of its own between the title and the plot, as tall as its rows.

    Entries per row are estimated from the longest name on a half-width chart
    (a laptop's two columns); at wider screens the band has room to spare. The
    band is added to the figure's height, so the plot keeps its own.
    """
    names = [str(t.name or "") for t in fig.data if t.showlegend is not False]
    if not names or fig.layout.showlegend is False:
        return fig
    rows = legend_rows(names)
    height = fig.layout.height + LEGEND_ROW_PX * rows
    fig.update_layout(
        height=height,
        margin={"t": TITLE_PX + LEGEND_ROW_PX * rows},
        legend={"yref": "container", "y": 1 - TITLE_PX / height, "yanchor": "top"},
    )
    return fig


def legend_rows(names: list[str]) -> int:
    """Rows a horizontal legend of ``names`` takes on a half-width chart: each entry is as wide as its own name.

    Counting every entry as wide as the longest one overestimated the rows for runs with names of mixed
    lengths, and left a blank band between the legend and the plot.
    """
    rows, used = 1, 0.0
    for name in names:
        width = len(name) * LEGEND_CHAR_PX + LEGEND_SWATCH_PX
        if used and used + width > LEGEND_ROW_WIDTH_PX:
            rows, used = rows + 1, 0.0
        used += width
    return rows


def stack_widths(fig: go.Figure) -> go.Figure:
    """Lines that may lie on top of each other: the first drawn widest, each later one thinner, so none hides."""
    n = len(fig.data)
    step = 6.0 / max(n - 1, 4)  # 1.5 px a line for up to five lines; never wider than 7.5 px in all
    for i, trace in enumerate(fig.data):
        trace.line.width = 1.5 + step * (n - 1 - i)
        if trace.mode and "markers" in trace.mode:
            trace.marker.size = 6 + step * 5 / 3 * (n - 1 - i)
    return fig


def waiting(fig: go.Figure, message: str = "waiting for data") -> go.Figure:
    fig.add_annotation(text=message, showarrow=False, xref="paper", yref="paper", x=0.5, y=0.5)
    fig.update_xaxes(visible=False)
    fig.update_yaxes(visible=False)
    return fig


def groups(df: pd.DataFrame, group: str) -> list[Group]:
    """One ``Group`` per value of ``group``, in order of first appearance.

    Grouped by engine, each has the engine's colour; grouped by run (``label``),
    several runs of one engine share its hue in different shades and dashes.
    """
    out = []
    per_engine: dict[str, int] = {}
    for key, rows in df.groupby(group, sort=False):
        engine = str(rows["engine"].iloc[0])
        name = engine_label(engine) if group == "engine" else str(key)
        nth = per_engine.get(engine, 0)
        per_engine[engine] = nth + 1
        out.append(Group(name, engine, rows, run_style(engine, nth)))
    return out


def completed_with(requests: pd.DataFrame, column: str) -> pd.DataFrame:
    """The completed (status ok) requests that have a value in ``column``; none when the column is absent."""
    rows = requests.dropna(subset=[column]) if column in requests else requests.iloc[0:0]
    if "status" in rows:
        rows = rows[rows["status"] == "ok"]
    return rows
