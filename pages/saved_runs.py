"""Runs: every run directory under the runs root – open one, compare several, download, delete.

A run directory is what ``python -m workloads replay --out DIR`` writes, and
what the Live run and Sweep pages write for each launch: the same five files,
read back with ``metrics.runs``. Opening several directories puts all their
runs on the same charts, one colour per engine, and one HTML report of them can
be downloaded. A bench directory (``python -m workloads bench --out DIR``)
opens the run directories below it, with its goals above them.
"""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pandas as pd
import streamlit as st

from dashboard import comparison
from dashboard.bench_dirs import find_bench_dirs, goals_table, report_page
from metrics.export import RunFilesError
from metrics.frames import cdf, last_round, position_frame, with_labels, with_mean_draft_length
from metrics.runs import RunDirectory, list_run_dirs, load_point_verdicts, load_run_dir
from metrics.schema import RUN_FILES
from presentation import figures
from presentation.palette import engine_label
from widgets.manager import run_manager

MIME = {".csv": "text/csv", ".jsonl": "application/x-ndjson", ".json": "application/json"}

manager = run_manager()
root = manager.runs_root


@st.cache_data(max_entries=32, show_spinner=False)
def load(path: str, modified: float) -> RunDirectory:
    """A run directory's frames; ``modified`` (run.json's mtime) makes an appended directory reload."""
    return load_run_dir(path)


def name_of(path: Path) -> str:
    return "." if path == root else str(path.relative_to(root))


st.header("Runs", divider="gray")
st.caption(f"Run directories under `{root}` (set `PDV_RUNS_DIR` to look elsewhere).")
infos = list_run_dirs(root)
benches = find_bench_dirs(root, infos)
if not infos and not benches:
    st.info(
        "No runs yet. Start one on the Live run or Sweep page, or run "
        f"`python -m workloads replay --out {root}/NAME` (runs written elsewhere are not listed here)."
    )
    st.stop()

by_name = {name_of(info.path): info for info in infos}
bench_by_name = {name_of(b.path): b for b in benches}
listed = [(name, info.modified, info.run_ids, info.engines, "runs") for name, info in by_name.items()] + [
    (name, b.modified, [r for i in b.run_dirs for r in i.run_ids], [e for i in b.run_dirs for e in i.engines], "bench")
    for name, b in bench_by_name.items()
]
listed.sort(key=lambda row: row[1], reverse=True)
st.dataframe(
    pd.DataFrame(
        [
            {
                "directory": name,
                "modified": datetime.fromtimestamp(modified),
                "runs": len(run_ids),
                "engines": ", ".join(engine_label(e) for e in dict.fromkeys(engines)),
                "kind": kind,
            }
            for name, modified, run_ids, engines, kind in listed
        ]
    ),
    hide_index=True,
)
choices = [row[0] for row in listed]
# newest first by default; directories deleted meanwhile (here or elsewhere) drop out of the choice.
# "runs.opened" is a plain session key: it outlives a visit to another page, which a widget's own key does not
opened_before = st.session_state.get("runs.open", st.session_state.get("runs.opened"))
st.session_state["runs.open"] = choices[:1] if opened_before is None else [n for n in opened_before if n in choices]
chosen = st.multiselect("Open (choose several to compare them side by side)", choices, key="runs.open")
st.session_state["runs.opened"] = chosen
if not chosen:
    st.stop()

for name in (n for n in chosen if n in bench_by_name):
    st.subheader(f"Benchmark goals – {name}")
    goals = goals_table(bench_by_name[name].path)
    if goals.empty:
        st.caption("The parts this bench ran set no goal.")
    else:
        st.dataframe(goals, hide_index=True, key=f"runs.goals.{name}")
# a bench opens the run directories below it; each directory once, however it was chosen
run_names = dict.fromkeys(
    n
    for name in chosen
    for n in ([name] if name in by_name else [name_of(info.path) for info in bench_by_name[name].run_dirs])
)
opened: dict[str, RunDirectory] = {}
for name in run_names:
    try:
        opened[name] = load(str(by_name[name].path), by_name[name].modified)
    except (RunFilesError, OSError, ValueError) as exc:
        st.error(f"{name} cannot be read: {exc}")
