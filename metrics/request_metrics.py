"""Per-request latency metrics, derived from one finished ``Request``.

Definitions (all times from ``time.perf_counter()``, reported in milliseconds;
``arrival`` is when the engine accepted the submission):

* **TTFT** (time to first token) = ``first_token_time - arrival_time``.
* **TPOT** (time per output token, excluding the first)
  = ``(e2e - ttft) / (output_tokens - 1)``; undefined (``None``) for fewer than
  two output tokens. It is computed as ``(last token time - first token time) /
  (output_tokens - 1)``, which is the same for a completed request (its finish
  time is its last token's time) and stays meaningful for a cancelled one.
* **ITL** (inter-token latency) = the gaps between consecutive ``token_times``.
  Tokens emitted by one verify step share one time, so speculative engines
  produce gaps of exactly 0 followed by one longer gap; they are reported as
  they are, not merged (merging would hide how bursty the stream is).
* **E2E** (end-to-end latency) = ``finish_time - arrival_time`` (for a failed or
  cancelled request: the time until it ended).
* **Queue wait** = ``admitted_time - arrival_time``: time spent waiting for a
  batch slot or KV memory before the engine started work on the request.

A value that cannot be computed (no first token, never admitted, rejected at
submission) is ``None``, never 0. Relative times (``arrival_s`` ...) are seconds
since the run's start ``t0``.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise

from engine.request import Request


@dataclass(frozen=True)
class RequestMetrics:
    request_id: str
    status: str  # ok | failed | cancelled | rejected
    error: str | None
    prompt_tokens: int
    output_tokens: int
    arrival_s: float | None
    first_token_s: float | None
    finish_s: float | None
    ttft_ms: float | None
    tpot_ms: float | None
    e2e_ms: float | None
    queue_ms: float | None
    itl_ms: tuple[float, ...]
    drafted_tokens: int
    accepted_tokens: int
    verify_steps: int

    @property
    def completed(self) -> bool:
        return self.status == "ok"


def _ms(end: float | None, start: float | None) -> float | None:
    if end is None or start is None:
        return None
    return (end - start) * 1000.0


def _since(t: float | None, t0: float) -> float | None:
    return None if t is None else t - t0


def tpot_ms(token_times: list[float] | tuple[float, ...]) -> float | None:
    """Mean time per output token after the first; ``None`` below two tokens."""
    if len(token_times) < 2:
        return None
    return (token_times[-1] - token_times[0]) * 1000.0 / (len(token_times) - 1)


def itl_ms(token_times: list[float] | tuple[float, ...]) -> tuple[float, ...]:
    """Gaps between consecutive token times, zeros included."""
    return tuple((b - a) * 1000.0 for a, b in pairwise(token_times))


def request_metrics(request: Request, t0: float) -> RequestMetrics:
    """Metrics of a finished request; ``t0`` is the run's start (perf_counter seconds)."""
    times = list(request.token_times)
    return RequestMetrics(
        request_id=request.request_id,
        status=str(request.status),
        error=request.error,
        prompt_tokens=len(request.prompt_token_ids),
        output_tokens=request.num_output_tokens,
        arrival_s=_since(request.arrival_time, t0),
        first_token_s=_since(request.first_token_time, t0),
        finish_s=_since(request.finish_time, t0),
        ttft_ms=_ms(request.first_token_time, request.arrival_time),
        tpot_ms=tpot_ms(times),
        e2e_ms=_ms(request.finish_time, request.arrival_time),
        queue_ms=_ms(request.admitted_time, request.arrival_time),
        itl_ms=itl_ms(times),
        drafted_tokens=request.drafted,
        accepted_tokens=request.accepted,
        verify_steps=request.verify_steps,
    )
