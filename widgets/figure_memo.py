"""Figures built once per change of their data: a live page's redraw rebuilds nothing that did not change.

A page keeps one ``FigureMemo`` per browser session (``session_memo``). Each
figure has a name and a *version* – a small hashable value that changes when
the figure's data does (a launch id with row and request counts, say); ``get``
calls the builder only when the version differs from the one it last built.
``builds`` counts the calls, so a test can tell a rebuilt figure from a kept one.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import TypeVar

import streamlit as st

T = TypeVar("T")


class FigureMemo:
    def __init__(self) -> None:
        self._kept: dict[str, tuple[Hashable, object]] = {}
        self.builds: dict[str, int] = {}

    def get(self, name: str, version: Hashable, build: Callable[[], T]) -> T:
        """``build()``'s figure for ``version``: built now if ``name`` was last built for another version."""
        kept = self._kept.get(name)
        if kept is not None and kept[0] == version:
            return kept[1]  # type: ignore[return-value]
        figure = build()
        self._kept[name] = (version, figure)
        self.builds[name] = self.builds.get(name, 0) + 1
        return figure


def session_memo(page: str) -> FigureMemo:
    """The memo of ``page`` in this browser session."""
    key = f"{page}.figure_memo"
    if key not in st.session_state:
        st.session_state[key] = FigureMemo()
    return st.session_state[key]
