"""The sidebar's rounds: how many, and whether rounds are added until the intervals are precise."""

from __future__ import annotations

import streamlit as st

from dashboard.settings import PRECISE_BUDGET_S
from metrics.verdict import SAME_MARGIN
from workloads.drivers.rounds import DEFAULT_ROUNDS

KEEP = "session"  # as every sidebar widget (``widgets.forms``): values survive page switches


def rounds_inputs(prefix: str) -> tuple[int, bool]:
    """The rounds (the most, when added until precise) and whether rounds are added until precise."""
    rounds = st.number_input(
        "Rounds",
        1,
        50,
        key=f"{prefix}.rounds",
        persist_state=KEEP,
        help="Each engine replays the requests once per round, in an order that rotates each round. × AR is "
        "each round's ratio to AR of the same round, shown as the median with "
        "the interval a repeat run's median falls in; a verdict "
        "needs at least 3 rounds. With rounds added until precise, the most it runs.",
    )
    precise = st.checkbox(
        f"Add rounds until precise (±{SAME_MARGIN:.0%})",
        key=f"{prefix}.precise",
        persist_state=KEEP,
        help=f"Start with {DEFAULT_ROUNDS} rounds, then add rounds until every engine's tok/s × AR interval "
        f"is within ±{SAME_MARGIN:.0%} of its median, up to the rounds above and within "
        f"{PRECISE_BUDGET_S:.0f} s of rounds. With {DEFAULT_ROUNDS} rounds or fewer above, exactly those.",
    )
    return int(rounds), bool(precise)
