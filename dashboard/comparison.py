"""The summary as the pages show it: every run against AR, human headers, units, rounding, "—".

The ratios and column formats are ``metrics.comparison``'s (the shareable
report uses them too). ``summary_table`` turns a summary frame into what the
pages show: by default the key columns only (``KEY_METRICS`` after the run's
name or engine and load), narrow enough for a laptop's screen without a
sideways scroll; every column, each with its unit, on demand (``ALL``).
``comparison_table`` is the Live run's transposed form: one row per metric, one
column per engine.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict

import pandas as pd
from pandas.io.formats.style import Styler

from metrics.comparison import (
    COLUMNS,
    KEY_METRICS,
    LOAD,
    NA,
    OPTIONAL,
    RATIOS,
    interval_texts,
    load_text,
    text,
    with_times_ar,
)
from metrics.summary import RunSummary
from presentation.palette import engine_label

__all__ = [
    "ALL", "BY_ENGINE", "BY_RUN", "COLUMNS", "LOAD", "NA", "OPTIONAL", "RATIOS", "comparison_table", "summary_frame",
    "summary_table", "text", "with_times_ar",
]  # fmt: skip

# the key columns after what names a row: a run's name (which holds its engine and load), or engine and load
BY_RUN = ("label", *KEY_METRICS)
BY_ENGINE = ("engine", "load", *KEY_METRICS)
# every column, the load as the numbers it was set by (they sort as numbers)
ALL = tuple(c for c in COLUMNS if c != "load")


def summary_frame(summaries: Sequence[RunSummary]) -> pd.DataFrame:
    """A summary frame (the summary.csv columns) of ``RunSummary`` values, e.g. of runs still going."""
    return pd.DataFrame([asdict(s) for s in summaries], columns=list(RunSummary.__dataclass_fields__))


def summary_table(summary: pd.DataFrame, within: Sequence[str] = (), columns: Sequence[str] = BY_ENGINE) -> Styler:
    """The pages' results table: ``summary`` with the × AR ratios, human headers, units and "—".

    ``columns`` (``COLUMNS`` keys, in order) are shown where the frame has them; an ``OPTIONAL`` one only when
    some row has a value.
    """
    frame = with_times_ar(summary, within)
    frame["load"] = [load_text(c, r) for c, r in zip(frame["concurrency"], frame["request_rate"], strict=True)]
    for ratio in RATIOS:  # with the rounds' min–max where the runs had rounds
        frame[ratio] = interval_texts(frame, ratio)
    frame["engine"] = frame["engine"].map(engine_label)
    frame["requests"] = [f"{ok}/{n}" for ok, n in zip(frame["completed"], frame["num_requests"], strict=True)]
    if "stopped early" in frame:
        frame["stopped early"] = frame["stopped early"].replace("", float("nan"))
    shown = [c for c in columns if c in frame and not (c in OPTIONAL and frame[c].isna().all())]
    table = frame[shown].reset_index(drop=True)
    # Streamlit's grid draws a missing number as "None" whatever the Styler says: a column with a gap is
    # written out as text, "—" in the gap; a complete one stays numeric (it sorts as numbers)
    formats = {}
    for column in shown:
        header, fmt = COLUMNS[column]
        if column in RATIOS:  # already text (interval_texts)
            table[column] = [NA if v is None or (isinstance(v, float) and pd.isna(v)) else v for v in table[column]]
        elif table[column].isna().any():
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
