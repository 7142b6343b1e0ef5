"""The interface every engine shares, and the machinery they all use.

An engine accepts ``Request``s from any thread (``submit``), runs them on its
own worker threads (lanes), streams tokens back through each request's
``on_event`` callback, and publishes an immutable ``EngineStats`` snapshot
for monitors. ``stop`` cancels whatever has not finished and joins every
thread. Every submitted request ends in exactly one of ok, failed, cancelled
or rejected; none is dropped.

``Engine`` keeps the inbox, admission, accounting and lifecycle, and the
stage calls every lane makes (prefill, draft, verify, step: they count tokens
and feed the controller). What runs where is each engine's composition
(``_compose``): lanes (``engine.schedulers.lanes``) carrying works (prefill,
atomic decode, draft, verify) joined by hand-off queues
(``engine.schedulers.handoff``), with every decision a plan function
(``engine.schedulers.plan``). An engine also fits the replay protocol
(``workloads.drivers.engines.ReplayEngine``) as it is.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from abc import ABC, abstractmethod
from collections import deque
from dataclasses import replace

import torch

from engine.config import ControllerConfig, EngineConfig, EngineName
from engine.controllers.base import DraftLengthController, LoadSignals, RowOption, StepObservation
from engine.controllers.registry import make_controller
from engine.devices import LaneStream
from engine.drafters import make_drafter
from engine.kv import KVBudget
from engine.models.pair import ModelPair
from engine.profiling.cost_profile import CostProfile
from engine.profiling.lane_threads import release_openmp_pool
from engine.profiling.prepare import cached_profile, needs_profile
from engine.request import Request, RequestStatus
from engine.sampling import SamplingRows, make_generator
from engine.schedulers.admission import kv_reservation, normalised, request_problem
from engine.schedulers.driven import Driven
from engine.schedulers.lanes import Lane, LaneArbiter, LaneSpec
from engine.schedulers.plan import ArbiterRules, lane_budgets
from engine.schedulers.row_failures import RowFailures
from engine.schedulers.shutdown import track
from engine.schedulers.stats import Counters, EngineStats, LaneStats, p95_ms
from engine.sequence import Sequence
from engine.stages import DraftBlock, accept_block, draft_lengths, prefill_chunk, verify_block

log = logging.getLogger(__name__)

IDLE_WAIT_S = 0.02  # how long an idle lane sleeps before re-checking for work or stop


class Engine(RowFailures, Driven, ABC):
    name: EngineName  # each engine class names itself
    speculative: bool = True

    def __init__(self, pair: ModelPair, config: EngineConfig | None = None, profile: CostProfile | None = None) -> None:
        """``profile``: the step costs the ``cost`` controller reads; without one the cached profile is read.

        Building an engine never measures: with the ``cost`` controller and no
        profile handed or cached it raises ``engine.profiling.ProfileMissing``
        (run ``engine.profiling.prepare_profile`` first, as every command does).
        """
        self.pair = pair
        self.config = config or EngineConfig()
        self.drafter = make_drafter(self.config, pair, self.speculative)
        # an engine that does not speculate keeps a fixed controller only to report no draft length
        controls = self.config.controller if self.speculative else ControllerConfig(kind="fixed")
        if profile is None and needs_profile(self.config, self.name):
            profile = cached_profile(pair, self.config)
        self.controller: DraftLengthController = make_controller(controls, profile)
        self.budget = KVBudget(self.config.max_cache_tokens)
        self._inbox: queue.SimpleQueue[Request] = queue.SimpleQueue()
        self._waiting: deque[Request] = deque()  # owned by the admitting lane
        self._live: dict[int, Request] = {}  # every unfinished submitted request
        self._sequences: dict[int, Sequence] = {}  # every admitted sequence whose caches are not released yet
        self._lock = threading.Lock()
        self._wake = threading.Condition()
        self._stop = threading.Event()
        self._started = False
        self._counters = Counters()
        self._decode_latencies: deque[float] = deque(maxlen=64)
        self.profile = profile
        self.fatal_error: str | None = None
        self.composition: tuple[LaneSpec, ...] = self._compose()
        names = tuple(spec.name for spec in self.composition)
        cores = self.config.intra_op_threads or torch.get_num_threads()
        self.budgets = lane_budgets(names, cores, pair.device.type == "cuda", self.config.lane_compute)
        slots = self.budgets.slots if self.config.concurrent_lanes is None else self.config.concurrent_lanes
        rules = ArbiterRules(self.config.verify_promote_margin, self.config.prefill_after_turns)
        self.arbiter = LaneArbiter(slots, rules, self._backlog, cores if self.budgets.elastic else None)
        self.streams = {name: LaneStream(pair.device, lane=name) for name in names}
        self.lanes: dict[str, Lane] = {}  # made at start

    # ------------------------------------------------------------------ public
    def start(self) -> Engine:
        if self._started:
            return self
        track(self)  # stopped before the interpreter finalises, never ended mid-step
        self._started = True
        if self.config.intra_op_threads is not None:
            torch.set_num_threads(self.config.intra_op_threads)
        if cpu := self.pair.device.type == "cpu":
            release_openmp_pool()  # this thread loaded and profiled the models; from now on the lanes compute
        turns = cpu and (self.arbiter.slots == 1 or self.budgets.elastic) and len(self.composition) > 1
        for spec in self.composition:
            threads = self.budgets.threads[spec.name]
            self.lanes[spec.name] = Lane(spec, self.name, arbiter=self.arbiter, stream=self.streams[spec.name],
                                         threads=threads, guard=self._guard, idle=self._idle,
                                         release_pool=turns)  # fmt: skip
        for lane in self.lanes.values():
            lane.thread.start()
        return self

    def submit(self, request: Request) -> Request:
        """Queue ``request``; invalid or late requests come back REJECTED, never raised."""
        request.mark_arrived()
        request.params = normalised(request.params, self.pair.verifier.vocab_size)
        problem = self._validate(request)
        if not problem:
            with self._lock:  # stop() sets the flag under this lock: a request is either live or refused
                if self._stop.is_set():
                    problem = "engine is stopped"
                else:
                    self._counters.submitted += 1
                    self._live[id(request)] = request
                    self._inbox.put(request)
        if problem:
            request.fail(RequestStatus.REJECTED, problem)
            with self._lock:
                self._counters.end(request.status, submitted=True)
            return request
        self._notify()
        return request

    def cancel(self, request: Request, reason: str = "cancelled by the client") -> None:
        """End ``request`` CANCELLED from any thread (if not ended yet); its lane frees its caches next step."""
        self._end(request, RequestStatus.CANCELLED, reason)

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel unfinished requests and join every lane thread."""
        with self._lock:
            self._stop.set()
        self._notify()
        deadline = time.monotonic() + timeout
        for lane in self.lanes.values():
            if lane.thread.is_alive():
                lane.thread.join(max(0.0, deadline - time.monotonic()))
        alive = [lane.name for lane in self.lanes.values() if lane.thread.is_alive()]
        with self._lock:
            unfinished = list(self._live.values())
        for request in unfinished:
            self._end(request, RequestStatus.CANCELLED, "engine stopped before the request finished")
        if not alive:  # no lane holds a sequence any more: free the caches of those a stop caught mid-step
            self._retire(list(self._sequences.values()))
        if alive:
            raise RuntimeError(f"lane threads did not stop within {timeout}s: {', '.join(alive)}")

    @property
    def running(self) -> bool:
        return self._started and not self._stop.is_set()

    def stats(self) -> EngineStats:
        with self._lock:
            counters = replace(self._counters)
            live = len(self._live)
        waiting = self.waiting()
        depths = {spec.name: spec.depth() for spec in self.composition}
        return EngineStats(
            engine=self.name,
            time=time.perf_counter(),
            waiting=waiting,
            running=max(0, live - waiting),
            lanes=tuple(LaneStats(n, depths.get(n, 0), lane.busy_s) for n, lane in self.lanes.items()),
            draft_len=self.controller.length if self.speculative else None,
            counters=counters,
            unfinished=live,
            suffix_tree=self.drafter.tree_size(),
        )

    def waiting(self) -> int:
        """Requests submitted and not admitted yet (a monitor's read, without locks)."""
        return self._inbox.qsize() + len(self._waiting)

    # ------------------------------------------------------------ for lanes
    @abstractmethod
    def _compose(self) -> tuple[LaneSpec, ...]:
        """The engine's lanes, their works and the hand-offs between them (called once, by ``__init__``)."""

    def _backlog(self) -> dict[str, int]:
        return {spec.name: spec.backlog() for spec in self.composition}

    def _validate(self, request: Request) -> str | None:
        if self._stop.is_set():
            return "engine is stopped"
        return request_problem(request, self.pair, self.budget.capacity)

    def _admit(self, running: int) -> list[Sequence]:
        """Move submitted requests into new sequences while the batch limit and KV budget allow.

        ``running`` is how many sequences the engine already holds. Called by one lane only.
        """
        while True:
            try:
                self._waiting.append(self._inbox.get_nowait())
            except queue.Empty:
                break
        admitted = []
        while self._waiting and running + len(admitted) < self.config.max_batch_size:
            request = self._waiting[0]
            if request.status.finished:  # cancelled meanwhile
                self._waiting.popleft()
                continue
            need = kv_reservation(request)
            if not self.budget.try_reserve(need):
                break
            self._waiting.popleft()
            try:
                admitted.append(self._new_sequence(request, need))
            except Exception as exc:  # e.g. no memory for its caches: this request fails, the engine serves on
                self.budget.release(need)
                log.error("%s engine: could not start request %s: %s", self.name, request.request_id, exc)
                self._end(request, RequestStatus.FAILED, f"could not start: {type(exc).__name__}: {exc}")
        return admitted

    def _new_sequence(self, request: Request, reserved: int) -> Sequence:
        params = request.params
        stops = params.stop_token_ids if params.stop_token_ids is not None else self.pair.eos_token_ids
        seq = Sequence(
            request=request,
            stop_token_ids=frozenset(stops),
            reserved_tokens=reserved,
            generator=None if params.greedy else make_generator(params.seed, self.pair.device),
        )
        seq.verifier_kv = self.pair.verifier.new_store(reserved)
        if self.drafter.model is not None:
            seq.draft_kv = self.drafter.model.new_store(reserved)
        request.mark_admitted()
        self._sequences[id(seq)] = seq
        return seq

    def _prefill(self, seqs: list[Sequence]) -> list[Sequence]:
        """One prefill chunk; returns sequences that completed prefill and are still running."""
        live = [s for s in seqs if not s.finished]  # a request cancelled meanwhile gets no more prefill
        done = prefill_chunk(self.pair.verifier, self.drafter.model, live, self.config.prefill_chunk_tokens)
        self._count(tokens=len(done))
        return self._retire(done)

    def _draft(self, seqs: list[Sequence], verify_queue: int = 0) -> DraftBlock:
        """Find lookups, choose each row's L with the controller, and draft a block for ``seqs``."""
        rows = SamplingRows.of(seqs, self.pair.device)
        start = time.perf_counter()
        caps = draft_lengths(seqs, self.config.controller.max_len if self.speculative else 0)
        found = self.drafter.lookups(seqs, caps)
        lens = [0] * len(seqs)
        if self.speculative:
            signals = LoadSignals(verify_queue, p95_ms(self._decode_latencies), len(seqs))
            options = [
                RowOption(self.drafter.source(f), len(f.tokens) if f.tokens else cap)
                for f, cap in zip(found, caps, strict=True)
            ]
            lens = self.controller.lengths(signals, options)
        block = self.drafter.propose(seqs, lens, found, rows, self.config.controller.draft_confidence)
        block.draft_s = time.perf_counter() - start
        return block

    def _verify(self, block: DraftBlock) -> list[Sequence]:
        """Verify and accept a block; returns the sequences still running."""
        start = time.perf_counter()
        target = verify_block(self.pair.verifier, block)
        accept_block(block, target, record_steps=self.speculative)
        verify_s = time.perf_counter() - start
        emitted = sum(s.request.num_output_tokens for s in block.seqs)
        if not self.speculative:
            self._count(tokens=emitted - block.emitted_before)
        else:
            observation = StepObservation.of(block, [s.request.steps[-1].accepted for s in block.seqs], verify_s)
            self._count(emitted - block.emitted_before, observation.drafted, observation.accepted)
            self.controller.observe(observation)
        return self._retire(block.seqs)

    def _step(self, seqs: list[Sequence], verify_queue: int = 0) -> list[Sequence]:
        """Draft + verify + accept atomically (AR, Baseline, PD, PDV's atomic groups)."""
        start = time.perf_counter()
        block = self._draft(seqs, verify_queue)
        alive = self._verify(block)
        self._decode_latencies.append(time.perf_counter() - start)
        return alive

    def _count(self, tokens: int = 0, drafted: int = 0, accepted: int = 0) -> None:
        with self._lock:
            self._counters.add(tokens, drafted, accepted)

    def _retire(self, seqs: list[Sequence]) -> list[Sequence]:
        """Free the caches and budget of sequences whose requests ended (on any thread: ``cancel``); return the rest.
        Each state is read once, so a lane drops sequences only through here; releasing twice is a no-op."""
        running = []
        for seq in seqs:
            if not seq.finished:
                running.append(seq)
            elif not seq.released:
                self._sequences.pop(id(seq), None)
                if seq.request.status is RequestStatus.OK and seq.request.teaches_drafter:  # completed outputs only
                    self.drafter.learn(seq.request.output_token_ids)
                seq.release()
                self.budget.release(seq.reserved_tokens)
                with self._lock:
                    if self._live.pop(id(seq.request), None) is not None:
                        self._counters.end(seq.request.status)
        return running

    def _end(self, request: Request, status: RequestStatus, error: str) -> None:
        request.fail(status, error)
        with self._lock:
            if self._live.pop(id(request), None) is not None:
                self._counters.end(request.status)

    def _notify(self) -> None:
        with self._wake:
            self._wake.notify_all()

    def _idle(self) -> None:
        with self._wake:
            self._wake.wait(IDLE_WAIT_S)
