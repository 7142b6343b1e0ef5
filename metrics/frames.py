"""pandas views of runs, identical whether built live or read back from files.

``RunFrames`` holds one DataFrame per file with exactly the file's columns.
``live_frames`` builds them from in-memory ``RunRecord``s (a run the dashboard
just made); ``metrics.runs.load_run_dir`` reads them from a run directory.
Both pass through ``normalize``, so a chart cannot tell the two apart: text
columns stay text, every other column is numeric with NaN for an empty cell.

``position_frame`` reads the per-position acceptance that run.json carries
(one row per run and draft position), whichever way the entries were made.

The helpers at the bottom shape frames for charts (long format, one row per
point, a readable ``label`` per run).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import astuple, dataclass, fields
from typing import Any

import numpy as np
import pandas as pd

from metrics.run_record import RunRecord, output_object, request_rows, summary_row, timeseries_rows
from metrics.schema import OUTPUT_FIELDS, REQUEST_COLUMNS, SUMMARY_COLUMNS, TEXT_COLUMNS, TIMESERIES_COLUMNS
from metrics.timeseries import TimeseriesRow


@dataclass(frozen=True)
class RunFrames:
    requests: pd.DataFrame  # REQUEST_COLUMNS
    timeseries: pd.DataFrame  # TIMESERIES_COLUMNS
    summary: pd.DataFrame  # SUMMARY_COLUMNS
    outputs: pd.DataFrame  # OUTPUT_FIELDS (token ids as lists)


def normalize(df: pd.DataFrame, columns: Sequence[str]) -> pd.DataFrame:
    """Exactly ``columns`` in order; text columns as strings, the rest numeric (NaN = empty)."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        raise ValueError(f"missing columns: {', '.join(missing)}")
    out = df.loc[:, list(columns)].copy()
    for column in columns:
        if column in TEXT_COLUMNS:
            out[column] = out[column].astype("str").where(out[column].notna(), np.nan)
        else:
            out[column] = pd.to_numeric(out[column])
    return out.reset_index(drop=True)


def _frame(rows: list[tuple], columns: Sequence[str]) -> pd.DataFrame:
    return normalize(pd.DataFrame(rows, columns=list(columns), dtype=object), columns)


def live_frames(records: Sequence[RunRecord]) -> RunFrames:
    """Frames of in-memory runs, the same as writing them and loading the directory."""
    requests = [row for r in records for row in request_rows(r.key, r.requests, r.round)]
    series = [row for r in records for row in timeseries_rows(r.key, r.timeseries, r.round)]
    summaries = [summary_row(r.summary) for r in records]
    outputs = [output_object(o) for r in records for o in r.outputs]
    return RunFrames(
        requests=_frame(requests, REQUEST_COLUMNS),
        timeseries=_frame(series, TIMESERIES_COLUMNS),
        summary=_frame(summaries, SUMMARY_COLUMNS),
        outputs=pd.DataFrame(outputs, columns=list(OUTPUT_FIELDS)),
    )


def timeseries_frame(rows: Sequence[TimeseriesRow]) -> pd.DataFrame:
    """Every field of in-memory time series rows (lane busy shares, GPM counters included).

    For a run in progress (``RunSnapshot.timeseries``); timeseries.csv keeps only
    ``TIMESERIES_COLUMNS``.
    """
    columns = [f.name for f in fields(TimeseriesRow)]
    frame = pd.DataFrame([astuple(r) for r in rows], columns=columns, dtype=object)
    return frame.apply(pd.to_numeric).astype(float) if rows else frame.astype(float)


POSITION_COLUMNS = ("run_id", "engine", "position", "drafted", "accepted", "drafts", "rate", "per_draft")


