"""A comparison's rounds as the pages show them: the verdict, × AR with its interval, requests pooled over rounds.

The figures come from ``workloads.drivers.rounds.LoadPointComparison`` (the
sweep's own arithmetic, ``metrics.round_summary``); this module only arranges
them as text and frames. Nothing here calls Streamlit.
"""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from dashboard.tables import REQUEST_FIELDS
from metrics.comparison import NA
from metrics.frames import normalize
from metrics.request_metrics import RequestMetrics
from metrics.round_summary import ComparisonRow
from metrics.rounds import RatioInterval
from metrics.schema import SUMMARY_COLUMNS
from presentation.palette import engine_label
from workloads.drivers.live import RunSnapshot
from workloads.drivers.rounds import LoadPointComparison
from workloads.drivers.run_result import RunResult, load_label

# ratio name -> the row's header in the Live run's summary
RATIO_ROWS = {
    "tok_s": "tok/s × AR",
    "tpot_p50": "TPOT p50 × AR",
    "tpot_p99": "TPOT p99 × AR",
    "ttft_p50": "TTFT p50 × AR",
}
SIMULTANEOUS_NOTE = (
    "Run simultaneously: the engines share the device (the machine's cores), so each one's figures include the "
    "others' load and its ratios to AR are not per-engine speeds. No verdict is given; run them one after "
    "another for one."
)


def interval_text(ratio: RatioInterval | None) -> str:
    """``1.23× (1.10–1.31)``, or ``—`` before a round paired with AR has ended."""
    return NA if ratio is None else ratio.text()


def progress_text(point: LoadPointComparison, precise: bool = False) -> str:
    """``after 2 of 3 rounds`` (``of up to 12`` when rounds are added until precise) / ``3 rounds``."""
    if point.final:
        return f"{point.rounds_done} round{'s' if point.rounds_done != 1 else ''}"
    return f"after {point.rounds_done} of {'up to ' if precise else ''}{point.rounds_planned} rounds"


def speedups(point: LoadPointComparison | None) -> dict[str, RatioInterval]:
    """Each engine's tokens/s × AR interval (engines without a paired round yet are left out)."""
    if point is None:
        return {}
    return {row.summary.engine: r for row in point.comparison.rows if (r := row.ratios.get("tok_s")) is not None}


def rounds_table(point: LoadPointComparison, engines: Sequence[str]) -> pd.DataFrame:
    """One row per figure, one column per engine, as text: pooled figures and × AR intervals over rounds."""
    by_engine: dict[str, ComparisonRow] = {row.summary.engine: row for row in point.comparison.rows}
    figures = {
        "Output tok/s (pooled)": lambda r: _num(r.summary.output_tok_s, "{:,.1f}"),
        **{header: (lambda r, name=name: interval_text(r.ratios.get(name))) for name, header in RATIO_ROWS.items()},
        "Acceptance": lambda r: _num(r.summary.acceptance_rate, "{:.2f}"),
        "Tokens / step": lambda r: _num(r.summary.mean_acceptance_length, "{:.2f}"),
        "TTFT p50 (ms)": lambda r: _num(r.summary.ttft_p50_ms, "{:,.0f}"),
        "TTFT p99 (ms)": lambda r: _num(r.summary.ttft_p99_ms, "{:,.0f}"),
        "TPOT p50 (ms)": lambda r: _num(r.summary.tpot_p50_ms, "{:,.1f}"),
        "TPOT p99 (ms)": lambda r: _num(r.summary.tpot_p99_ms, "{:,.1f}"),
        "Rounds": lambda r: str(r.rounds),
    }
    table = {
        engine_label(e): [f(by_engine[e]) if e in by_engine else NA for f in figures.values()] for e in engines
    }
    return pd.DataFrame(table, index=pd.Index(list(figures), name="Metric"))


def summary_frame(points: Sequence[LoadPointComparison]) -> pd.DataFrame:
    """summary.csv's frame of the load points' runs: figures pooled over rounds, × AR with the interval
    a repeat run's median falls in."""
    rows = [row.row() for point in points for row in point.comparison.rows]
    return normalize(pd.DataFrame(rows, columns=list(SUMMARY_COLUMNS), dtype=object), SUMMARY_COLUMNS)


def _num(value: float | None, fmt: str) -> str:
    return NA if value is None else fmt.format(value)


def pooled_requests(rounds: Sequence[RunResult], runs: Sequence[RunSnapshot]) -> pd.DataFrame:
    """Every finished request of every round so far, engine by engine in ``runs``' order (the page's, whatever
    order the rounds ran in): its ended rounds, then its round in progress.

    One row per request and round: ``engine``, ``load``, ``round`` and ``REQUEST_FIELDS``.
    """
    rows = [
        {"engine": r.engine, "load": load_label(r.policy), "round": r.round, **_fields(m)}
        for r in rounds
        for m in r.metrics
    ]
    rows += [
        {"engine": run.engine, "load": run.load, "round": None, **_fields(m)}
        for run in runs
        if not run.state.ended
        for m in run.metrics
    ]
    place = {run.engine: i for i, run in enumerate(runs)}
    rows.sort(key=lambda row: place.get(row["engine"], len(place)))  # stable: rounds and requests keep their order
    return pd.DataFrame(rows, columns=["engine", "load", "round", *REQUEST_FIELDS])


def _fields(m: RequestMetrics) -> dict[str, object]:
    return {name: getattr(m, name) for name in REQUEST_FIELDS}
