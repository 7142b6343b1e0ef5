"""The process's one ``RunManager``, shared by every page, rerun and browser tab.

``st.cache_resource`` keeps it for the life of the server process, one per
runs directory, so a launch started in one tab is the launch every tab sees.
Every page run tells the manager which browser session it draws for, so a
launch that no connected tab shows any more (they were closed) is stopped
(``dashboard.engine_host.ABANDON_S``).
"""

from __future__ import annotations

from pathlib import Path

import streamlit as st
from streamlit.runtime import Runtime
from streamlit.runtime.scriptrunner import get_script_run_ctx

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
    manager = run_manager_for(runs_dir())
    _watch(manager)
    return manager


def _watch(manager: RunManager) -> None:
    """Tell ``manager`` that this browser session shows the dashboard, and how to ask whether it still does."""
    ctx = get_script_run_ctx()
    if ctx is None or not Runtime.exists():  # a test's AppTest: no server, no browser sessions to watch
        return
    runtime, session_id = Runtime.instance(), ctx.session_id
    manager.watch(session_id, lambda: runtime.is_active_session(session_id))
