"""Simulated runs: a trace replayed into a simulated engine (``sim``) on its virtual clock, written as a replay's.

``simulate`` mirrors ``workloads.drivers.replay.replay``: the same requests
(``TraceItem`` -> ``Request``, request i seeded with seed + i), sent by the
replay's own ``dispatch`` under the same arrival policy – its waits run the
simulation instead of sleeping (``sim.clock.VirtualClock``) – a time series
sampled every ``sample_s`` of virtual time, and every metric derived from the
finished ``Request`` records by the same functions. There is no warm-up: a
simulated engine has nothing to initialise lazily. The ``RunResult`` it
returns writes the same run files; its summary's ``simulated`` names the cost
model, its run.json entry holds every assumption (``simulated``), and its
device probe says that nothing was probed.

``simulate_sweep`` runs engines x load points, one round each (a simulation
is deterministic for its seed, so a second round would repeat the first),
and writes the run files when ``out_dir`` is given.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.config import EngineConfig, EngineName, SamplingParams
from engine.request import Request, RequestStatus
from metrics.device_types import DeviceSample, ProbeInfo
from metrics.export import check_appendable, write_run, write_summary
from metrics.request_metrics import request_metrics
from metrics.run_key import RunKey
from metrics.run_record import RequestOutput
from metrics.summary import position_acceptance, summarize
from metrics.timeseries import TimeseriesRow, make_row
from sim.acceptance import Acceptance
from sim.clock import VirtualClock
from sim.cost_model import CostModel
from sim.engine import SimEngine
from sim.engines import SIM_ENGINES
from workloads.drivers.arrivals import ArrivalPolicy, dispatch
from workloads.drivers.replay import AccountingError
from workloads.drivers.run_result import RunResult, load_label
from workloads.drivers.trace import Trace, TraceItem

SAMPLE_S = 0.25  # the time series' window, virtual seconds: the replay's default 4 Hz
NO_DEVICE = DeviceSample(None, None, None, None, None, None, 0.0)


@dataclass(frozen=True)
class SimSetup:
    """What every simulated run of a sweep shares: the device's costs, the acceptance, the engines' config."""

    cost: CostModel
    acceptance: Acceptance | None  # None: only AR can run
    config: EngineConfig
    params: SamplingParams
    max_context: int
    vocab_size: int
    seed: int = 0

    def assumptions(self) -> dict[str, Any]:
        """run.json's ``simulated``: every figure a projection rests on."""
        config = self.config
        return {
            "cost_model": self.cost.assumptions(),
            "acceptance": None if self.acceptance is None else self.acceptance.source,
            "controller": config.controller.kind,
            "max_batch_size": config.max_batch_size,
            "max_cache_tokens": config.max_cache_tokens,
            "prefill_chunk_tokens": config.prefill_chunk_tokens,
            "micro_batches": config.micro_batches,
            "seed": self.seed,
            "tokens": "no identities: every request runs to its max_new_tokens (no stop tokens)",
        }


def _request(item: TraceItem, index: int, params: SamplingParams) -> Request:
    seed = None if params.seed is None else params.seed + index
    return Request(
        request_id=item.request_id,
        prompt_token_ids=list(item.prompt_token_ids),
        params=replace(params, max_new_tokens=item.max_new_tokens, seed=seed),
        prompt=item.prompt,
    )


def make_sim_engine(name: EngineName, setup: SimSetup) -> SimEngine:
    return SIM_ENGINES[name](
        setup.cost,
        setup.acceptance,
        setup.config,
        max_context=setup.max_context,
        vocab_size=setup.vocab_size,
        seed=setup.seed,
    )


class _Sampler:
    """The time series on the virtual clock: a row per ``sample_s`` while the engine has events to run."""

    def __init__(self, engine: SimEngine, sample_s: float) -> None:
        self.engine = engine
        self.sample_s = sample_s
        self.rows: list[TimeseriesRow] = []
        self._last = engine.stats()
        self._scheduled = False

    def ensure(self) -> None:
        if not self._scheduled:
            self._scheduled = True
            self.engine.loop.at(self.engine.loop.now + self.sample_s, self._sample)

    def _sample(self) -> None:
        self._scheduled = False
        self.take()
        if not self.engine.loop.idle:  # the engine is still busy: keep sampling
            self.ensure()

    def take(self) -> None:
        cur = self.engine.stats()
        row = make_row(self._last, cur, NO_DEVICE, 0.0)
        if row is not None:
            self.rows.append(row)
            self._last = cur


