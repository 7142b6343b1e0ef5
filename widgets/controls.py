"""Start / Stop buttons and the status card, shared by the pages that launch work.

The status card is a fragment that polls the manager every second. When the
launch it shows starts or ends – possibly from another browser tab – it reruns
the whole page once, so the buttons and the other cards pick up the new state.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import streamlit as st

from dashboard.inspect_launch import InspectSpec
from dashboard.launch import LaunchStatus
from dashboard.replay_spec import ReplaySpec
from dashboard.run_manager import RunManager
from workloads.drivers.run_state import RunState

REFRESH_S = 2.0  # a live page's redraw period: charts move every 2 s, and redraws stay a small share of the CPU


def start_stop(manager: RunManager, kind: str, spec: ReplaySpec | InspectSpec | None, problem: str | None) -> None:
    """The Start and Stop buttons of a page whose launches are of ``kind``."""
    start_col, stop_col, note_col = st.columns([1, 1, 6], vertical_alignment="center")
    start = start_col.button(
        "Start", type="primary", icon=":material/play_arrow:", disabled=spec is None, key=f"{kind}.start"
    )
    stop = stop_col.button("Stop", icon=":material/stop:", key=f"{kind}.stop")
    if problem:
        st.error(problem)
    if start and spec is not None:
        launch, started = manager.start(spec)
        if not started:
            st.warning(f"A {launch.kind} launch ({launch.id}) is already using the device: stop it first.")
    if stop and not manager.stop():
        note_col.caption("Nothing is running.")
    busy = manager.active()
    if busy is not None and busy.kind != kind:
        st.info(f"The device is busy with a {busy.kind} launch ({busy.id}); Start here once it ends, or Stop it.")


def view_key(view: Any) -> tuple[str, bool] | None:
    return None if view is None else (view.launch_id, view.status.active)


def remember_rendered(kind: str, view: Any) -> float | None:
    """Record which launch state the page was drawn for; the refresh period its live cards need."""
    st.session_state[f"{kind}.rendered"] = view_key(view)
    return REFRESH_S if view is not None and view.status.active else None


def status_card(
    kind: str,
    current_view: Callable[[], Any],
    idle_hint: str,
    describe_end: Callable[[Any], str],
    describe_running: Callable[[Any], str] | None = None,
) -> None:
    """Draw the status card of ``kind``'s latest launch (as a fragment refreshed every ``REFRESH_S``)."""

    @st.fragment(run_every=REFRESH_S)
    def card() -> None:
        status_body(kind, current_view(), idle_hint, describe_end, describe_running)

    card()


def status_body(
    kind: str,
    view: Any,
    idle_hint: str,
    describe_end: Callable[[Any], str],
    describe_running: Callable[[Any], str] | None = None,
) -> bool:
    """The status card's content, inside a page's own refresh loop; False when there is nothing more to draw."""
    if view_key(view) != st.session_state.get(f"{kind}.rendered"):
        st.rerun()  # a launch started or ended: redraw the whole page once
    if view is None:
        st.info(idle_hint)
        return False
    running = describe_running(view) if describe_running and view.status.state == RunState.RUNNING else None
    show_status(view.status, describe_end(view), running)
    return True


def show_status(status: LaunchStatus, ended: str, running: str | None = None) -> None:
    if status.state == RunState.LOADING:
        # not a `with` block: leaving one marks the box complete (a ✓) while the work still runs
        box = st.status(f"Preparing: {status.message}", expanded=True, state="running")
        box.progress(min(max(status.fraction, 0.0), 1.0), text=status.message)
    elif status.state == RunState.RUNNING:
        st.caption(running or status.message)
    elif status.state == RunState.DONE:
        st.success(f"Finished. {ended}")
    elif status.state == RunState.CANCELLED:
        st.warning(f"Stopped. {ended}")
    if status.error:
        st.error(f"Failed: {status.error}. What was measured before the failure is kept.")
