"""Sweep: the chosen engines at several concurrency levels (or request rates), one run at a time.

Every engine runs at every load point on the same trace, load point by load
point, so a sweep stopped early still compares all engines at the loads it
reached. The charts and the table fill in as runs end.
"""

from __future__ import annotations

import pandas as pd
import streamlit as st

from dashboard import comparison, rounds_view, tables
from dashboard.replay_launch import ReplayLaunch, ReplayView
from metrics.frames import with_mean_draft_length
from presentation import figures
from presentation.palette import engine_label
from widgets import controls
from widgets.figure_memo import session_memo
from widgets.forms import replay_form
from widgets.manager import run_manager
from widgets.verdict import verdict_card

manager = run_manager()
spec, problem = replay_form("sweep", sweep=True)


def current_view() -> ReplayView | None:
    launch = manager.latest("sweep")
    return launch.view() if isinstance(launch, ReplayLaunch) else None


def describe_end(view: ReplayView) -> str:
    return f"{len(view.results)} of {len(view.runs)} run(s) saved to `{view.out_dir.name}` in the runs directory."


st.header("Sweep", divider="gray")
controls.start_stop(manager, "sweep", spec, problem)
st.caption(
    "Runs never overlap: each engine has the device to itself at every load point, in rounds whose order changes "
    "(ABDC, BCAD, …: each engine in every place and after every other equally often); the verdict at each load "
    "point reads the rounds' ratios to AR of the same round."
)
shown = current_view()
every = controls.remember_rendered("sweep", shown)
memo = session_memo("sweep")


def progress_card(view: ReplayView) -> None:
    total = sum(r.total for r in view.runs)
    finished = sum(r.finished for r in view.runs)
    current = next((r for r in view.runs if r.state.underway), None)
    rounds = view.spec.rounds
    total *= rounds
    finished = sum(len(r.requests) for r in view.rounds) + sum(r.finished for r in view.runs if not r.state.ended)
    text = f"{finished}/{total} requests over {len(view.runs)} runs of {rounds} round{'s' if rounds > 1 else ''}"
    if current is not None:
        text += f" · now {engine_label(current.engine)} at {current.load}"
    st.progress(finished / total if total else 0.0, text=text)
    rows = [
        {
            "Engine": engine_label(r.engine),
            "Load": r.load,
            "State": str(r.state),
            "Requests": f"{r.finished}/{r.total}",
            # as text: a run not started yet has no figures, and the grid would write "None"
            "Output tok/s": comparison.text(r.summary.output_tok_s if r.summary else None, "{:,.1f}"),
            "TTFT p95 (ms)": comparison.text(r.summary.ttft_p95_ms if r.summary else None, "{:,.0f}"),
            "TPOT p95 (ms)": comparison.text(r.summary.tpot_p95_ms if r.summary else None, "{:,.1f}"),
        }
        for r in view.runs
    ]
    with st.expander("Runs", expanded=view.status.active):
        st.dataframe(pd.DataFrame(rows), hide_index=True)
    for r in view.runs:
        if r.result is not None and r.result.engine_error:
            st.error(f"{engine_label(r.engine)} at {r.load} crashed: {r.result.engine_error}")


def charts_card(view: ReplayView) -> None:
    # a run that stopped early (Stop, timeout, engine error) measured only part of its trace:
    # it stays in the table, marked, but not on the charts, where it would read as a full load point
    short = {r.run_id: r.stop_reason for r in view.rounds if r.stop_reason is not None}
    frames = tables.results_frames(view.rounds)
    # each run's figures pooled over its rounds, × AR paired round by round (simultaneous runs pair with nothing)
    pooled = rounds_view.summary_frame(view.comparisons) if view.comparisons else frames.summary
    table = with_mean_draft_length(pooled, frames.requests)
    # a plain lookup, not map + fillna: with no run stopped, map gives float NaNs that "" cannot fill (Pandas4Warning)
    table["stopped early"] = [str(short.get(run_id, "")) for run_id in table["run_id"]]
    summary = comparison.with_times_ar(table[~table["run_id"].isin(short)])
    closed = summary["request_rate"].isna().all()
    x = "concurrency" if closed else "request_rate"
    # the question the sweep answers first: does speculation beat AR, and up to which load?
    # the figures change only when a round ends (or a comparison is updated): built again only then
    version = (view.launch_id, len(view.rounds), tuple((c.rounds_done, c.final) for c in view.comparisons))
    st.plotly_chart(memo.get("speedup", version, lambda: figures.speedup_vs_load(summary, x)),
                    key="sweep.chart.speedup")  # fmt: skip
    charts = (
        ({"output_tok_s": ""}, "Throughput", "output tokens / s"),
        ({"ttft_p95_ms": "p95", "ttft_p99_ms": "p99"}, "TTFT p95 / p99", "ms"),
        ({"tpot_p95_ms": "p95", "tpot_p99_ms": "p99"}, "TPOT p95 / p99", "ms"),
        ({"acceptance_rate": ""}, "Acceptance (accepted / drafted)", "share accepted"),
        (
            # steps that drafted nothing count as L = 0, so the mean sits below --min-draft-len
            {"mean_draft_len": "mean L (no draft = 0)", "mean_acceptance_length": "tokens/step"},
            "Mean draft length and tokens per step",
            "tokens (a step drafting nothing: L = 0)",
        ),
    )
    columns = st.columns(2)
    for i, (metrics, title, y_title) in enumerate(charts):
        with columns[i % 2]:
            def build(m=metrics, t=title, y=y_title):  # noqa: ANN202  # bound now, built only if the rounds moved
                return figures.metric_vs_load(summary, m, x, t, y)

            figure = memo.get(f"chart.{i}", version, build)
            st.plotly_chart(figure, key=f"sweep.chart.{i}")
    if short:
        st.caption(
            f"Not on the charts: {len(short)} run(s) that stopped before their trace ended "
            f"({', '.join(sorted(set(short.values())))}); see the table."
        )
    if not table.empty:
        st.subheader("Results")
        # sized to its rows: an inner scroll would hide the last load point's runs
        with st.container(key="sweep-results"):  # a stable name for the grid in the page
            st.dataframe(comparison.summary_table(table), hide_index=True, height="content")
        with st.expander("Every column (percentiles, request rate, duration, rounds)"):
            st.dataframe(
                comparison.summary_table(table, columns=comparison.ALL),
                hide_index=True,
                height="content",
            )
        st.caption(
            "× AR: each round against AR of the same round at the same load, the median over rounds with the "
            "interval a repeat run's median falls in – tok/s above 1 is faster than AR, TPOT below 1 is faster; "
            "— where it does not apply."
        )


@st.fragment(run_every=every)
def sweep_cards() -> None:
    """The page's one refresh loop: status, verdicts, progress and charts, redrawn together."""
    view = current_view()
    idle = "Choose engines and load levels in the sidebar, then press **Start**."
    if not controls.status_body("sweep", view, idle, describe_end) or view is None:
        return
    verdict_card(view)
    if view.runs:
        progress_card(view)
    charts_card(view)


sweep_cards()