if not opened:
    st.stop()


def stopped_early(directory: RunDirectory) -> dict[str, str]:
    """run_id -> why it stopped before its trace ended, for the runs that did."""
    return {str(r.get("run_id")): str(r["stop_reason"]) for r in directory.runs if r.get("stop_reason")}


def labelled(frame: pd.DataFrame, directory: RunDirectory, name: str) -> pd.DataFrame:
    out = with_labels(frame, directory.frames.summary)
    why = short[name]
    out["label"] = [
        f"{label} (stopped early: {why[run]})" if run in why else label
        for label, run in zip(out["label"], out["run_id"], strict=True)
    ]
    if len(opened) > 1:  # a comprehension, not a vectorised add: an empty frame's label column is not text
        out["label"] = [f"{name} · {label}" for label in out["label"]]
    return out


short = {name: stopped_early(directory) for name, directory in opened.items()}
for name, directory in opened.items():  # one verdict line per load point, from the comparison that wrote it
    for point in load_point_verdicts(directory.runs):
        where = f"{name} · {point.load}" if len(opened) > 1 else point.load
        st.markdown(f"**{where}:** {point.verdict}")
        if point.noise_warning:
            st.warning(point.noise_warning, icon=":material/warning:")
summary = pd.concat(
    [
        with_mean_draft_length(labelled(d.frames.summary, d, n), d.frames.requests).assign(
            directory=n, **{"stopped early": [short[n].get(r, "") for r in d.frames.summary["run_id"]]}
        )
        for n, d in opened.items()
    ],
    ignore_index=True,
)
requests = pd.concat([d.frames.requests.assign(directory=n) for n, d in opened.items()], ignore_index=True)
series = pd.concat([labelled(last_round(d.frames.timeseries), d, n) for n, d in opened.items()], ignore_index=True)
ttft = pd.concat([labelled(cdf(d.frames.requests, "ttft_ms"), d, n) for n, d in opened.items()], ignore_index=True)
tpot = pd.concat([labelled(cdf(d.frames.requests, "tpot_ms"), d, n) for n, d in opened.items()], ignore_index=True)
positions = pd.concat([labelled(position_frame(d.runs), d, n) for n, d in opened.items()], ignore_index=True)

charts = st.tabs(["Summary", "Latency distributions", "Over time"])
with charts[0]:
    left, right = st.columns(2)
    left.plotly_chart(
        figures.summary_bars(summary, {"output_tok_s": "tok/s"}, "Throughput", "output tokens / s"),
        key="runs.chart.tput",
    )
    right.plotly_chart(
        figures.summary_bars(summary, {"acceptance_rate": "acceptance"}, "Acceptance", "accepted / drafted"),
        key="runs.chart.accept",
    )
    left.plotly_chart(
        figures.summary_bars(summary, {f"ttft_{q}_ms": q for q in ("p50", "p95", "p99")}, "TTFT", "ms"),
        key="runs.chart.ttft",
    )
    right.plotly_chart(
        figures.summary_bars(summary, {f"tpot_{q}_ms": q for q in ("p50", "p95", "p99")}, "TPOT", "ms"),
        key="runs.chart.tpot",
    )
    left.plotly_chart(figures.acceptance_by_position(positions), key="runs.chart.positions")
with charts[1]:
    left, right = st.columns(2)
    left.plotly_chart(figures.cdf_lines(ttft, "TTFT distribution", "ms"), key="runs.chart.ttft_cdf")
    right.plotly_chart(figures.cdf_lines(tpot, "TPOT distribution", "ms"), key="runs.chart.tpot_cdf")
with charts[2]:
    left, right = st.columns(2)
    left.plotly_chart(figures.throughput_over_time(series, group="label"), key="runs.chart.series_tput")
    right.plotly_chart(figures.draft_length_over_time(series, group="label"), key="runs.chart.series_len")
