"""A comparison at one load point, summarised over its rounds: pooled figures, × AR intervals, the verdict.

Each engine ran the same trace once per round (``metrics.rounds``). For each
engine this module gives

* its **pooled summary**: the ``RunSummary`` of every request of every round
  (latency percentiles pool requests across rounds; tokens/s is the rounds'
  tokens over the rounds' summed durations);
* its **× AR intervals** of tokens/s, TPOT p50, TPOT p99 and TTFT p50: per round
  against AR of the same round, then the median over rounds with the interval a
  repeat run's median falls in (``IntervalKind.REPEAT_RUN``: the min–max, or
  a rank interval from 13 rounds on, widened to a 95 % prediction interval);

and for the load point the verdict (``metrics.verdict``) and a noise warning
(``metrics.host_noise``). ``ComparisonRow.row()`` is one row of summary.csv
(``metrics.schema.SUMMARY_COLUMNS``). Only runs that went to the end of their
trace give ratios: a cancelled run's few requests are pooled but not compared.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass

from metrics.host_noise import HostNoise, noise_warning
from metrics.request_metrics import RequestMetrics
from metrics.rounds import IntervalKind, RatioInterval, ratio_intervals
from metrics.run_key import RunKey
from metrics.schema import RATIO_FIGURES
from metrics.summary import SLO, RunSummary, summarize
from metrics.verdict import Verdict, verdict

REFERENCE = "ar"


@dataclass(frozen=True)
class RoundRun:
    """One engine's run in one round."""

    round: int  # 0-based
    summary: RunSummary
    metrics: tuple[RequestMetrics, ...]
    complete: bool  # it went to the end of its trace: only complete runs are compared
    noise: HostNoise | None = None


@dataclass(frozen=True)
class ComparisonRow:
    summary: RunSummary  # pooled over the rounds
    ratios: Mapping[str, RatioInterval | None]  # RATIO_FIGURES name -> × AR interval (None: no paired round)
    rounds: int  # rounds this engine ran in

    def row(self) -> dict[str, object]:
        """summary.csv's row: the pooled summary's columns, the ratios' median, lo and hi, and ``rounds``."""
        out: dict[str, object] = asdict(self.summary)
        for name in RATIO_FIGURES:
            r = self.ratios.get(name)
            out[f"{name}_x_ar"], out[f"{name}_x_ar_lo"], out[f"{name}_x_ar_hi"] = (
                (None, None, None) if r is None else (r.median, r.lo, r.hi)
            )
        out["rounds"] = self.rounds
        return out


@dataclass(frozen=True)
class LoadComparison:
    rows: tuple[ComparisonRow, ...]  # one per engine, in the order given
    verdict: Verdict
    noise_warning: str | None  # runs during which other processes took a meaningful share of the CPU


def compare_load(
    runs: Mapping[str, Sequence[RoundRun]],
    key_for: Callable[[str], RunKey],
    slo: SLO | None = None,
    label: Callable[[str], str] = str,
) -> LoadComparison:
    """Summarise one load point. ``runs`` maps each engine to its runs so far (any rounds, any order).

    ``key_for(engine)`` names the pooled row (its run id, engine and load); ``label`` names engines in
    the noise warning.
    """
    n_rounds = 1 + max((r.round for rs in runs.values() for r in rs), default=-1)
    per_round: list[dict[str, dict[str, float | None]]] = [{} for _ in range(n_rounds)]
    for engine, rs in runs.items():
        for r in rs:
            if r.complete:
                values = asdict(r.summary)
                per_round[r.round][engine] = {name: values[f] for name, f in RATIO_FIGURES.items()}
    intervals = {
        name: ratio_intervals(
            [{e: v[name] for e, v in figures.items()} for figures in per_round], REFERENCE, IntervalKind.REPEAT_RUN
        )
        for name in RATIO_FIGURES
    }
    rows = []
    for engine, rs in runs.items():
        metrics = tuple(m for r in rs for m in r.metrics)
        duration = sum(r.summary.duration_s for r in rs)
        pooled = summarize(key_for(engine), metrics, duration, slo)
        ratios = {name: intervals[name].get(engine) for name in RATIO_FIGURES}
        rows.append(ComparisonRow(pooled, ratios, len({r.round for r in rs})))
    tok_s = {engine: intervals["tok_s"].get(engine) for engine in runs}
    noises = {
        f"{label(engine)}, round {r.round + 1}": r.noise
        for engine, rs in runs.items()
        for r in rs
        if r.noise is not None
    }
    return LoadComparison(tuple(rows), verdict(tok_s, REFERENCE), noise_warning(noises))
