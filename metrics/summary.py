"""Per-run summary: throughput, latency percentiles, speculation quality, goodput.

Definitions (a run's ``duration`` is from its first submission to its last
request's end; "completed" means status ``ok``):

* **output_tok_s** = output tokens of completed requests / duration.
* **req_s** = completed requests / duration.
* **p50/p95/p99** of TTFT, TPOT, E2E over completed requests, and p99 of ITL over
  every gap of every completed request, with numpy's linear interpolation
  (``np.percentile(..., method="linear")``, as ``vllm bench serve``).
* **acceptance_rate** = accepted / drafted tokens, summed over all requests of
  the run (speculation is the engine's work whatever the request's outcome).
  Undefined when nothing was drafted (the AR engine).
* **mean_acceptance_length** = 1 + accepted / verify_steps: tokens emitted per
  verify step, counting the correction or bonus token each step adds (as vLLM's
  "mean acceptance length"). Undefined without verify steps.
* **per-position acceptance** (``position_acceptance``), for draft position k
  (1-based), two ways:
  ``rate`` = P(token k accepted | k tokens were drafted): over all verify steps
  with ``draft_len >= k``, the share with ``accepted >= k``; and ``per_draft``
  = vLLM's "acceptance at position k": steps with ``accepted >= k`` / draft
  steps (verify steps that drafted at least one token). ``per_draft`` summed
  over k is accepted / draft steps, so 1 + that sum is vLLM's mean acceptance
  length (counted per draft step rather than per verify step).
* **goodput_req_s** = completed requests meeting every given SLO / duration, as
  in DistServe and ``vllm bench serve --goodput``: TTFT <= the TTFT SLO and
  TPOT <= the TPOT SLO. A request with fewer than two output tokens has no TPOT
  and meets the TPOT SLO (vLLM counts its TPOT as 0). Undefined without SLOs.
* **failed** = every submitted request that did not complete (failed, cancelled
  or rejected), so ``completed + failed == num_requests``.

An undefined value is ``None`` (an empty CSV cell), never 0.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from engine.request import StepRecord
from metrics.request_metrics import RequestMetrics
from metrics.run_key import RunKey


@dataclass(frozen=True)
class SLO:
    """Service-level objectives for goodput; ``None`` = no objective on that metric."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None

    def __post_init__(self) -> None:
        for name in ("ttft_ms", "tpot_ms"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name.removesuffix('_ms').upper()} SLO must be > 0 ms, got {value}")

    @property
    def any(self) -> bool:
        return self.ttft_ms is not None or self.tpot_ms is not None

    def met_by(self, m: RequestMetrics) -> bool:
        if not m.completed:
            return False
        if self.ttft_ms is not None and (m.ttft_ms is None or m.ttft_ms > self.ttft_ms):
            return False
        # no TPOT (under two tokens) meets any TPOT objective, as in vLLM
        return self.tpot_ms is None or m.tpot_ms is None or m.tpot_ms <= self.tpot_ms


@dataclass(frozen=True)
class RunSummary:
    """One row of summary.csv; field order is the column order."""

    run_id: str
    engine: str
    concurrency: int | None
    request_rate: float | None
    num_requests: int
    completed: int
    failed: int
    duration_s: float
    output_tok_s: float | None
    req_s: float | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    ttft_p99_ms: float | None
    tpot_p50_ms: float | None
    tpot_p95_ms: float | None
    tpot_p99_ms: float | None
    itl_p99_ms: float | None
    e2e_p50_ms: float | None
    e2e_p95_ms: float | None
    e2e_p99_ms: float | None
    acceptance_rate: float | None
    mean_acceptance_length: float | None
    goodput_req_s: float | None
    # a simulated run: its cost model (``sim``); None for a measured run. Not a figure: the last column
    simulated: str | None = None


@dataclass(frozen=True)
class PositionAcceptance:
    position: int  # 1-based draft position
    drafted: int  # verify steps that drafted at least this many tokens
    accepted: int  # of those, steps whose accepted prefix reached this position
    drafts: int  # verify steps of the run that drafted at least one token

    @property
    def rate(self) -> float:
        return self.accepted / self.drafted

    @property
    def per_draft(self) -> float:
        return self.accepted / self.drafts


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0..100) with linear interpolation; ``None`` for no values."""
    if len(values) == 0:
        return None
    return float(np.percentile(np.asarray(values, dtype=float), q, method="linear"))


def _ratio(num: float, den: float) -> float | None:
    return num / den if den > 0 else None


def summarize(key: RunKey, metrics: Sequence[RequestMetrics], duration_s: float, slo: SLO | None = None) -> RunSummary:
    """Summary of one run from its per-request metrics (every submitted request)."""
    if duration_s < 0:
        raise ValueError(f"duration must be >= 0, got {duration_s}")
    done = [m for m in metrics if m.completed]
    ttft = [m.ttft_ms for m in done if m.ttft_ms is not None]
    tpot = [m.tpot_ms for m in done if m.tpot_ms is not None]
    e2e = [m.e2e_ms for m in done if m.e2e_ms is not None]
    itl = [gap for m in done for gap in m.itl_ms]
    drafted = sum(m.drafted_tokens for m in metrics)
    accepted = sum(m.accepted_tokens for m in metrics)
    steps = sum(m.verify_steps for m in metrics)
    mean_len = None if steps == 0 else 1.0 + accepted / steps
    goodput = None
    if slo is not None and slo.any:
        goodput = _ratio(sum(slo.met_by(m) for m in done), duration_s)
    return RunSummary(
        run_id=key.run_id,
        engine=key.engine,
        concurrency=key.concurrency,
        request_rate=key.request_rate,
        num_requests=len(metrics),
        completed=len(done),
        failed=len(metrics) - len(done),
        duration_s=duration_s,
        output_tok_s=_ratio(sum(m.output_tokens for m in done), duration_s),
        req_s=_ratio(len(done), duration_s),
        ttft_p50_ms=percentile(ttft, 50),
        ttft_p95_ms=percentile(ttft, 95),
        ttft_p99_ms=percentile(ttft, 99),
        tpot_p50_ms=percentile(tpot, 50),
        tpot_p95_ms=percentile(tpot, 95),
        tpot_p99_ms=percentile(tpot, 99),
        itl_p99_ms=percentile(itl, 99),
        e2e_p50_ms=percentile(e2e, 50),
        e2e_p95_ms=percentile(e2e, 95),
        e2e_p99_ms=percentile(e2e, 99),
        acceptance_rate=_ratio(accepted, drafted),
        mean_acceptance_length=mean_len,
        goodput_req_s=goodput,
    )


def position_acceptance(steps_per_request: Iterable[Sequence[StepRecord]]) -> tuple[PositionAcceptance, ...]:
    """Acceptance at draft positions k = 1 .. the longest draft seen."""
    drafted: list[int] = []
    accepted: list[int] = []
    drafts = 0
    for steps in steps_per_request:
        for step in steps:
            drafts += step.draft_len > 0
            if step.draft_len > len(drafted):
                grow = step.draft_len - len(drafted)
                drafted.extend([0] * grow)
                accepted.extend([0] * grow)
            for k in range(step.draft_len):
                drafted[k] += 1
            for k in range(step.accepted):
                accepted[k] += 1
    return tuple(
        PositionAcceptance(k + 1, d, a, drafts) for k, (d, a) in enumerate(zip(drafted, accepted, strict=True))
    )