def simulate(
    trace: Trace, engine: EngineName, policy: ArrivalPolicy, setup: SimSetup, run_id: str, sample_s: float = SAMPLE_S
) -> RunResult:
    """One simulated run of ``trace`` on ``engine`` under ``policy``; see the module docstring."""
    items = list(trace.items)
    if not items:
        raise ValueError("the trace is empty")
    eng = make_sim_engine(engine, setup)
    clock = VirtualClock(eng.loop, pending=lambda: eng.unfinished > 0)

    eng.on_finish = lambda request: clock.wake()
    requests = [_request(item, i, setup.params) for i, item in enumerate(items)]
    sampler = _Sampler(eng, sample_s)
    key = RunKey(run_id, engine, policy.cap, policy.request_rate)

    def submit(request: Request) -> Request:
        sampler.ensure()
        return eng.submit(request)

    started_at = datetime.now(UTC).isoformat(timespec="milliseconds")
    submitted = dispatch(requests, policy, submit, clock, threading.Event())
    while not all(r.done.is_set() for r in submitted) and clock.run_until_woken():
        pass
    sampler.take()
    stuck = [r for r in submitted if not r.done.is_set()]
    eng.stop()  # ends anything left CANCELLED: a simulation that cannot go on is an engine bug, shown as such
    end = max((r.finish_time for r in submitted if r.finish_time is not None), default=0.0)
    metrics = tuple(request_metrics(r, 0.0) for r in submitted)
    summary = replace(summarize(key, metrics, end), simulated=setup.cost.name)
    result = RunResult(
        key=key,
        policy=policy,
        requests=tuple(submitted),
        metrics=metrics,
        timeseries=tuple(sampler.rows),
        summary=summary,
        outputs=tuple(_output(key, r) for r in submitted),
        positions=position_acceptance(r.steps for r in submitted),
        probe=ProbeInfo("simulated", setup.cost.name, False, "a simulated run: no device was probed"),
        started_at=started_at,
        duration_s=end,
        planned=len(items),
        stop_reason=None,
        engine_error=f"{len(stuck)} requests could not finish in the simulation" if stuck else None,
        step_modes=eng.stats().step_modes,
    )
    counts = result.counts()
    problems = eng.accounting_problems()
    if counts.total != len(submitted) or problems or any(r.status is RequestStatus.WAITING for r in submitted):
        raise AccountingError(f"simulated run {run_id}: {counts} of {len(submitted)}; {'; '.join(problems)}")
    return result


def _output(key: RunKey, request: Request) -> RequestOutput:
    return RequestOutput(
        key.run_id,
        key.engine,
        request.request_id,
        request.prompt,
        tuple(request.prompt_token_ids),
        tuple(request.output_token_ids),
        "",  # simulated: tokens have times and kinds, no text
    )


@dataclass(frozen=True)
class SimPoint:
    """One simulated run's outcome with how long the simulation itself took."""

    result: RunResult
    wall_s: float  # real seconds the simulation took
    cpu_s: float  # this process's CPU seconds for it: what the simulation cost, whatever else the machine ran


def sim_run_id(engine: EngineName, policy: ArrivalPolicy, stamp: str) -> str:
    return f"sim-{stamp}-{engine}-{load_label(policy)}"


def simulate_sweep(
    trace: Trace,
    engines: Sequence[EngineName],
    policies: Sequence[ArrivalPolicy],
    setup: SimSetup,
    out_dir: str | Path | None = None,
    meta: dict[str, Any] | None = None,
    progress: Callable[[int, int, str], None] | None = None,
) -> list[SimPoint]:
    """Every engine at every load point, one simulated run each; run files appended to ``out_dir`` if given.

    ``progress(done, total, label)`` is called before each run.
    """
    if out_dir is not None:
        check_appendable(out_dir)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    run_meta = {"simulated": setup.assumptions(), "trace": trace.describe(), **(meta or {})}
    points = []
    total = len(engines) * len(policies)
    for policy in policies:
        for engine in engines:
            if progress is not None:
                progress(len(points), total, f"{engine} {policy.describe()}")
            start, cpu = time.perf_counter(), time.process_time()
            result = simulate(trace, engine, policy, setup, sim_run_id(engine, policy, stamp))
            points.append(SimPoint(result, time.perf_counter() - start, time.process_time() - cpu))
            if out_dir is not None:
                write_run(out_dir, result.record(run_meta))
                write_summary(out_dir, [{**asdict(result.summary), "rounds": 1}], {})
    if progress is not None:
        progress(total, total, "done")
    return points
