"""The replay's summary table, as printed at the end of ``python -m workloads replay``.

``× AR`` is each run's output tokens/s over the AR run's at the same load ("-" without one).
"""

from __future__ import annotations

from collections.abc import Sequence

from metrics.summary import RunSummary


def format_table(summaries: Sequence[RunSummary]) -> str:
    def num(value: float | None, fmt: str = ".1f") -> str:
        return "-" if value is None else format(value, fmt)

    def load_of(s: RunSummary) -> tuple[int | None, float | None]:
        return (s.concurrency, s.request_rate)

    ar = {load_of(s): s.output_tok_s for s in summaries if s.engine == "ar" and s.output_tok_s}

    def times_ar(s: RunSummary) -> float | None:
        reference = ar.get(load_of(s))
        return None if s.output_tok_s is None or reference is None else s.output_tok_s / reference

    header = (
        "engine",
        "load",
        "ok/n",
        "tok/s",
        "× AR",
        "req/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "accept",
        "acc.len",
        "goodput",
    )
    rows = [header]
    for s in summaries:
        if s.request_rate is None:
            load = f"C={s.concurrency}"
        else:
            load = f"R={s.request_rate:g}" + ("" if s.concurrency is None else f",C<={s.concurrency}")
        rows.append(
            (
                s.engine,
                load,
                f"{s.completed}/{s.num_requests}",
                num(s.output_tok_s),
                num(times_ar(s), ".2f"),
                num(s.req_s, ".2f"),
                num(s.ttft_p50_ms),
                num(s.ttft_p99_ms),
                num(s.tpot_p50_ms),
                num(s.tpot_p99_ms),
                num(s.acceptance_rate, ".2f"),
                num(s.mean_acceptance_length, ".2f"),
                num(s.goodput_req_s, ".2f"),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.rjust(w) if i > 1 else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n(latencies in ms; goodput in req/s meeting the SLOs)"
