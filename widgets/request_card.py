"""What Inspect draws under one request's text, the same for a new prompt and a saved run's request.

Metric tiles (``dashboard.request_figures``), a bar chart of every verify
step's draft length and accepted count, and the proposals per source (draft
model, prompt lookup, suffix drafting). A request without a per-step record
(a saved server output, or a file written before steps were recorded) keeps
its tiles, with "—" for what only the steps tell, and says why the rest is missing.
"""

from __future__ import annotations

import streamlit as st

from dashboard import tables
from dashboard.request_figures import RequestFigures
from metrics.draft_sources import source_tallies
from presentation import figures

NO_STEPS = (
    "This request's run file has no per-step record (a server's output, or a file written before steps were "
    "recorded), so its verify steps, acceptance and proposals per source cannot be shown."
)


def request_card(numbers: RequestFigures, engine: str, key: str) -> None:
    """Draw the tiles, the step chart (keyed ``{key}.chart.steps``) and the proposals table."""
    tiles = numbers.tiles()
    for col, (label, text) in zip(st.columns(len(tiles) + 1), tiles, strict=False):  # a spare column: narrower tiles
        col.metric(label, text)
    if numbers.steps is None:
        st.info(NO_STEPS)
        return
    st.plotly_chart(figures.step_bars(tables.steps_frame(numbers.steps), engine), key=f"{key}.chart.steps")
    tallies = source_tallies(numbers.steps)
    if tallies:  # where the proposals came from: the draft model, prompt lookup, suffix drafting's two sides
        st.caption("Proposals per source")
        st.dataframe([t.row() for t in tallies], hide_index=True)
