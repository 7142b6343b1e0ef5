"""The process's one ``RunManager``, shared by every page, rerun and browser tab.

``st.cache_resource`` keeps it for the life of the server process, one per
runs directory, so a launch started in one tab is the launch every tab sees.
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st

from dashboard.run_manager import RunManager
from dashboard.settings import runs_dir


@st.cache_resource(show_spinner=False)
def _manager(runs_root: str) -> RunManager:
    return RunManager(Path(runs_root))


def run_manager_for(root: Path) -> RunManager:
    """The process's run manager for the runs directory ``root``."""
    return _manager(str(Path(root).resolve()))


def run_manager() -> RunManager:
    """The process's run manager for the current runs directory (``PDV_RUNS_DIR`` or ``runs/``)."""
    return run_manager_for(runs_dir())