# the key columns fit a laptop's width and the table its rows: nothing hides behind a scroll
with st.container(key="runs-summary"):  # a stable name for the grid in the page
    st.dataframe(
        comparison.summary_table(summary, within=["directory"], columns=comparison.BY_RUN),
        hide_index=True,
        height="content",
    )
with st.expander("Every column (engine and load apart, percentiles, request rate, duration, rounds)"):
    st.dataframe(
        comparison.summary_table(summary, within=["directory"], columns=comparison.ALL),
        hide_index=True,
        height="content",
    )
st.caption(
    "× AR: against the AR run at the same load in the same directory – for runs in rounds, the median of each "
    "round's ratio to AR of the same round with "
    "the interval a repeat run's median falls in; tok/s above 1 is faster than AR, "
    "TPOT below 1 is faster; — where there is no such AR run. Over time: each run's last round."
)

# what is open, as it is now: a directory appended to since the report was built needs a new one
shown_now = tuple((str(opened[n].path), by_name[n].modified) for n in opened)
built = st.session_state.get("runs.report")
if st.button("Build report (HTML)", icon=":material/description:", key="runs.report.build"):
    try:
        built = (shown_now, report_page([opened[n].path for n in opened], root))
    except (RunFilesError, OSError, ValueError) as exc:
        st.error(f"The report cannot be built: {exc}")
        built = None
    st.session_state["runs.report"] = built
if built is not None and built[0] == shown_now:  # a report of what is open now, not of an earlier choice
    st.download_button(
        "Download report (HTML)",
        built[1],
        file_name="pd-verify-report.html",
        mime="text/html",
        icon=":material/download:",
        key="runs.report.download",
    )
st.caption(
    "One self-contained HTML file of the runs open above – setup, summary table and charts, readable "
    "without a network – as `python -m workloads report` writes it."
)

st.subheader("Files")
for name, directory in opened.items():
    with st.expander(f"{name} – {len(directory.runs)} run(s)", expanded=len(opened) == 1):
        setups = {
            (
                f"models: {r.get('models', {}).get('verifier', '?')} (verifier), "
                f"{r.get('models', {}).get('draft', '?')} (draft) · device: {r.get('device', '?')} · "
                f"dataset: {r.get('trace', {}).get('source', '?')}"
            ): None
            for r in directory.runs
        }
        if len(setups) > 1:  # `--out` appends: one directory can hold runs that do not compare
            st.warning(
                f"The runs in this directory differ in models, device or dataset ({len(setups)} setups); "
                "compare them with care:\n\n" + "\n\n".join(f"- {setup}" for setup in setups)
            )
        else:
            st.caption(next(iter(setups), ""))
        buttons = st.columns(len(RUN_FILES) + 1)
        for column, file_name in zip(buttons, RUN_FILES, strict=False):
            path = directory.path / file_name
            if path.is_file():
                column.download_button(
                    file_name,
                    path.read_bytes(),
                    file_name=f"{Path(name).name}-{file_name}",
                    mime=MIME[path.suffix],
                    icon=":material/download:",
                    key=f"runs.download.{name}.{file_name}",
                )
        confirm_key = "runs.confirm_delete"
        if st.session_state.get(confirm_key) != name:
            if buttons[-1].button("Delete", icon=":material/delete:", key=f"runs.delete.{name}"):
                st.session_state[confirm_key] = name
                st.rerun()
            continue
        st.warning(f"Delete `{directory.path}` and all {len(directory.runs)} run(s) in it? This cannot be undone.")
        yes, no = st.columns([1, 6])
        if yes.button("Delete permanently", type="primary", key=f"runs.delete_yes.{name}"):
            st.session_state.pop(confirm_key, None)
            try:
                manager.delete_run_dir(directory.path)
            except (ValueError, OSError) as exc:
                st.error(str(exc))
            else:
                st.rerun()
        if no.button("Cancel", key=f"runs.delete_no.{name}"):
            st.session_state.pop(confirm_key, None)
            st.rerun()
