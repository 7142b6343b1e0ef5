"""Draft-length controller rules on synthetic inputs."""

import random

import pytest

from engine.config import ControllerConfig
from engine.controllers.base import LoadSignals, StepObservation, expected_tokens
from engine.controllers.registry import make_controller

CALM = LoadSignals(verify_queue=0, decode_p95_ms=10.0, batch_size=4)


def step(batch, draft_len, drafted, accepted, draft_s, verify_s, rejected, draft_positions=None) -> StepObservation:
    return StepObservation(
        batch_size=batch,
        draft_len=draft_len,
        drafted=drafted,
        accepted=accepted,
        draft_s=draft_s,
        verify_s=verify_s,
        rejected=rejected,
        draft_positions=draft_positions,
    )


def feed(ctrl, rate, steps=20, draft_len=4, batch=4, draft_s=0.01, verify_s=0.05):
    """Every sequence accepts round(rate * L) of its L drafted tokens; fewer than L means a rejection."""
    for _ in range(steps):
        kept = round(rate * draft_len)
        cut = batch if kept < draft_len else 0
        ctrl.observe(step(batch, draft_len, draft_len * batch, kept * batch, draft_s, verify_s, cut))


def feed_geometric(ctrl, alpha, steps, draft_len, batch, draft_s, verify_s, rng):
    """Sequences accept each drafted token with probability ``alpha`` until the first rejection."""
    for _ in range(steps):
        accepted = cut = 0
        for _ in range(batch):
            kept = 0
            while kept < draft_len and rng.random() < alpha:
                kept += 1
            accepted += kept
            cut += kept < draft_len
        ctrl.observe(step(batch, draft_len, draft_len * batch, accepted, draft_s, verify_s, cut))


def test_fixed_never_changes():
    ctrl = make_controller(ControllerConfig(kind="fixed", draft_len=5))
    feed(ctrl, 0.0)
    assert ctrl.next_length(LoadSignals(99, 1e6, 32)) == 5
    assert not ctrl.changes


def test_feedback_grows_with_high_acceptance_and_headroom_up_to_max():
    ctrl = make_controller(ControllerConfig(kind="feedback", draft_len=4, max_len=6))
    feed(ctrl, 0.9)
    lengths = [ctrl.next_length(CALM) for _ in range(5)]
    assert lengths == [5, 6, 6, 6, 6]
    assert "acceptance" in ctrl.changes[0].reason


def test_feedback_shrinks_on_low_acceptance_and_on_verify_backlog():
    low = make_controller(ControllerConfig(kind="feedback", draft_len=4))
    feed(low, 0.1)
    assert low.next_length(CALM) == 3
    busy = make_controller(ControllerConfig(kind="feedback", draft_len=4, target_verify_queue=2))
    feed(busy, 0.8)
    assert busy.next_length(LoadSignals(verify_queue=3, decode_p95_ms=0, batch_size=4)) == 3
    assert "verify queue 3 > 2" in busy.changes[-1].reason


def test_feedback_shrinks_when_decode_p95_is_over_target():
    ctrl = make_controller(ControllerConfig(kind="feedback", draft_len=4, target_decode_p95_ms=50))
    feed(ctrl, 0.8)
    assert ctrl.next_length(LoadSignals(0, 80.0, 4)) == 3
    assert ctrl.next_length(LoadSignals(0, 20.0, 4)) == 4  # back within target and acceptance high: grow


def test_feedback_turns_speculation_off_under_overload_with_low_acceptance_and_probes_back():
    ctrl = make_controller(ControllerConfig(kind="feedback", draft_len=1, min_len=1))
    feed(ctrl, 0.05, draft_len=1)
    overload = LoadSignals(verify_queue=9, decode_p95_ms=0, batch_size=8)
    assert ctrl.next_length(overload) == 0
    # at L = 0 nothing is drafted, so the engines observe no acceptance: the stale low reading must not pin L at 0
    assert ctrl.next_length(overload) == 0
    assert ctrl.next_length(CALM) == 1
    assert "probing" in ctrl.changes[-1].reason


def test_expected_tokens_formula():
    assert expected_tokens(0, 0.5) == pytest.approx(1.0)
    assert expected_tokens(4, 0.5) == pytest.approx((1 - 0.5**5) / 0.5)
    assert expected_tokens(3, 1.0) == 4.0


def test_goodput_picks_long_drafts_when_drafting_is_cheap_and_acceptance_high():
    ctrl = make_controller(ControllerConfig(kind="goodput", draft_len=2, max_len=8))
    for length in (1, 2, 3, 4):  # verify cost grows little with L; a draft position is cheap
        feed(ctrl, 0.9, steps=8, draft_len=length, draft_s=0.001 * length, verify_s=0.05 + 0.001 * (length + 1))
    assert ctrl.next_length(CALM) == 8