def position_frame(runs: Iterable[Mapping[str, Any]]) -> pd.DataFrame:
    """Acceptance by draft position, one row per run and position: ``POSITION_COLUMNS``.

    ``runs`` are run.json entries (``RunDirectory.runs``, or a ``RunRecord``'s
    key and ``meta``), whose ``position_acceptance`` lists
    ``metrics.summary.PositionAcceptance`` as dicts; ``rate`` and ``per_draft``
    are that class's two definitions. Files written before draft steps were
    counted have no ``drafts``: their ``drafts`` and ``per_draft`` are NaN. A run
    that drafted nothing (AR) has no rows.
    """
    rows = [
        (run.get("run_id"), run.get("engine"), p["position"], p["drafted"], p["accepted"], p.get("drafts"))
        for run in runs
        for p in run.get("position_acceptance") or ()
    ]
    df = _frame(rows, POSITION_COLUMNS[:6])
    df["rate"] = df["accepted"] / df["drafted"].where(df["drafted"] > 0)
    df["per_draft"] = df["accepted"] / df["drafts"].where(df["drafts"] > 0)
    return df


def with_mean_draft_length(summary: pd.DataFrame, requests: pd.DataFrame) -> pd.DataFrame:
    """``summary`` plus ``mean_draft_len``: tokens drafted per verify step over the run's requests.

    A step that drafted nothing counts as L = 0, so the mean can sit below ``--min-draft-len``; a run without
    verify steps (AR) has none (NaN, not 0). ``requests`` is a requests frame (``run_id``, ``drafted_tokens``,
    ``verify_steps``) over every round.
    """
    out = summary.copy()
    if requests.empty:
        out["mean_draft_len"] = float("nan")
        return out
    totals = requests.groupby("run_id")[["drafted_tokens", "verify_steps"]].sum()
    per_run = (totals["drafted_tokens"] / totals["verify_steps"].where(totals["verify_steps"] > 0)).rename(
        "mean_draft_len"
    )
    return out.merge(per_run, left_on="run_id", right_index=True, how="left")


# --------------------------------------------------------------------------
# Chart helpers
# --------------------------------------------------------------------------


def run_labels(summary: pd.DataFrame) -> dict[str, str]:
    """run_id -> "engine · load", e.g. ``pdv · C=4`` or ``pd · R=2/s (C<=8)``."""
    labels = {}
    for row in summary.itertuples(index=False):
        if pd.isna(row.request_rate):
            load = f"C={int(row.concurrency)}"
        else:
            cap = "" if pd.isna(row.concurrency) else f" (C<={int(row.concurrency)})"
            load = f"R={row.request_rate:g}/s{cap}"
        labels[str(row.run_id)] = f"{row.engine} · {load}"
    seen = Counter(labels.values())
    # the same engine at the same load twice (a rerun appended to one directory): keep them apart
    return {run_id: f"{label} · {run_id}" if seen[label] > 1 else label for run_id, label in labels.items()}


def with_labels(df: pd.DataFrame, summary: pd.DataFrame) -> pd.DataFrame:
    """``df`` plus a ``label`` column naming each row's run (for legends)."""
    labels = run_labels(summary)
    out = df.copy()
    out["label"] = out["run_id"].map(labels).fillna(out["run_id"])
    return out


def cdf(requests: pd.DataFrame, column: str, completed_only: bool = True) -> pd.DataFrame:
    """Empirical CDF of a request column per run: run_id, engine, concurrency, value, fraction."""
    df = requests
    if completed_only:
        df = df[df["status"] == "ok"]
    df = df[["run_id", "engine", "concurrency", column]].dropna(subset=[column])
    parts = []
    for _, group in df.groupby("run_id", sort=False):
        g = group.sort_values(column).rename(columns={column: "value"})
        g["fraction"] = np.arange(1, len(g) + 1) / len(g)
        parts.append(g)
    if not parts:
        return pd.DataFrame(columns=["run_id", "engine", "concurrency", "value", "fraction"])
    return pd.concat(parts, ignore_index=True)


def last_round(series: pd.DataFrame) -> pd.DataFrame:
    """Each run's last round of a time series frame: every round's time restarts at 0, and drawn together
    a run's rounds would zig-zag. Rows of files written before rounds (no round) are all kept."""
    last = series.groupby("run_id")["round"].transform("max")
    return series[last.isna() | (series["round"] == last)]
