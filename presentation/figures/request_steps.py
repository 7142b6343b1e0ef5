"""One request's verify steps (Inspect page): how many tokens were drafted and accepted at each."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from presentation.figures.base import new_figure, place_legend, waiting
from presentation.palette import engine_color, shade


def step_bars(steps: pd.DataFrame, engine: str) -> go.Figure:
    """Per verify step of one request: tokens drafted and how many the verifier accepted."""
    fig = new_figure("Draft length and accepted tokens per verify step", "verify step", "tokens", height=280)
    if steps.empty:
        return waiting(fig, "no verify steps (the AR engine does not draft)")
    color = engine_color(engine)
    # drafted: a pale, outlined bar behind the accepted one, so the two legend swatches differ at a glance
    drafted = {"color": shade(color, 0.75), "line": {"color": color, "width": 1}}
    fig.add_trace(go.Bar(x=steps["step"], y=steps["draft_len"], name="drafted", marker=drafted))
    fig.add_trace(go.Bar(x=steps["step"], y=steps["accepted"], name="accepted", marker={"color": color}))
    fig.update_layout(barmode="overlay", bargap=0.15)
    return place_legend(fig)