def test_goodput_picks_short_or_no_drafts_when_acceptance_is_low_and_drafting_costly():
    ctrl = make_controller(ControllerConfig(kind="goodput", draft_len=4, max_len=8))
    for length in (1, 2, 4):
        feed(ctrl, 0.05, steps=8, draft_len=length, draft_s=0.03 * length, verify_s=0.05 + 0.01 * (length + 1))
    assert ctrl.next_length(CALM) == 0
    assert "goodput" in ctrl.changes[-1].reason


def test_invalid_controller_config_is_refused_with_a_message():
    with pytest.raises(ValueError, match="controller must be one of"):
        ControllerConfig(kind="magic")
    with pytest.raises(ValueError, match="draft length"):
        ControllerConfig(draft_len=12, max_len=8)
    for bad in (-0.1, 0.0, 1.0):
        with pytest.raises(ValueError, match="draft confidence must be in"):
            ControllerConfig(draft_confidence=bad)


def test_goodput_probes_again_after_running_without_speculation():
    ctrl = make_controller(ControllerConfig(kind="goodput", draft_len=4, max_len=8))
    feed(ctrl, 0.05, steps=8, draft_len=2, draft_s=0.06, verify_s=0.07)
    assert ctrl.next_length(CALM) == 0
    other_batch = LoadSignals(verify_queue=0, decode_p95_ms=0, batch_size=16)  # no cost samples here
    lengths = [ctrl.next_length(other_batch) for _ in range(ctrl.PROBE_EVERY)]
    assert lengths[-1] == 1 and "probing" in ctrl.changes[-1].reason


def test_goodput_estimates_the_per_token_acceptance_not_accepted_over_drafted():
    ctrl = make_controller(ControllerConfig(kind="goodput", draft_len=4, max_len=8))
    rng = random.Random(0)
    feed_geometric(ctrl, 0.5, steps=200, draft_len=4, batch=8, draft_s=0.8, verify_s=1.0, rng=rng)
    # accepted / drafted is (a + a^2 + a^3 + a^4) / 4 = 0.23 at a = 0.5; the per-token estimate recovers a
    assert ctrl.acceptance == pytest.approx(0.234, abs=0.06)
    assert ctrl.token_acceptance == pytest.approx(0.5, abs=0.08)


def test_goodput_speculates_when_per_token_acceptance_pays_even_if_accepted_over_drafted_is_low():
    # a draft position costs 0.3 and a verify step 1.0. At a = 0.5, L = 1 yields 1.5 tokens for 1.3
    # (1.15 per unit) against 1.0 without drafting; reading accepted / drafted (0.23 at L = 4) as a would
    # give 1.23 / 1.3 = 0.95 and switch speculation off.
    ctrl = make_controller(ControllerConfig(kind="goodput", draft_len=4, max_len=8))
    feed_geometric(ctrl, 0.5, steps=200, draft_len=4, batch=8, draft_s=1.2, verify_s=1.0, rng=random.Random(1))
    assert ctrl.token_acceptance == pytest.approx(0.5, abs=0.1)
    assert ctrl.next_length(CALM) == 1
    assert "per-token acceptance" in ctrl.changes[-1].reason


def test_goodput_prices_a_draft_position_by_the_forwards_that_ran():
    # the confidence gate cut every block to 1 proposal after 2 draft forwards: a position costs 10 ms, not 20
    ctrl = make_controller(ControllerConfig(kind="goodput", draft_len=4, max_len=8, draft_confidence=0.5))
    for _ in range(4):
        ctrl.observe(step(4, 1, 4, 2, 0.02, 0.05, 2, draft_positions=2))
    per_position, _, _ = ctrl.costs(4)
    assert per_position == pytest.approx(0.01)


def test_the_feedback_targets_come_from_the_shared_cli_flags():
    import argparse

    from engine.flags import add_config_args, config_from_args

    parser = argparse.ArgumentParser()
    add_config_args(parser, ControllerConfig)
    args = parser.parse_args(["--controller", "feedback", "--target-verify-queue", "5", "--target-decode-p95-ms", "40"])
    cfg = config_from_args(ControllerConfig, args)
    assert (cfg.kind, cfg.target_verify_queue, cfg.target_decode_p95_ms) == ("feedback", 5, 40.0)
    assert config_from_args(ControllerConfig, parser.parse_args([])) == ControllerConfig()
    zeros = parser.parse_args(["--target-decode-p95-ms", "0", "--draft-confidence", "0"])
    off = config_from_args(ControllerConfig, zeros)
    assert (off.target_decode_p95_ms, off.draft_confidence) == (None, None)  # 0 on the command line means off


def test_the_change_log_keeps_only_the_latest_changes():
    from engine.controllers.base import CHANGE_LOG_SIZE

    ctrl = make_controller(ControllerConfig(kind="feedback", draft_len=4, max_len=6))
    for i in range(CHANGE_LOG_SIZE + 10):
        ctrl._record(1 + i % 2, f"change {i}")
    assert len(ctrl.changes) == CHANGE_LOG_SIZE
    assert ctrl.changes[0].reason == "change 10" and ctrl.changes[-1].reason == f"change {CHANGE_LOG_SIZE + 9}"
