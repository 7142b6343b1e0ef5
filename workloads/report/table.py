"""The replay's summary table, as printed at the end of ``python -m workloads replay``.

One row per run (an engine at a load point, pooled over its rounds). ``× AR``
is the median of the rounds' tokens/s over AR's of the same round, with in
brackets the interval a repeat run's median falls in; ``TPOT × AR`` likewise
for TPOT p50 ("-" without an AR round to pair with). Where a load point holds
several comparisons (MT-Bench's two turns), the load names its part:
``C=4, turn 2``.
"""

from __future__ import annotations

from collections.abc import Sequence

from metrics.round_summary import ComparisonRow
from metrics.rounds import RatioInterval


def _interval(r: RatioInterval | None) -> str:
    return "-" if r is None else r.text()


def format_table(rows: Sequence[ComparisonRow], parts: Sequence[str] | None = None) -> str:
    """The table of ``rows``; ``parts[i]`` (e.g. "turn 2", "" for none) is added to row i's load."""
    if parts is not None and len(parts) != len(rows):
        raise ValueError(f"{len(parts)} parts for {len(rows)} rows")

    def num(value: float | None, fmt: str = ".1f") -> str:
        return "-" if value is None else format(value, fmt)

    header = (
        "engine",
        "load",
        "rounds",
        "ok/n",
        "tok/s",
        "× AR",
        "TPOT × AR",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "accept",
        "acc.len",
        "goodput",
    )
    table = [header]
    for i, row in enumerate(rows):
        s = row.summary
        if s.request_rate is None:
            load = f"C={s.concurrency}"
        else:
            load = f"R={s.request_rate:g}" + ("" if s.concurrency is None else f",C<={s.concurrency}")
        if parts is not None and parts[i]:
            load = f"{load}, {parts[i]}"
        table.append(
            (
                s.engine,
                load,
                str(row.rounds),
                f"{s.completed}/{s.num_requests}",
                num(s.output_tok_s),
                _interval(row.ratios.get("tok_s")),
                _interval(row.ratios.get("tpot_p50")),
                num(s.ttft_p50_ms),
                num(s.ttft_p99_ms),
                num(s.tpot_p50_ms),
                num(s.tpot_p99_ms),
                num(s.acceptance_rate, ".2f"),
                num(s.mean_acceptance_length, ".2f"),
                num(s.goodput_req_s, ".2f"),
            )
        )
    widths = [max(len(r[i]) for r in table) for i in range(len(header))]
    lines = [
        "  ".join(cell.rjust(w) if i > 1 else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True)))
        for r in table
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n(latencies in ms over every round's requests; goodput in req/s meeting the SLOs)"
