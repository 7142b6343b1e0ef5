"""Every run against AR at the same load, and how summary columns read: headers, units, rounding, "—".

``with_times_ar`` sets each run of a summary frame (``metrics.schema`` summary
columns) beside the AR run at the same load – same concurrency and request
rate, and the same ``within`` columns (e.g. the run directory) – as three ratios:

* ``x_ar_tok_s``      – output tokens/s over AR's: above 1 the engine is faster;
* ``x_ar_tpot_p50`` / ``x_ar_tpot_p99`` – TPOT over AR's: below 1 its tokens come faster.

A run without an AR run to compare with gets no ratio (NaN, shown "—").
A summary written over rounds (``metrics.round_summary``) carries its own
ratios, paired round by round with AR of the same round, with the interval a repeat run's median falls in
(``tok_s_x_ar``, ``_lo``, ``_hi``, …): those are used as they are, and
``interval_texts`` writes them as ``1.23× (1.10–1.31)``.
``COLUMNS`` gives each summary column its human header and format, key columns
first; the dashboard's tables (``dashboard.comparison``) and the shareable
report (``workloads.report.html``) both read them. ``KEY_METRICS`` are the
columns a comparison is read by: the tables show them first, unscrolled at a
laptop's width, and the rest on demand.
"""

from __future__ import annotations

from collections.abc import Sequence
from numbers import Number

import pandas as pd

LOAD = ("concurrency", "request_rate")
RATIOS = {"x_ar_tok_s": "output_tok_s", "x_ar_tpot_p50": "tpot_p50_ms", "x_ar_tpot_p99": "tpot_p99_ms"}
PAIRED = {"x_ar_tok_s": "tok_s_x_ar", "x_ar_tpot_p50": "tpot_p50_x_ar", "x_ar_tpot_p99": "tpot_p99_x_ar"}
NA = "—"

# source column -> (header, format); the order is the table's, key columns first
COLUMNS = {
    "label": ("Run", "{}"),
    "engine": ("Engine", "{}"),
    "load": ("Load", "{}"),
    "concurrency": ("Concurrency", "{:.0f}"),
    "request_rate": ("Request rate (req/s)", "{:g}"),
    "requests": ("Requests ok", "{}"),
    "output_tok_s": ("Output tok/s", "{:,.1f}"),
    "x_ar_tok_s": ("tok/s × AR", "{:.2f}×"),
    "x_ar_tpot_p50": ("TPOT p50 × AR", "{:.2f}×"),
    "x_ar_tpot_p99": ("TPOT p99 × AR", "{:.2f}×"),
    "acceptance_rate": ("Acceptance", "{:.2f}"),
    "mean_acceptance_length": ("Tokens / step", "{:.2f}"),
    "mean_draft_len": ("Draft L", "{:.2f}"),
    "ttft_p50_ms": ("TTFT p50 (ms)", "{:,.0f}"),
    "ttft_p95_ms": ("TTFT p95 (ms)", "{:,.0f}"),
    "ttft_p99_ms": ("TTFT p99 (ms)", "{:,.0f}"),
    "tpot_p50_ms": ("TPOT p50 (ms)", "{:,.1f}"),
    "tpot_p95_ms": ("TPOT p95 (ms)", "{:,.1f}"),
    "tpot_p99_ms": ("TPOT p99 (ms)", "{:,.1f}"),
    "req_s": ("Requests / s", "{:.2f}"),
    "goodput_req_s": ("Goodput (req/s)", "{:.2f}"),
    "duration_s": ("Duration (s)", "{:,.1f}"),
    "rounds": ("Rounds", "{:.0f}"),
    "stopped early": ("Stopped early", "{}"),
}
# what a comparison is read by, in the order a reader asks: how fast against AR, how each token comes, how
# speculation went; a run cut short says so beside its figures
KEY_METRICS = (
    "output_tok_s", "x_ar_tok_s", "tpot_p50_ms", "ttft_p50_ms", "mean_acceptance_length", "mean_draft_len",
    "acceptance_rate", "stopped early",
)  # fmt: skip
# shown only when some row has a value: a closed loop has no request rate, a run without SLOs no goodput
OPTIONAL = {"concurrency", "request_rate", "goodput_req_s", "mean_draft_len", "stopped early", "rounds"}


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
        paired = PAIRED[ratio]
        if paired in out:  # ratios over rounds, each against AR of its own round: the measurement itself
            stored = pd.to_numeric(out[paired], errors="coerce")
            out[ratio] = stored.where(stored.notna(), out[ratio])
    return out.set_axis(summary.index)


def interval_texts(summary: pd.DataFrame, ratio: str) -> list[str | None]:
    """``ratio`` (a ``RATIOS`` column of ``with_times_ar``) as ``1.23× (1.10–1.31)`` where the summary has the
    rounds' interval, ``1.23×`` where it has only a value, ``None`` where it has none."""
    paired = PAIRED[ratio]
    out: list[str | None] = []
    for i in range(len(summary)):
        value = summary[ratio].iloc[i]
        lo = summary[f"{paired}_lo"].iloc[i] if f"{paired}_lo" in summary else float("nan")
        hi = summary[f"{paired}_hi"].iloc[i] if f"{paired}_hi" in summary else float("nan")
        if pd.isna(value):
            out.append(None)
        elif pd.isna(lo) or pd.isna(hi):
            out.append(f"{value:.2f}×")
        else:
            out.append(f"{value:.2f}× ({lo:.2f}–{hi:.2f})")
    return out


def _key(value: object) -> str:
    """A load or directory as text; NaN (a closed loop's request rate) matches NaN, and 4 matches 4.0."""
    if value is None or pd.isna(value):
        return ""
    return f"{value:g}" if isinstance(value, Number) else str(value)


def load_text(concurrency: object, rate: object) -> str:
    """A run's load as a reader writes it: ``C=4``, or ``R=1.5/s``, with ``(C≤4)`` where in flight was capped."""
    if rate is None or pd.isna(rate):
        return "" if concurrency is None or pd.isna(concurrency) else f"C={int(concurrency)}"
    return f"R={rate:g}/s" + ("" if concurrency is None or pd.isna(concurrency) else f" (C≤{int(concurrency)})")


def text(value: object, fmt: str) -> str:
    """``value`` formatted with ``fmt``, or ``—`` when it is missing (None or NaN)."""
    return NA if value is None or pd.isna(value) else fmt.format(value)
