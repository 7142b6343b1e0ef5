"""The cost controller's choices against hand-made cost profiles, and the profile's measurement and cache."""

from __future__ import annotations

import pytest

from engine.config import ControllerConfig
from engine.controllers.base import LoadSignals, RowOption, RowOutcome, StepObservation
from engine.controllers.cost import PROBE_EVERY, CostController
from engine.controllers.profile import CostProfile, load_or_measure, profile_path

CALM = LoadSignals(verify_queue=0, decode_p95_ms=0.0, batch_size=1)
CONFIG = ControllerConfig(kind="cost", draft_len=4, min_len=1, max_len=8)


def profile(per_extra_token_ms: float, draft_ms: float = 0.0) -> CostProfile:
    """A verifier forward costs 10 ms plus ``per_extra_token_ms`` per token past the first, at any batch size."""
    tokens = (1, 2, 3, 5, 9)
    row = tuple(10.0 + per_extra_token_ms * (t - 1) for t in tokens)
    return CostProfile((1, 64), tokens, (row, row), (draft_ms, draft_ms), {"cpu": "hand-made"})


def teach(ctrl: CostController, source: str, alpha: float, steps: int = 200, length: int = 8) -> None:
    """Observe rows of ``source`` whose proposals are each accepted with probability ``alpha`` (in expectation)."""
    for i in range(steps):
        # deterministic mix: accept the first k with k spread so that each position passes with ~alpha
        kept = 0
        while kept < length and ((i * 7919 + kept * 104729) % 1000) / 1000 < alpha:
            kept += 1
        ctrl.observe(
            StepObservation(
                batch_size=1,
                draft_len=length,
                drafted=length,
                accepted=kept,
                draft_s=0.0,
                verify_s=0.01,
                rows=(RowOutcome(source, length, kept),),
            )
        )


def test_expensive_verification_and_low_acceptance_choose_no_speculation():
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=5.0, draft_ms=2.0))
    teach(ctrl, "model", alpha=0.1)
    assert ctrl.lengths(CALM, [RowOption("model", 8)]) == [0]


def test_cheap_verification_and_high_acceptance_choose_the_longest_draft():
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=0.1))
    teach(ctrl, "lookup3", alpha=0.95)
    assert ctrl.lengths(CALM, [RowOption("lookup3", 8)]) == [8]


def test_each_source_gets_its_own_length():
    # lookups are right and free; the draft model is wrong and costs a forward per position
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=1.0, draft_ms=4.0))
    teach(ctrl, "lookup2", alpha=0.9)
    teach(ctrl, "model", alpha=0.05)
    options = [RowOption("lookup2", 6), RowOption("model", 8), RowOption(None, 8)]
    lookup_len, model_len, nothing = ctrl.lengths(LoadSignals(0, 0.0, 3), options)
    assert lookup_len >= 3 and model_len == 0 and nothing == 0


def test_a_row_never_gets_more_than_its_cap():
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=0.1))
    teach(ctrl, "lookup1", alpha=0.95)
    assert ctrl.lengths(CALM, [RowOption("lookup1", 2)]) == [2]


def test_a_source_left_at_zero_is_probed_again():
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=5.0, draft_ms=2.0))
    teach(ctrl, "model", alpha=0.05)
    choices = [ctrl.lengths(CALM, [RowOption("model", 8)])[0] for _ in range(PROBE_EVERY)]
    assert choices[:-1] == [0] * (PROBE_EVERY - 1) and choices[-1] == 1


def test_the_profile_interpolates_between_measured_points_and_clamps_beyond():
    p = CostProfile((1, 4), (1, 5), ((10.0, 20.0), (30.0, 60.0)), (2.0, 6.0), {})
    assert p.verify_s(1, 3) == pytest.approx(0.015)
    assert p.verify_s(4, 1) == pytest.approx(0.030)
    assert p.verify_s(2, 1) == pytest.approx(0.010 + (0.030 - 0.010) / 3)
    assert p.verify_s(64, 9) == pytest.approx(0.060)
    assert p.draft_s(4) == pytest.approx(0.006)
    assert CostProfile((1,), (1,), ((5.0,),), (), {}).draft_s(1) == 0.0


def test_the_profile_is_measured_once_per_machine_and_pair(tiny_pair, tmp_path, monkeypatch):
    monkeypatch.setenv("PDV_CACHE_DIR", str(tmp_path))
    first = load_or_measure(tiny_pair, max_batch=4, max_tokens=3, with_draft=True)
    assert first.batch_sizes == (1, 2, 4) and first.tokens == (1, 2, 3)
    assert all(v > 0 for row in first.verify_ms for v in row) and len(first.draft_ms) == 3
    assert profile_path(tiny_pair, 4, 3, True).is_file()

    def refuse(*args, **kwargs):
        raise AssertionError("a cached profile was measured again")

    monkeypatch.setattr("engine.controllers.profile.measure", refuse)
    assert load_or_measure(tiny_pair, max_batch=4, max_tokens=3, with_draft=True) == first
    assert "verify t=3" in first.table()


def test_the_profile_command_prints_the_table_and_where_it_is_cached(tmp_path, monkeypatch, capsys):
    from engine.__main__ import main

    monkeypatch.setenv("PDV_CACHE_DIR", str(tmp_path))
    argv = ["profile", "--preset", "tiny", "--max-batch-size", "2", "--max-draft-len", "2", "--draft-len", "2"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "verify t=3" in printed and str(tmp_path / "profiles") in printed


def test_a_step_overhead_beyond_the_forwards_favours_longer_drafts():
    # each proposed token adds 5 ms to a 10 ms verify: at alpha 0.4 that does not pay on the forwards alone,
    # but once every step also spends 40 ms outside the forwards, 1.4 tokens per step do
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=5.0))
    teach(ctrl, "lookup2", alpha=0.4)
    assert ctrl.lengths(CALM, [RowOption("lookup2", 4)]) == [0]
    for _ in range(100):  # steps that each took 40 ms more than their forwards
        ctrl.observe(StepObservation(batch_size=1, draft_len=0, drafted=0, accepted=0, draft_s=0.0, verify_s=0.05))
    assert ctrl.overhead_s == pytest.approx(0.04, rel=0.01)
    assert ctrl.lengths(CALM, [RowOption("lookup2", 4)])[0] > 0
