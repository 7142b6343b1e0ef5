"""Acceptance: conditional per-position rates counted from recorded steps, sampled deterministically."""

from __future__ import annotations

import json

import numpy as np
import pytest

from sim.acceptance import Acceptance, from_run_dir
from sim.policies import StepRecord


def test_rates_are_conditional_on_the_positions_before_being_accepted():
    # (4, 2): positions 1, 2 accepted, 3 rejected, 4 never tried; (4, 4) all; (2, 0) position 1 rejected
    a = Acceptance.from_steps([StepRecord(4, 2), StepRecord(4, 4), StepRecord(2, 0)], "hand")
    assert a.alpha == pytest.approx((2 / 3, 2 / 2, 1 / 2, 1 / 1))


def test_positions_past_the_known_ones_take_the_last_rate_and_expected_tokens_follow():
    a = Acceptance.parametric(0.5)
    assert a.rate(7) == 0.5
    assert a.expected_tokens(3) == pytest.approx(1 + 0.5 + 0.25 + 0.125)


def test_sampling_is_deterministic_for_a_seed_and_never_exceeds_the_draft():
    a = Acceptance.parametric(0.6)
    lens = [4, 0, 2, 8] * 50
    first = a.sample(lens, np.random.default_rng(7))
    assert first == a.sample(lens, np.random.default_rng(7))
    assert all(0 <= k <= n for k, n in zip(first, lens, strict=True))
    assert first != a.sample(lens, np.random.default_rng(8))


def test_sampled_acceptance_matches_its_rates():
    a = Acceptance((0.8, 0.5), "test")
    kept = np.array(a.sample([2] * 20000, np.random.default_rng(0)))
    assert (kept >= 1).mean() == pytest.approx(0.8, abs=0.02)
    assert (kept == 2).mean() == pytest.approx(0.4, abs=0.02)


def test_a_run_directory_gives_its_engines_recorded_steps(tmp_path):
    rows = [{"engine": "pd", "steps": [[4, 1, "model"], [4, 4, "model"]]}, {"engine": "ar", "steps": None}]
    (tmp_path / "outputs.jsonl").write_text("\n".join(json.dumps(r) for r in rows))
    a = from_run_dir(tmp_path, "pd")
    assert a.alpha[:2] == pytest.approx((1.0, 0.5))
    with pytest.raises(ValueError, match="no drafted tokens"):
        from_run_dir(tmp_path, "ar")
    with pytest.raises(ValueError, match="does not exist"):
        from_run_dir(tmp_path / "nothing")
