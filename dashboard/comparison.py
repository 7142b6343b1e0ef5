"""Every run against AR, and the summary as people read it: human headers, units, rounding, "—".

``with_times_ar`` sets each run of a summary frame (``metrics.schema`` summary
columns) beside the AR run at the same load – same concurrency and request
rate, and the same ``within`` columns (the Runs page compares within one run
directory) – as three ratios:

* ``x_ar_tok_s``      – output tokens/s over AR's: above 1 the engine is faster;
* ``x_ar_tpot_p50`` / ``x_ar_tpot_p99`` – TPOT over AR's: below 1 its tokens come faster.

A run without an AR run to compare with gets no ratio (NaN, shown "—").
``summary_table`` turns the frame into what the pages show: key columns
first, then latencies, each with its unit. ``comparison_table`` is the Live
run's transposed form: one row per metric, one column per engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict
from numbers import Number

import pandas as pd
from pandas.io.formats.style import Styler

from dashboard.palette import engine_label
from metrics.summary import RunSummary

LOAD = ("concurrency", "request_rate")
RATIOS = {"x_ar_tok_s": "output_tok_s", "x_ar_tpot_p50": "tpot_p50_ms", "x_ar_tpot_p99": "tpot_p99_ms"}
NA = "—"

# source column -> (header, format); the order is the table's, key columns first
COLUMNS = {
    "label": ("Run", "{}"),
    "engine": ("Engine", "{}"),
    "concurrency": ("Concurrency", "{:.0f}"),
    "request_rate": ("Request rate (req/s)", "{:g}"),
    "requests": ("Requests ok", "{}"),
    "output_tok_s": ("Output tok/s", "{:,.1f}"),
    "x_ar_tok_s": ("tok/s × AR", "{:.2f}×"),
    "x_ar_tpot_p50": ("TPOT p50 × AR", "{:.2f}×"),
    "x_ar_tpot_p99": ("TPOT p99 × AR", "{:.2f}×"),
    "acceptance_rate": ("Acceptance", "{:.2f}"),
    "mean_acceptance_length": ("Tokens / step", "{:.2f}"),
    "mean_draft_len": ("Draft length L", "{:.2f}"),
    "ttft_p50_ms": ("TTFT p50 (ms)", "{:,.0f}"),
    "ttft_p95_ms": ("TTFT p95 (ms)", "{:,.0f}"),
    "ttft_p99_ms": ("TTFT p99 (ms)", "{:,.0f}"),
    "tpot_p50_ms": ("TPOT p50 (ms)", "{:,.1f}"),
    "tpot_p95_ms": ("TPOT p95 (ms)", "{:,.1f}"),
    "tpot_p99_ms": ("TPOT p99 (ms)", "{:,.1f}"),
    "req_s": ("Requests / s", "{:.2f}"),
    "goodput_req_s": ("Goodput (req/s)", "{:.2f}"),
    "duration_s": ("Duration (s)", "{:,.1f}"),
    "stopped early": ("Stopped early", "{}"),
}
# shown only when some row has a value: a closed loop has no request rate, a run without SLOs no goodput
OPTIONAL = {"concurrency", "request_rate", "goodput_req_s", "mean_draft_len", "stopped early"}


def with_times_ar(summary: pd.DataFrame, within: Sequence[str] = ()) -> pd.DataFrame:
    """``summary`` plus the ``RATIOS`` columns, each run against the first AR run at its load and ``within``."""
    out = summary.reset_index(drop=True)  # rows are matched by position; the caller's index comes back below
    for ratio in RATIOS:
        out[ratio] = float("nan")
    if out.empty:
        return out.set_axis(summary.index)
    key = out[[*within, *LOAD]].apply(lambda row: "|".join(_key(v) for v in row), axis=1)
    ar = out[out["engine"] == "ar"].assign(_key=key).drop_duplicates("_key").set_index("_key")
    for ratio, column in RATIOS.items():
        if column not in out:
            continue
        reference = pd.to_numeric(key.map(ar[column]), errors="coerce").to_numpy(dtype=float, copy=True)
        reference[~(reference > 0)] = float("nan")
        out[ratio] = pd.to_numeric(out[column], errors="coerce").to_numpy(dtype=float) / reference
    return out.set_axis(summary.index)


def summary_frame(summaries: Sequence[RunSummary]) -> pd.DataFrame:
    """A summary frame (the summary.csv columns) of ``RunSummary`` values, e.g. of runs still going."""
    return pd.DataFrame([asdict(s) for s in summaries], columns=list(RunSummary.__dataclass_fields__))


def summary_table(summary: pd.DataFrame, within: Sequence[str] = ()) -> Styler:
    """The pages' results table: ``summary`` with the × AR ratios, human headers, units and "—"."""
    frame = with_times_ar(summary, within)
    frame["engine"] = frame["engine"].map(engine_label)
    frame["requests"] = [f"{ok}/{n}" for ok, n in zip(frame["completed"], frame["num_requests"], strict=True)]
    if "stopped early" in frame:
        frame["stopped early"] = frame["stopped early"].replace("", float("nan"))
    shown = [c for c in COLUMNS if c in frame and not (c in OPTIONAL and frame[c].isna().all())]
    table = frame[shown].reset_index(drop=True)
    # Streamlit's grid draws a missing number as "None" whatever the Styler says: a column with a gap is
    # written out as text, "—" in the gap; a complete one stays numeric (it sorts as numbers)
    formats = {}
    for column in shown:
        header, fmt = COLUMNS[column]
        if table[column].isna().any():
            table[column] = [text(v, fmt) for v in table[column]]
        else:
            formats[header] = fmt
    table = table.rename(columns={c: COLUMNS[c][0] for c in shown})
    return table.style.format(formats, na_rep=NA).hide(axis="index")


def comparison_table(summaries: Sequence[RunSummary | None], engines: Sequence[str]) -> pd.DataFrame:
    """One row per metric, one column per engine (in ``engines`` order), as text: the Live run's summary.

    ``summaries`` holds each engine's summary so far (``None`` before its first finished request).
    """
    frame = with_times_ar(summary_frame([s for s in summaries if s is not None]))
    by_engine = {row["engine"]: row for _, row in frame.iterrows()}
    rows = (
        "output_tok_s", "x_ar_tok_s", "x_ar_tpot_p50", "x_ar_tpot_p99", "acceptance_rate", "mean_acceptance_length",
        "ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p95_ms", "tpot_p99_ms", "req_s",
    )  # fmt: skip
    table = {
        engine_label(engine): [text(by_engine[engine][c], COLUMNS[c][1]) if engine in by_engine else NA for c in rows]
        for engine in engines
    }
    return pd.DataFrame(table, index=pd.Index([COLUMNS[c][0] for c in rows], name="Metric"))


def _key(value: object) -> str:
    """A load or directory as text; NaN (a closed loop's request rate) matches NaN, and 4 matches 4.0."""
    if value is None or pd.isna(value):
        return ""
    return f"{value:g}" if isinstance(value, Number) else str(value)


def text(value: object, fmt: str) -> str:
    """``value`` formatted with ``fmt``, or ``—`` when it is missing (None or NaN)."""
    return NA if value is None or pd.isna(value) else fmt.format(value)
