"""DataFrames the pages chart, built from the run manager's views with ``metrics`` functions.

Finished runs go through ``metrics.frames.live_frames`` – the same frames the
Runs page reads back from the files – so a chart cannot tell a run that just
ended from one loaded from disk. A run in progress has only its time series
rows and finished requests; those become frames with the same column names.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import fields

import pandas as pd

from engine.request import StepRecord
from metrics.frames import RunFrames, live_frames, position_frame, timeseries_frame
from metrics.timeseries import TimeseriesRow
from workloads.drivers.live import RunSnapshot
from workloads.drivers.run_result import RunResult

REQUEST_FIELDS = (
    "request_id", "status", "ttft_ms", "tpot_ms", "e2e_ms", "output_tokens", "drafted_tokens", "accepted_tokens",
    "verify_steps",
)  # fmt: skip


class SeriesFrames:
    """Time series frames already built, per run: the live cards redraw every second and rows only grow.

    Owned by the run manager, shared by every card and tab; safe across threads.
    """

    def __init__(self, size: int = 64) -> None:
        self._size = size
        self._lock = threading.Lock()
        self._frames: dict[tuple[str, str], tuple[tuple[TimeseriesRow, ...], pd.DataFrame]] = {}

    def get(self, run: RunSnapshot) -> pd.DataFrame:
        key, rows = (run.engine, run.load), run.timeseries
        with self._lock:
            cached = self._frames.get(key)
        # rows are immutable and only appended (the last one may be replaced when the run stops)
        if cached is not None and len(cached[0]) == len(rows) and cached[0][0] is rows[0] and cached[0][-1] is rows[-1]:
            return cached[1]
        frame = timeseries_frame(rows)
        frame.insert(0, "engine", run.engine)
        frame.insert(1, "load", run.load)
        with self._lock:
            if len(self._frames) >= self._size:
                self._frames.clear()
            self._frames[key] = (rows, frame)
        return frame


def runs_timeseries(runs: Sequence[RunSnapshot], frames: SeriesFrames | None = None) -> pd.DataFrame:
    """Every time series row of ``runs`` (all ``TimeseriesRow`` fields) plus ``engine`` and ``load``."""
    frames = frames if frames is not None else SeriesFrames()
    parts = [frames.get(run) for run in runs if run.timeseries]
    if not parts:
        return pd.DataFrame(columns=["engine", "load", *(f.name for f in fields(TimeseriesRow))])
    return pd.concat(parts, ignore_index=True)


def results_frames(results: Sequence[RunResult]) -> RunFrames:
    """Frames of finished runs, identical to loading their run directory."""
    return live_frames([r.record() for r in results])


def results_positions(results: Sequence[RunResult]) -> pd.DataFrame:
    """Acceptance by draft position of finished runs, their ended rounds pooled, as the Runs page reads it.

    Each result is one round; a run's counts at a position are summed over its rounds before the rates.
    """
    df = position_frame(
        {"run_id": r.run_id, "engine": r.engine, "position_acceptance": r.record().round_meta["position_acceptance"]}
        for r in results
    )
    if df.empty:
        return df
    counts = ["drafted", "accepted", "drafts"]
    pooled = df.groupby(["run_id", "engine", "position"], as_index=False, sort=False)[counts].sum(min_count=1)
    pooled["rate"] = pooled["accepted"] / pooled["drafted"].where(pooled["drafted"] > 0)
    pooled["per_draft"] = pooled["accepted"] / pooled["drafts"].where(pooled["drafts"] > 0)
    return pooled


def steps_frame(steps: Sequence[StepRecord]) -> pd.DataFrame:
    """One row per verify step (a request's ``steps``, live or read back): ``step`` (1-based), ``draft_len``,
    ``accepted``."""
    return pd.DataFrame(
        [(i + 1, s.draft_len, s.accepted) for i, s in enumerate(steps)],
        columns=["step", "draft_len", "accepted"],
    )


def times_ar(runs: Sequence[RunSnapshot]) -> dict[str, float]:
    """Each run's output tokens/s over AR's in the same view (empty until AR has a figure)."""
    ar = next((r.summary.output_tok_s for r in runs if r.engine == "ar" and r.summary is not None), None)
    if not ar:
        return {}
    return {r.engine: r.summary.output_tok_s / ar for r in runs if r.summary and r.summary.output_tok_s is not None}


def fmt(value: float | None, unit: str = "", digits: int = 0) -> str:
    """A tile's text: ``—`` for a value not measured yet (None or NaN)."""
    if value is None or pd.isna(value):
        return "—"
    return f"{value:,.{digits}f}{unit}"


def suffix_tree_text(run: RunSnapshot) -> str | None:
    """What the run's global suffix tree holds, for its panel; ``None`` for an engine without one.

    An ended run says what the tree held at its end (every request taught it); a run in
    progress, the latest sample's tokens.
    """
    if run.result is not None and run.result.suffix_tree is not None:
        tree = run.result.suffix_tree
        return f"Suffix tree: {tree.tokens:,} tokens in {tree.sequences:,} outputs ({tree.nodes:,} nodes)"
    tokens = next((r.suffix_tree_tokens for r in reversed(run.timeseries) if r.suffix_tree_tokens is not None), None)
    return None if tokens is None else f"Suffix tree: {tokens:,} tokens so far"
