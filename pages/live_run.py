"""Live run: the chosen engines replay one trace; every chart fills while they run.

Settings are in the sidebar (``widgets.forms``). Start hands a ``ReplaySpec`` to
the run manager, which runs it in the engine process. Every card below the
buttons is drawn by one fragment, the page's one refresh loop, every
``controls.REFRESH_S`` while the launch is active; a figure is built again only
when its data changed (``widgets.figure_memo``), and nothing drawn here runs in
the engines' process. Engines, and an endpoint after
them, sit side by side in columns, in the same colour on every chart.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd
import streamlit as st

from dashboard import comparison, rounds_view, tables
from dashboard.replay_launch import ReplayLaunch, ReplayView
from dashboard.rounds_view import SIMULTANEOUS_NOTE, rounds_table
from metrics.rounds import RatioInterval
from presentation import figures
from presentation.palette import engine_color, engine_label
from widgets import controls
from widgets.figure_memo import session_memo
from widgets.forms import replay_form
from widgets.manager import run_manager
from widgets.verdict import verdict_card
from workloads.drivers.live import RunSnapshot

manager = run_manager()
spec, problem = replay_form("live")


def current_view() -> ReplayView | None:
    launch = manager.latest("live")
    return launch.view() if isinstance(launch, ReplayLaunch) else None


def describe_running(view: ReplayView) -> str:
    now = [engine_label(r.engine) for r in view.runs if r.state.underway]
    doing = f"Running {', '.join(now)}" if now else "Running"
    return f"{doing} – each engine's run is saved to `{view.out_dir.name}` in the runs directory when it ends."


def describe_end(view: ReplayView) -> str:
    crashed = sum(1 for r in view.results if r.engine_error)
    note = f" {crashed} of them ended with an engine error (shown in its panel)." if crashed else ""
    each = f", {view.spec.rounds} rounds each," if view.spec.rounds > 1 else ""
    where = f"saved to `{view.out_dir.name}` in the runs directory (see the Runs page)"
    return f"{len(view.results)} run(s){each} {where}.{note}"


st.header("Live run", divider="gray")
controls.start_stop(manager, "live", spec, problem)
if spec is not None and spec.simultaneous:
    st.info(SIMULTANEOUS_NOTE)
else:
    st.caption(
        "Engines run one after another on the identical trace, each alone on the device, then the endpoint "
        "if one is on, in rounds: each round starts with the next engine (ABDC, BCAD, …), and each × AR is "
        "the median of the rounds' ratios to AR of the same round, with "
        "in brackets the interval a repeat run's median falls in."
    )
shown = current_view()
every = controls.remember_rendered("live", shown)
memo = session_memo("live")
ENGINES_IN_PAGE = (
    "The engines run in this page's own process (PDV_ENGINE_HOST=thread): their figures include the "
    "page's redraws. Unset PDV_ENGINE_HOST to run them in an engine process of their own."
)


def engine_panel(run: RunSnapshot, speedup: RatioInterval | None, rounds: int) -> None:
    color = engine_color(run.engine)
    label = engine_label(run.engine)
    st.markdown(f"<h4 style='margin:0;color:{color}'>● {label}</h4>", unsafe_allow_html=True)
    done = run.finished / run.total if run.total else 0.0
    latest = f" · round {run.result.round} of {rounds}" if run.result is not None and rounds > 1 else ""
    st.progress(done, text=f"{run.finished}/{run.total} requests · {run.state}{latest}")
    if run.result is not None and run.result.engine_error:
        st.error(f"The {label} engine crashed: {run.result.engine_error}")
    s = run.summary
    # three headline figures; every other one is in the summary table above, engine beside engine. tok/s has
    # the panel's width to itself: its × AR with the rounds' min–max does not fit a third of a panel on a laptop
    st.metric(
        "tok/s",
        tables.fmt(s.output_tok_s if s else None, digits=1),
        help="Output tokens of finished requests / time from the run's start to the latest finish, as in the "
        "run's summary. Tokens of requests still running are not counted yet, so during a run this trails "
        "the throughput chart. Below it: the median over rounds of its tokens/s over AR's in the same round, "
        "with the interval a repeat run's median falls in.",
        delta=None if speedup is None else speedup.text("AR"),
        delta_color="off",
        delta_arrow="off",  # a ratio, not a change: 0.96× is not "up"
    )
    b, c = st.columns(2)
    b.metric("acceptance", tables.fmt(s.acceptance_rate if s else None, digits=2), help="accepted / drafted")
    c.metric("TPOT p50 (ms)", tables.fmt(s.tpot_p50_ms if s else None, digits=1), help="time per output token")
    tree = tables.suffix_tree_text(run)
    if tree is not None:
        st.caption(tree, help="What the engine's global suffix tree holds: the outputs of requests it completed, "
                   "up to the engine's suffix_tree_tokens bound, the oldest evicted first.")


def versions(view: ReplayView) -> tuple[tuple, tuple]:
    """What the live figures are drawn from, as two small values: time series rows and finished requests.

    A figure whose data did not change between two redraws is not built again (``widgets.figure_memo``).
    """
    rows = (view.launch_id, tuple((r.engine, r.state, len(r.timeseries)) for r in view.runs))
    finished = (view.launch_id, len(view.rounds), tuple((r.engine, r.state, r.finished) for r in view.runs))
    return rows, finished


def summary_card(view: ReplayView) -> None:
    st.subheader("Summary")
    engines = [r.engine for r in view.runs]
    point = view.comparisons[0] if view.comparisons else None
    if point is not None:
        st.table(rounds_table(point, engines))
    else:
        st.table(comparison.comparison_table([r.summary for r in view.runs], engines))
    pooled = "requests finished so far" if view.status.active else "finished requests"  # "so far" only while running
    note = (
        "× AR: each round against AR of the same round, as the median over rounds with "
        "the interval a repeat run's median falls in – "
        "tok/s above 1 is faster than AR, latencies below 1 are faster. Latencies and tok/s pool every round's "
        f"{pooled}."
    )
    if "ar" not in engines:
        note = f"Switch AR on in the sidebar to see each engine against it (× AR). Over the {pooled}."
    st.caption(note)


def engine_panels(view: ReplayView, ts: Callable[[], pd.DataFrame], rows_version: tuple) -> None:
    speedups = rounds_view.speedups(view.comparisons[0] if view.comparisons else None)
    # at most three panels side by side (four as two rows of two): narrower, their figures get cut on a laptop
    per_row = 2 if len(view.runs) == 4 else min(len(view.runs), 3)
    for start in range(0, len(view.runs), per_row):
        row = view.runs[start : start + per_row]
        for column, run in zip(st.columns(per_row, border=True), row, strict=False):
            with column:
                engine_panel(run, speedups.get(run.engine), view.spec.rounds)
                engine = run.engine
                queue = memo.get(f"queue.{engine}", rows_version, lambda e=engine: figures.queue_depths(ts(), e))
                st.plotly_chart(queue, key=f"live.chart.queue.{engine}")


def charts(view: ReplayView, ts: Callable[[], pd.DataFrame], rows_version: tuple, finished_version: tuple) -> None:
    left, right = st.columns(2)
    left.plotly_chart(memo.get("throughput", rows_version, lambda: figures.throughput_over_time(ts())),
                      key="live.chart.throughput")  # fmt: skip
    right.plotly_chart(memo.get("device", rows_version, lambda: figures.device_utilisation(ts())),
                       key="live.chart.device")  # fmt: skip
    # a few requests per engine: each one a point beside its engine's box, every round's requests pooled
    requests = memo.get("requests", finished_version, lambda: rounds_view.pooled_requests(view.rounds, view.runs))
    left, right = st.columns(2)
    left.plotly_chart(
        memo.get("ttft", finished_version,
                 lambda: figures.latency_points(requests, "ttft_ms", "TTFT (time to first token)")),
        key="live.chart.ttft",
    )  # fmt: skip
    right.plotly_chart(
        memo.get("tpot", finished_version,
                 lambda: figures.latency_points(requests, "tpot_ms", "TPOT (time per output token)")),
        key="live.chart.tpot",
    )  # fmt: skip
    left, right = st.columns(2)
    left.plotly_chart(memo.get("draft_len", rows_version, lambda: figures.draft_length_over_time(ts())),
                      key="live.chart.draft_len")  # fmt: skip
    right.plotly_chart(memo.get("acceptance", finished_version, lambda: figures.acceptance_so_far(requests)),
                       key="live.chart.acceptance")  # fmt: skip
    if view.results:  # acceptance by draft position is counted when a run ends
        left, _ = st.columns(2)
        positions = memo.get(
            "positions", finished_version,
            lambda: figures.acceptance_by_position(tables.results_positions(view.results), group="engine"),
        )  # fmt: skip
        left.plotly_chart(positions, key="live.chart.positions")


@st.fragment(run_every=every)
def live_cards() -> None:
    """The page's one refresh loop: every card below the buttons, redrawn together every ``REFRESH_S``."""
    view = current_view()
    if not controls.status_body(
        "live", view, "Choose engines and settings in the sidebar, then press **Start**.", describe_end,
        describe_running,
    ):  # fmt: skip
        return
    if view is None:
        return
    if manager.engines.in_page_process:
        st.warning(ENGINES_IN_PAGE, icon=":material/warning:")
    verdict_card(view)
    if not view.runs:
        return
    rows_version, finished_version = versions(view)
    frame: list[pd.DataFrame] = []

    def ts() -> pd.DataFrame:  # built once per redraw, and only if a figure needs it
        if not frame:
            frame.append(tables.runs_timeseries(view.runs, manager.series_frames))
        return frame[0]

    summary_card(view)
    engine_panels(view, ts, rows_version)
    charts(view, ts, rows_version, finished_version)


live_cards()
