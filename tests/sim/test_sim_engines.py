"""Simulated engines: a hand-computed timeline, every request ending once, stop, determinism, the real policies."""

from __future__ import annotations

import ast
import threading
from pathlib import Path

import pytest

import engine.schedulers.plan as real_plan
import sim.engines
import sim.lanes
import sim.works
from sim.acceptance import Acceptance
from sim.clock import VirtualClock
from sim.engines import SIM_ENGINES, SimBaseline, SimPD, SimPDV
from sim.policies import ControllerConfig, EngineConfig, EngineName, Request, RequestStatus, SamplingParams, StepChoice
from tests.sim.support import ConstantCost
from workloads.drivers.arrivals import ClosedLoop, dispatch

FIXED_2 = ControllerConfig(kind="fixed", draft_len=2)


def make(cls, config: EngineConfig, alpha: float = 1.0, seed: int = 0, cost=None):
    return cls(cost or ConstantCost(), Acceptance.parametric(alpha), config, max_context=4096, vocab_size=1000,
               seed=seed)  # fmt: skip


def run(engine, prompts: list[int], max_new: list[int], concurrency: int) -> list[Request]:
    clock = VirtualClock(engine.loop, pending=lambda: engine.unfinished > 0)
    requests = [
        Request(f"r{i}", [1] * p, SamplingParams(max_new_tokens=n), on_event=lambda e: e.finished and clock.wake())
        for i, (p, n) in enumerate(zip(prompts, max_new, strict=True))
    ]
    sent = dispatch(requests, ClosedLoop(concurrency), engine.submit, clock, threading.Event())
    while not all(r.done.is_set() for r in sent) and clock.run_until_woken():
        pass
    return sent


def test_two_requests_on_baseline_follow_the_hand_computed_timeline():
    # prefill chunk (both prompts) 5 ms -> first tokens at 5 ms; step 1: L = 2, 2 draft positions (1 ms each) and a
    # verify (10 ms), every draft accepted: 3 tokens at 17 ms; step 2: L = min(2, 3 left - 1) = 2 again: 3 tokens
    # at 29 ms, the 7th and last token
    engine = make(SimBaseline, EngineConfig(controller=FIXED_2))
    a, b = run(engine, [4, 4], [7, 7], concurrency=2)
    for r in (a, b):
        assert r.status is RequestStatus.OK and r.arrival_time == 0.0
        assert r.first_token_time == pytest.approx(0.005)
        assert r.token_times == pytest.approx([0.005] + [0.017] * 3 + [0.029] * 3)
        assert [(s.draft_len, s.accepted) for s in r.steps] == [(2, 2), (2, 2)]
        assert r.finish_time == pytest.approx(0.029)
    assert [str(k) for k in a.token_kinds] == ["first", "accepted", "accepted", "bonus"] * 1 + [
        "accepted", "accepted", "bonus"
    ]  # fmt: skip


def test_a_rejected_draft_emits_the_correction_and_ar_decodes_one_token_a_step():
    engine = make(SimBaseline, EngineConfig(controller=FIXED_2), alpha=0.0)
    (r,) = run(engine, [4], [3], concurrency=1)
    # two tokens left: L = 1 (1 ms draft + 10 ms verify), rejected: the correction at 16 ms; one left: L = 0, a
    # plain verifier forward (10 ms)
    assert [str(k) for k in r.token_kinds] == ["first", "correction", "decode"]
    assert r.token_times == pytest.approx([0.005, 0.016, 0.026])
    ar = SIM_ENGINES[EngineName.AR](ConstantCost(), None, EngineConfig(), max_context=4096, vocab_size=1000)
    (r,) = run(ar, [4], [3], concurrency=1)
    assert [str(k) for k in r.token_kinds] == ["first", "decode", "decode"] and r.steps == []
    assert r.token_times == pytest.approx([0.005, 0.015, 0.025])


