"""The verdict line on top of a comparison, with its noise warning: what the Live run and Sweep pages show first.

The line and the warning come from the sweep's comparison of each load point
(``dashboard.rounds_view``); they update as rounds end.
"""

from __future__ import annotations

import streamlit as st

from dashboard.replay_launch import ReplayView
from dashboard.rounds_view import SIMULTANEOUS_NOTE, progress_text


def verdict_card(view: ReplayView | None) -> None:
    """One line per load point reached: the fastest engine with its × AR interval, or why there is none."""
    if view is None:
        return
    if view.spec.simultaneous:
        st.info(SIMULTANEOUS_NOTE, icon=":material/group_work:")
        return
    for point in view.comparisons:
        text = f"**{point.load}, {progress_text(point, view.spec.precision is not None)}.** {point.verdict_line()}"
        if point.ended_by:
            text += f" Rounds ended: {point.ended_by}."
        if point.comparison.verdict.fastest is not None:
            st.success(text, icon=":material/emoji_events:")
        else:
            st.info(text, icon=":material/balance:")
        if point.comparison.noise_warning:
            st.warning(point.comparison.noise_warning, icon=":material/warning:")
    if not view.comparisons and view.status.active:
        st.caption(f"The verdict appears when every engine has ended a round ({view.spec.rounds} planned).")
