"""Replaying a trace against one engine: the driver behind the CLI and the dashboard.

``replay`` starts an engine, sends it the trace under an arrival policy,
samples its time series in a background thread, waits for every request, and
returns a ``RunResult`` (``workloads.drivers.run_result``) with the finished ``Request``
records and everything derived from them. A ``LiveRun`` (``workloads.drivers.live``)
shows the run to other threads while it goes on. The run:

1. builds the engine (``RunHooks.engine_factory``: ``engine.schedulers.registry.make_engine``
   or an endpoint) and starts it;
2. sends short warm-up requests all at once and waits for them – the first forward
   passes pay for lazy initialisation, which would otherwise land on the first
   measured request. As many go at once as the run will keep in flight (at
   least the settings' ``warmup``; ``warmup_concurrency``), so every path the
   run takes is warm: with one request PDV would never pipeline, and its verify
   lane would pay its first forward inside the measured run. They are not part
   of the result, and the time series starts after them;
3. starts the clock ``t0`` and the sampler, dispatches the trace
   (``workloads.drivers.arrivals.dispatch``) and waits for every submitted request;
4. stops the engine, which cancels anything unfinished (after a cancel or a
   timeout), and summarises.

Accounting: every submitted request comes back in ``RunResult.requests`` with
status ok, failed, cancelled or rejected (with the engine's error text), so
completed + failed + cancelled + rejected == submitted. After a cancel, trace
requests never submitted are not part of the run (``planned`` still counts them).
Both the run's and the engine's own counts are checked when the run ends
(``check_accounting``); an imbalance is a bug and raises ``AccountingError``.
Sampling parameters are identical for every engine; with a seed, request i
samples with seed + i, so the same request draws the same numbers everywhere.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any, Protocol

from engine.config import SamplingParams
from engine.devices import allocator_memory, fresh_memory, pci_bus_id
from engine.request import Request, RequestStatus, TokenEvent
from engine.schedulers.stats import StepModes
from metrics.device import open_probe
from metrics.device_types import DeviceProbe
from metrics.request_metrics import request_metrics
from metrics.run_key import RunKey
from metrics.run_record import RequestOutput
from metrics.summary import position_acceptance, summarize
from metrics.timeseries import TimeseriesSampler
from workloads.datasets.sharegpt import SampledRequest
from workloads.drivers.arrivals import RealClock, dispatch
from workloads.drivers.engines import ReplayEngine
from workloads.drivers.run_result import RunResult, StopReason, load_label, new_run_id
from workloads.drivers.run_spec import RunHooks, RunSpec, SweepProgress
from workloads.drivers.run_state import RunState
from workloads.drivers.trace import Trace, TraceItem, build_trace

log = logging.getLogger(__name__)

WARMUP_TOKENS = 8
# warm-up requests at once for an open loop without a cap: enough running requests for PDV to form its two groups
# and pipeline them (with fewer it may run its steps atomically and leave the verify lane cold)
OPEN_LOOP_WARMUP = 4
STOP_TIMEOUT_S = 10.0


class PairLike(Protocol):
    """What a replay needs of a model pair (``engine.models.pair.ModelPair`` fits)."""

    @property
    def tokenizer(self) -> Any: ...
    @property
    def device(self) -> Any: ...
    def encode_prompt(self, text: str, raw: bool = False) -> list[int]: ...


def _trace_items(trace: Trace | Sequence[SampledRequest], pair: PairLike, params: SamplingParams) -> list[TraceItem]:
    if isinstance(trace, Trace):
        return list(trace.items)
    return list(build_trace(trace, pair.encode_prompt, params.max_new_tokens, "sampled requests", 0).items)


def _request(item: TraceItem, index: int, params: SamplingParams, on_event: Callable[[TokenEvent], None]) -> Request:
    seed = None if params.seed is None else params.seed + index
    return Request(
        request_id=item.request_id,
        prompt_token_ids=list(item.prompt_token_ids),
        params=replace(params, max_new_tokens=item.max_new_tokens, seed=seed),
        prompt=item.prompt,
        on_event=on_event,
    )


def warmup_concurrency(warmup: int, cap: int | None) -> int:
    """Warm-up requests sent at once: the run's concurrency cap (an open loop without one: ``OPEN_LOOP_WARMUP``),
    at least ``warmup``; none when ``warmup`` is 0."""
    if warmup == 0:
        return 0
    return max(warmup, cap if cap is not None else OPEN_LOOP_WARMUP)


def _warm_up(
    engine: ReplayEngine, items: list[TraceItem], n: int, params: SamplingParams, halt: threading.Event
) -> None:
    """Send ``n`` short requests (the trace's first prompts, repeated if it is shorter) at once; wait for all."""
    sent = []
    for i in range(n):
        source = items[i % len(items)]
        item = replace(source, request_id=f"warmup-{i}", max_new_tokens=min(WARMUP_TOKENS, source.max_new_tokens))
        request = _request(item, i, params, lambda event: None)
        request.teaches_drafter = False  # it runs a measured prompt: its output must not be drafted from
        sent.append(engine.submit(request))
    for request in sent:
        while not request.done.wait(0.1):
            if halt.is_set():
                return
        if request.status != RequestStatus.OK:
            log.warning("warm-up request ended %s: %s", request.status, request.error)


def replay(
    pair: PairLike, trace: Trace | Sequence[SampledRequest], run: RunSpec, hooks: RunHooks | None = None
) -> RunResult:
    """Run ``trace`` as ``run`` says; see the module docstring.

    ``trace`` is a ``Trace`` (pre-tokenised) or sampled requests, which are
    tokenised with ``pair.encode_prompt`` and capped at the run's max_new_tokens.
    Setting ``hooks.cancel`` (from any thread) stops sending, cancels what is in
    flight and returns what finished; the settings' ``timeout_s`` does the same
    after that many seconds of measured run. ``hooks.progress`` is called from
    this thread. Mutates ``hooks.live`` (any thread may read its ``snapshot``)
    as the run goes on.
    """
    hooks = hooks if hooks is not None else RunHooks()
    settings, policy, engine = run.settings, run.policy, run.engine
    config, params, slo = settings.config, settings.params, settings.slo
    cancel, live, probe = hooks.cancel, hooks.live, hooks.probe
    items = _trace_items(trace, pair, params)
    if not items:
        raise ValueError("the trace is empty")
    key = RunKey(run.run_id or new_run_id(engine, policy), engine, policy.cap, policy.request_rate)
    live.begin(engine, policy, len(items))

    def report(finished: int) -> None:
        if hooks.progress:
            hooks.progress(SweepProgress(0, 1, engine, load_label(policy), finished, len(items)))

    halt = threading.Event()  # cancel, timeout or a crashed engine: stop sending and stop waiting
    stop_reason: StopReason | None = None
    clock = RealClock(halt)

    def on_event(event: TokenEvent) -> None:
        if event.finished:
            clock.wake()

    fresh_memory(pair.device)  # CUDA: the previous engine's cache and peaks are not this run's
    eng = hooks.engine_factory(engine, pair, config)
    own_probe = probe is None
    probe = probe if probe is not None else open_probe(str(pair.device), pci_bus_id=pci_bus_id(pair.device))
    requests = [_request(item, i, params, on_event) for i, item in enumerate(items)]
    submitted: list[Request] = []
    pending: list[Request] = []  # submitted and not finished yet
    sampler: TimeseriesSampler | None = None
    try:
        eng.start()
        live.set_state(RunState.WARMUP)
        _warm_up(eng, items, warmup_concurrency(settings.warmup, policy.cap), params, cancel)
        warmed = eng.stats().step_modes  # PDV's groups so far are the warm-up's, not the run's
        t0 = time.perf_counter()
        started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
        deadline = None if settings.timeout_s is None else t0 + settings.timeout_s
        sampler = TimeseriesSampler(eng.stats, probe, t0, settings.sample_hz)
        sampler.start()
        live.start_clock(key, t0, slo, sampler)
        reported = -1

        def tick() -> None:
            nonlocal reported, stop_reason
            if stop_reason is None:
                if cancel.is_set():
                    stop_reason = StopReason.CANCELLED
                elif deadline is not None and time.perf_counter() > deadline:
                    stop_reason = StopReason.TIMEOUT
                elif eng.fatal_error:
                    stop_reason = StopReason.ENGINE_ERROR
                if stop_reason is not None:
                    halt.set()
            ended = [r for r in pending if r.done.is_set()]
            if ended:  # one that finishes meanwhile stays pending until the next tick
                pending[:] = [r for r in pending if r not in ended]
                live.add_finished(ended)
            finished = len(submitted) - len(pending)
            if finished != reported:
                reported = finished
                report(finished)

        def submit(request: Request) -> Request:
            submitted.append(request)
            pending.append(request)
            return eng.submit(request)

        tick()
        if not halt.is_set():
            dispatch(requests, policy, submit, clock, halt, on_tick=tick)
        while not halt.is_set() and not all(r.done.is_set() for r in submitted):
            clock.wait(RealClock.MAX_WAIT_S)
            tick()
        live.set_state(RunState.STOPPING)
    finally:
        rows, stuck = _shut_down(sampler, eng, probe if own_probe else None)
    if stuck is not None:
        stop_reason = StopReason.ENGINE_DID_NOT_STOP
    for request in submitted:
        if not request.done.is_set():
            # an engine must finish everything at stop; if it did not, the run still accounts for it
            request.fail(RequestStatus.FAILED, "the engine stopped without finishing this request")
    end = max((r.finish_time for r in submitted if r.finish_time is not None), default=time.perf_counter())
    duration = max(0.0, end - t0)
    metrics = tuple(request_metrics(r, t0) for r in submitted)
    final = eng.stats()
    result = RunResult(
        key=key,
        policy=policy,
        requests=tuple(submitted),
        metrics=metrics,
        timeseries=rows,
        summary=summarize(key, metrics, duration, slo),
        outputs=tuple(_output(key, r, pair, eng.output_text(r)) for r in submitted),
        positions=position_acceptance(r.steps for r in submitted),
        probe=probe.info,
        started_at=started_at,
        duration_s=duration,
        planned=len(items),
        stop_reason=stop_reason,
        suffix_tree=final.suffix_tree,  # stopped: every request retired and taught the tree
        step_modes=_measured(final.step_modes, warmed),
        engine_error=eng.fatal_error or stuck,
        endpoint=eng.describe(),
        allocator=allocator_memory(pair.device),
    )
    check_accounting(result, eng)
    live.end(result)
    report(sum(r.done.is_set() for r in submitted))
    return result


def _measured(modes: StepModes | None, warmed: StepModes | None) -> StepModes | None:
    """PDV's groups of the measured run: its counts at the end less the warm-up's."""
    if modes is None or warmed is None:
        return modes
    return modes.since(warmed)


class AccountingError(RuntimeError):
    """A run whose requests do not add up: submitted != completed + failed + cancelled + rejected."""


def check_accounting(result: RunResult, eng: ReplayEngine) -> None:
    """Raise ``AccountingError`` unless every submitted request ended once, in the run and in the engine."""
    counts = result.counts()
    problems = []
    if counts.total != len(result.requests):
        problems.append(f"{len(result.requests)} submitted, but {counts} add up to {counts.total}")
    problems += eng.accounting_problems()
    if problems:
        raise AccountingError(f"run {result.run_id}: " + "; ".join(problems))


def _shut_down(
    sampler: TimeseriesSampler | None, eng: ReplayEngine, probe: DeviceProbe | None
) -> tuple[tuple, str | None]:
    """Stop the sampler, the engine and the probe, each even if the one before it failed.

    Returns the sampled rows and, if the engine's lane threads did not stop, why.
    """
    stuck = None
    try:
        rows = sampler.stop() if sampler is not None else ()
    finally:
        try:
            eng.stop(STOP_TIMEOUT_S)
        except RuntimeError as exc:  # lane threads that did not stop: their requests are cancelled anyway
            log.error("%s engine did not stop cleanly: %s", eng.name, exc)
            stuck = str(exc)
        finally:
            if probe is not None:
                probe.close()
    return rows, stuck


def _output(key: RunKey, request: Request, pair: PairLike, text: str | None) -> RequestOutput:
    """An engine's output ids and their text; a server's text (``ReplayEngine.output_text``) and its tokenization."""
    if text is None:
        ids = tuple(request.output_token_ids)
        text = pair.tokenizer.decode(ids, skip_special_tokens=True)
    else:
        ids = tuple(pair.tokenizer(text, add_special_tokens=False).input_ids)
    return RequestOutput(
        key.run_id, key.engine, request.request_id, request.prompt, tuple(request.prompt_token_ids), ids, text
    )
