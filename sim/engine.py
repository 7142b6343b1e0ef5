"""The simulated engine: the engine interface on a virtual clock, with the real engines' policies.

A ``SimEngine`` fits ``workloads.drivers.engines.ReplayEngine`` (start,
submit, stats, stop, accounting), so a replay's dispatch and the run files
take it as they take a real engine. Submission checks a request with the real
``request_problem``; admission reserves ``kv_reservation`` tokens while the
batch limit and KV budget allow, in arrival order, as ``Engine._admit`` does;
each step's draft lengths come from the engine's own controller
(``make_controller``, the same config) through the same signals; PDV's groups
from ``plan_group`` and its step costs from ``mode_costs``; turns from
``choose_lane``. What is simulated is the forwards: their time comes from the
cost model, their accepted tokens from the acceptance model (seeded), and the
tokens have no identity, so stop tokens never end a request: each runs to its
``max_new_tokens``.

The compositions (which lanes carry which works) are ``sim.engines``'s.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from dataclasses import replace
from functools import cache
from types import SimpleNamespace
from typing import Any, NamedTuple

import numpy as np

from sim import timeline
from sim.acceptance import Acceptance
from sim.clock import EventLoop
from sim.cost_model import CostModel
from sim.lanes import SimArbiter, SimLane, SimWork
from sim.policies import (
    MODEL,
    ArbiterRules,
    ControllerConfig,
    Counters,
    EngineConfig,
    EngineName,
    EngineStats,
    FinishReason,
    LaneStats,
    LoadSignals,
    Request,
    RequestStatus,
    RowOption,
    RowOutcome,
    StepObservation,
    StepRecord,
    TokenKind,
    draft_lengths,
    kv_reservation,
    lane_budgets,
    make_controller,
    p95_ms,
    request_problem,
)
from sim.sequence import SimBlock, SimSequence

DECODE_LATENCIES = 64  # recent decode steps the feedback controller's p95 reads, as the real engine keeps


class LaneSpec(NamedTuple):
    """One simulated lane of an engine's composition (``engine.schedulers.lanes.LaneSpec``'s fields)."""

    name: str
    works: tuple[SimWork, ...]
    depth: Callable[[], int]  # work queued for the lane, as monitors show it
    backlog: Callable[[], int]  # work queued for the lane, as the arbiter weighs it


class SimEngine:
    name: EngineName
    speculative: bool = True

    def __init__(
        self,
        cost: CostModel,
        acceptance: Acceptance | None,
        config: EngineConfig | None = None,
        *,
        max_context: int,
        vocab_size: int,
        seed: int = 0,
        loop: EventLoop | None = None,
    ) -> None:
        self.config = config or EngineConfig()
        if self.config.colocated_lanes != 1:
            raise ValueError("the simulator runs colocated engines with one lane only (colocated_lanes = 1)")
        if self.speculative and acceptance is None:
            raise ValueError(f"the {self.name} engine drafts: it needs an acceptance model")
        self.cost = cost
        self.acceptance = acceptance
        self.loop = loop or EventLoop()
        self.rng = np.random.default_rng(seed)
        self.drafts_with_model = self.speculative
        controls = self.config.controller if self.speculative else ControllerConfig(kind="fixed")
        self.profile = cost.profile(self.config.max_batch_size, self.config.controller.max_len + 1)
        self.controller = make_controller(controls, self.profile)
        self._pair = SimpleNamespace(verifier=SimpleNamespace(vocab_size=vocab_size), max_context=max_context)
        self.budget_capacity = self.config.max_cache_tokens
        self.budget_used = 0
        self.counters = Counters()
        self._waiting: deque[Request] = deque()
        self._live: dict[int, Request] = {}
        self._sequences: dict[int, SimSequence] = {}
        self.decode_latencies: deque[float] = deque(maxlen=DECODE_LATENCIES)
        self.fatal_error: str | None = None
        self.on_finish: Callable[[Request], None] | None = None  # told of every request as it ends (a driver's clock)
        self._stopped = False
        self.composition: tuple[LaneSpec, ...] = self._compose()
        names = tuple(spec.name for spec in self.composition)
        cores = self.config.intra_op_threads or int(self.profile.machine.get("threads", "1") or 1)
        self.budgets = lane_budgets(names, cores, cost.cuda, self.config.lane_compute)
        slots = self.budgets.slots if self.config.concurrent_lanes is None else self.config.concurrent_lanes
        rules = ArbiterRules(self.config.verify_promote_margin, self.config.prefill_after_turns)
        backlog = lambda: {spec.name: spec.backlog() for spec in self.composition}  # noqa: E731
        self.arbiter = SimArbiter(self.loop, slots, rules, backlog, cost.concurrent_slowdown)
        self.lanes = {spec.name: SimLane(spec.name, spec.works, self.loop, self.arbiter) for spec in self.composition}

    def _compose(self) -> tuple[LaneSpec, ...]:
        raise NotImplementedError

    # ------------------------------------------------------------ the engine interface
    def start(self) -> SimEngine:
        return self

    def submit(self, request: Request) -> Request:
        """Queue ``request`` at the clock's now; an invalid or late one comes back REJECTED."""
        now = self.loop.now
        timeline.arrive(request, now)
        problem = "engine is stopped" if self._stopped else request_problem(request, self._pair, self.budget_capacity)
        if problem:
            timeline.fail(request, RequestStatus.REJECTED, problem, now)
            self.counters.end(request.status, submitted=True)
            self._ended(request)
            return request
        self.counters.submitted += 1
        self._live[id(request)] = request
        self._waiting.append(request)
        self.notify()
        return request

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel every unfinished request at the clock's now; no lane runs again."""
        self._stopped = True
        for lane in self.lanes.values():
            lane.stopped = True
        for request in list(self._live.values()):
            self._end(request, RequestStatus.CANCELLED, "engine stopped before the request finished")
        self.retire(list(self._sequences.values()))

    def stats(self) -> EngineStats:
        live = len(self._live)
        waiting = self.waiting()
        return EngineStats(
            engine=self.name,
            time=self.loop.now,
            waiting=waiting,
            running=max(0, live - waiting),
            lanes=tuple(LaneStats(s.name, s.depth(), self.lanes[s.name].busy_s) for s in self.composition),
            draft_len=self.controller.length if self.speculative else None,
            counters=replace(self.counters),
            unfinished=live,
        )

    def waiting(self) -> int:
        return len(self._waiting)

    @property
    def unfinished(self) -> int:
        """Requests submitted and not ended."""
        return len(self._live)

    def output_text(self, request: Request) -> str | None:
        return ""  # a simulated request has token times and kinds, no text

    def accounting_problems(self) -> list[str]:
        problem = self.stats().accounting_problem()
        return [] if problem is None else [problem]

    def describe(self) -> dict[str, Any] | None:
        return None

    def notify(self) -> None:
        """Something changed: every idle lane looks for work."""
        for lane in self.lanes.values():
            lane.poke()

    # ------------------------------------------------------------ what the works call
    def admit(self, running: int) -> list[SimSequence]:
        """Waiting requests into sequences while the batch limit and KV budget allow (``Engine._admit``'s rule)."""
        admitted = []
        while self._waiting and running + len(admitted) < self.config.max_batch_size:
            request = self._waiting[0]
            if request.status.finished:
                self._waiting.popleft()
                continue
            need = kv_reservation(request)
            if self.budget_used + need > self.budget_capacity:
                break
            self.budget_used += need
            self._waiting.popleft()
            timeline.admit(request, self.loop.now)
            seq = SimSequence(request, need)
            self._sequences[id(seq)] = seq
            admitted.append(seq)
        return admitted

    def prefill_chunk(self, seqs: list[SimSequence]) -> list[tuple[SimSequence, int]]:
        """The next chunk, first come first served, at most ``prefill_chunk_tokens`` (``stages.prefill_chunk``)."""
        chosen, budget = [], self.config.prefill_chunk_tokens
        for seq in seqs:
            if budget == 0:
                break
            n = min(seq.prompt_len - seq.prefilled, budget)
            if n > 0:
                chosen.append((seq, n))
                budget -= n
        return chosen

    def finish_prefill(self, chosen: list[tuple[SimSequence, int]]) -> list[SimSequence]:
        """Apply a chunk: prompts complete get their first token. Returns those still running."""
        done = []
        for seq, n in chosen:
            if seq.finished:
                continue
            seq.prefilled += n
            if seq.prefill_done:
                finish = FinishReason.LENGTH if seq.request.params.max_new_tokens == 1 else None
                timeline.emit(seq.request, [TokenKind.FIRST], finish, self.loop.now)
                done.append(seq)
        self.counters.add(len(done), 0, 0)
        return self.retire(done)

    def draft(self, seqs: list[SimSequence], verify_queue: int = 0) -> SimBlock:
        """Each row's L from the controller (as ``Engine._draft`` asks it), and the block's draft and verify time."""
        caps = draft_lengths(seqs, self.config.controller.max_len if self.speculative else 0)
        lens = [0] * len(seqs)
        if self.speculative:
            signals = LoadSignals(verify_queue, p95_ms(self.decode_latencies), len(seqs))
            lens = self.controller.lengths(signals, [RowOption(MODEL, cap) for cap in caps])
        positions = max(lens, default=0)
        context = sum(s.prefilled + len(s.request.output_token_ids) for s in seqs) / max(1, len(seqs))
        draft_s = positions * self.cost.draft_s(len(seqs), context) if self.drafts_with_model else 0.0
        tokens = 1 + sum(lens) / max(1, len(lens))
        return SimBlock(list(seqs), lens, draft_s, self.cost.verify_s(len(seqs), tokens, context), tokens)

    def verify(self, block: SimBlock, record_latency: bool) -> list[SimSequence]:
        """Accept a verified block: sampled accepted prefixes, then the correction or bonus token. Returns the
        sequences still running."""
        if record_latency:  # an atomic step: draft + verify, as ``Engine._step`` times it
            self.decode_latencies.append(block.draft_s + block.verify_s)
        live = [(s, n) for s, n in zip(block.seqs, block.lens, strict=True) if not s.finished]
        lens = [n for _, n in live]
        kept = self.acceptance.sample(lens, self.rng) if self.speculative else [0] * len(live)
        now, speculative, emitted = self.loop.now, self.speculative, 0
        for (seq, n), a in zip(live, kept, strict=True):
            request = seq.request
            remaining = request.params.max_new_tokens - len(request.output_token_ids)
            kinds = _kinds(a, n)[:remaining]
            if speculative:
                request.steps.append(StepRecord(n, a, MODEL if n else None))
            timeline.emit(request, kinds, FinishReason.LENGTH if len(kinds) == remaining else None, now)
            emitted += len(kinds)
        drafted, accepted = sum(lens), sum(kept)
        self.counters.add(emitted, drafted if speculative else 0, accepted)
        if speculative:
            self.controller.observe(
                StepObservation(
                    batch_size=len(live),
                    draft_len=max(lens, default=0),
                    drafted=drafted,
                    accepted=accepted,
                    draft_s=block.draft_s,
                    verify_s=block.verify_s,
                    rejected=sum(a < n for n, a in zip(lens, kept, strict=True)),
                    draft_positions=max(lens, default=0),
                    rows=tuple(RowOutcome(MODEL if n else None, n, a) for n, a in zip(lens, kept, strict=True)),
                )
            )
        return self.retire(block.seqs)

    def retire(self, seqs: list[SimSequence]) -> list[SimSequence]:
        """Release the budget of sequences whose requests ended; return the rest."""
        running = []
        for seq in seqs:
            if not seq.finished:
                running.append(seq)
            elif not seq.released:
                seq.released = True
                self._sequences.pop(id(seq), None)
                self.budget_used -= seq.reserved_tokens
                if self._live.pop(id(seq.request), None) is not None:
                    self.counters.end(seq.request.status)
                    self._ended(seq.request)
        return running

    def _end(self, request: Request, status: RequestStatus, error: str) -> None:
        timeline.fail(request, status, error, self.loop.now)
        if self._live.pop(id(request), None) is not None:
            self.counters.end(request.status)
            self._ended(request)
        if request in self._waiting:
            self._waiting.remove(request)

    def _ended(self, request: Request) -> None:
        if self.on_finish is not None:
            self.on_finish(request)


@cache
def _kinds(accepted: int, drafted: int) -> list[TokenKind]:
    """The kinds of a row's tokens: its accepted prefix, then the bonus (all accepted), the correction (one
    rejected) or a plain decode token (nothing drafted). Shared: callers slice, never mutate."""
    last = TokenKind.DECODE if drafted == 0 else TokenKind.BONUS if accepted == drafted else TokenKind.CORRECTION
    return [TokenKind.ACCEPTED] * accepted + [last]
