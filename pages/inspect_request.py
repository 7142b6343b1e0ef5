"""Inspect: one prompt through one engine, token by token, or any request of a saved run.

The output is painted by how each token was produced (accepted draft token,
correction, bonus, first / plain decode), a bar chart shows every verify
step's draft length and accepted count (``Request.steps``), and a table the
proposals per source (draft model, prompt lookup, suffix drafting): all drawn
by ``widgets.request_card``, which the saved-run mode (``widgets.inspect_saved``)
calls too, with the token kinds and steps a run directory's outputs.jsonl recorded.
"""

from __future__ import annotations

import streamlit as st

from dashboard.inspect_launch import InspectLaunch, InspectSpec, InspectView
from dashboard.request_figures import RequestFigures
from dashboard.settings import ENGINE_ORDER, preset_options
from dashboard.token_view import legend_html, pieces_html
from engine.config import ControllerConfig, EngineConfig, SamplingParams
from presentation.palette import engine_label
from widgets import controls
from widgets.forms import confidence_gate, drafter_select
from widgets.inspect_saved import saved_run_section
from widgets.manager import run_manager
from widgets.request_card import request_card

KEEP = "session"
manager = run_manager()


def current_view() -> InspectView | None:
    launch = manager.latest("inspect")
    return launch.view() if isinstance(launch, InspectLaunch) else None


def describe_end(view: InspectView) -> str:
    request = view.request
    return "" if request is None else f"{request.num_output_tokens} tokens from {engine_label(view.spec.engine)}."


st.header("Inspect one request", divider="gray")
MODES = ("New prompt", "Saved run")
mode = st.radio("Request", MODES, horizontal=True, key="inspect.mode", persist_state=KEEP)
if mode == "Saved run":
    saved_run_section(manager.runs_root)
    st.stop()
prompt = st.text_area("Prompt", key="inspect.prompt", persist_state=KEEP, height=100)
cols = st.columns(7)
engine = cols[0].selectbox("Engine", ENGINE_ORDER, format_func=engine_label, key="inspect.engine", persist_state=KEEP)
preset = cols[1].selectbox("Model preset", preset_options(), key="inspect.preset", persist_state=KEEP)
max_new = cols[2].number_input("Max new tokens", 1, 1024, key="inspect.max_new_tokens", persist_state=KEEP)
temperature = cols[3].slider("Temperature", 0.0, 2.0, step=0.05, key="inspect.temperature", persist_state=KEEP)
length = cols[4].slider("Draft length L", 0, 16, key="inspect.draft_len", persist_state=KEEP)
drafter = drafter_select("inspect", cols[5])
gate = confidence_gate("inspect", cols[6])

spec, problem = None, None
try:
    controller = ControllerConfig("fixed", draft_len=length, min_len=0, max_len=max(length, 1), draft_confidence=gate)
    spec = InspectSpec(
        preset=preset,
        engine=engine,
        prompt=prompt,
        config=EngineConfig(controller=controller, drafter=drafter),
        params=SamplingParams(temperature=float(temperature), max_new_tokens=int(max_new), seed=0),
    )
except ValueError as exc:
    problem = str(exc)
controls.start_stop(manager, "inspect", spec, problem)
shown = current_view()
every = controls.remember_rendered("inspect", shown)


@st.fragment(run_every=every)
def output_card() -> None:
    view = current_view()
    if view is None or view.request is None:
        return
    request = view.request
    st.html(legend_html())
    st.html(pieces_html(view.pieces))
    request_card(RequestFigures.of_request(request), view.spec.engine, key="inspect")


controls.status_card("inspect", current_view, "Write a prompt, pick an engine, then press **Start**.", describe_end)
output_card()