@pytest.mark.parametrize("name", list(EngineName))
def test_every_request_ends_exactly_once_and_the_counts_add_up(name):
    acceptance = None if name is EngineName.AR else Acceptance.parametric(0.6)
    engine = SIM_ENGINES[name](ConstantCost(), acceptance, EngineConfig(max_batch_size=8, max_cache_tokens=400),
                               max_context=4096, vocab_size=1000)  # fmt: skip
    ends = []
    sent = run(engine, [20 + i for i in range(30)], [5 + i % 7 for i in range(30)], concurrency=12)
    for r in sent:
        ends.append(r.status)
    assert ends == [RequestStatus.OK] * 30
    assert [r.num_output_tokens for r in sent] == [5 + i % 7 for i in range(30)]
    stats = engine.stats()
    assert stats.accounting_problem() is None and stats.outcomes.ok == 30 and stats.unfinished == 0
    assert stats.tokens_emitted == sum(r.num_output_tokens for r in sent)
    assert engine.budget_used == 0


def test_a_request_that_can_never_fit_is_rejected_with_one_message_and_the_rest_run():
    engine = make(SimPD, EngineConfig(controller=FIXED_2, max_cache_tokens=100))
    sent = run(engine, [10, 200, 10], [5, 5, 5], concurrency=3)
    assert [r.status for r in sent] == [RequestStatus.OK, RequestStatus.REJECTED, RequestStatus.OK]
    assert "more than the whole budget" in sent[1].error
    assert engine.stats().accounting_problem() is None


def test_stop_cancels_what_has_not_finished_and_keeps_the_accounting():
    engine = make(SimPDV, EngineConfig(controller=FIXED_2), alpha=0.5)
    requests = [Request(f"r{i}", [1] * 8, SamplingParams(max_new_tokens=50)) for i in range(6)]
    for r in requests:
        engine.submit(r)
    engine.loop.run_until(0.1)
    engine.stop()
    assert all(r.done.is_set() for r in requests)
    assert {r.status for r in requests} == {RequestStatus.CANCELLED}
    assert engine.stats().accounting_problem() is None and engine.budget_used == 0
    late = engine.submit(Request("late", [1] * 8))
    assert late.status is RequestStatus.REJECTED and late.error == "engine is stopped"


def test_a_simulation_is_deterministic_for_a_seed():
    def times(seed: int) -> list[list[float]]:
        engine = make(SimPDV, EngineConfig(), alpha=0.6, seed=seed)
        return [r.token_times for r in run(engine, [30] * 20, [40] * 20, concurrency=8)]

    assert times(1) == times(1)
    assert times(1) != times(2)


def test_the_simulator_runs_the_engines_own_plan_functions():
    assert sim.works.plan_group is real_plan.plan_group
    assert sim.lanes.choose_lane is real_plan.choose_lane
    assert sim.engines.mode_costs is real_plan.mode_costs


def test_a_changed_policy_changes_the_simulated_schedule(monkeypatch):
    def modes(config: EngineConfig) -> tuple[int, int]:
        engine = make(SimPDV, config, alpha=0.7)
        run(engine, [30] * 16, [30] * 16, concurrency=8)
        return engine.stats().step_modes

    counted = modes(EngineConfig(step_choice=StepChoice.COUNT))
    assert counted.pipelined > 0
    calls = []

    def always_atomic(state, rules, costs):
        calls.append(state)
        plan = real_plan.plan_group(state, rules._replace(hybrid_threshold=10**6), costs)
        return plan

    monkeypatch.setattr(sim.works, "plan_group", always_atomic)
    forced = modes(EngineConfig(step_choice=StepChoice.COUNT))
    assert calls and forced.pipelined == 0 and forced.atomic > counted.atomic


def test_only_the_adapter_imports_the_engine():
    importers = []
    for path in (Path(sim.__file__).parent).glob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            names += [node.module or ""] if isinstance(node, ast.ImportFrom) else []
            if any(n == "engine" or n.startswith("engine.") for n in names):
                importers.append(path.name)
    assert sorted(set(importers)) == ["policies.py"]
