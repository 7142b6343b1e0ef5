"""The cost controller's choices against hand-made cost profiles; the profiling step, its progress and its cache."""

from __future__ import annotations

import pytest

from engine.config import ControllerConfig
from engine.controllers.base import LoadSignals, RowOption, RowOutcome, StepObservation
from engine.controllers.cost import PLAIN_EVERY, PROBE_EVERY, REALISED_MIN_STEPS, CostController, Realised, Residual
from engine.draft_source import MODEL, DraftSource, SourceKind
from engine.profiling import CostProfile, ProfileMissing, ProfileShape, prepare_profile
from engine.profiling.measure import MEASURING
from engine.profiling.store import profile_path


def lookup(match: int) -> DraftSource:
    return DraftSource(SourceKind.LOOKUP, match)


CALM = LoadSignals(verify_queue=0, decode_p95_ms=0.0, batch_size=1)
CONFIG = ControllerConfig(kind="cost", draft_len=4, min_len=1, max_len=8)


def profile(per_extra_token_ms: float, draft_ms: float = 0.0) -> CostProfile:
    """A verifier forward costs 10 ms plus ``per_extra_token_ms`` per token past the first, at any batch size."""
    tokens = (1, 2, 3, 5, 9)
    row = tuple(10.0 + per_extra_token_ms * (t - 1) for t in tokens)
    return CostProfile((1, 64), tokens, (row, row), (draft_ms, draft_ms), {"cpu": "hand-made"})


def teach(
    ctrl: CostController, source: DraftSource, alpha: float, steps: int = 200, length: int = 8, beyond_s: float = 0.0
) -> None:
    """Observe rows of ``source`` whose proposals are each accepted with probability ``alpha`` (in expectation),
    in steps that took ``beyond_s`` longer than the profile's forwards."""
    model = int(source == MODEL)
    took = ctrl.forward_s(1, length, model, length * model) + beyond_s
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
                verify_s=took,
                rows=(RowOutcome(source, length, kept),),
            )
        )


def test_expensive_verification_and_low_acceptance_choose_no_speculation():
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=5.0, draft_ms=2.0))
    teach(ctrl, MODEL, alpha=0.1)
    assert ctrl.lengths(CALM, [RowOption(MODEL, 8)]) == [0]


def test_cheap_verification_and_high_acceptance_choose_the_longest_draft():
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=0.1))
    teach(ctrl, lookup(3), alpha=0.95)
    assert ctrl.lengths(CALM, [RowOption(lookup(3), 8)]) == [8]


def test_each_source_gets_its_own_length():
    # lookups are right and free; the draft model is wrong and costs a forward per position
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=1.0, draft_ms=4.0))
    teach(ctrl, lookup(2), alpha=0.9)
    teach(ctrl, MODEL, alpha=0.05)
    options = [RowOption(lookup(2), 6), RowOption(MODEL, 8), RowOption(None, 8)]
    lookup_len, model_len, nothing = ctrl.lengths(LoadSignals(0, 0.0, 3), options)
    assert lookup_len >= 3 and model_len == 0 and nothing == 0


def test_a_row_never_gets_more_than_its_cap():
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=0.1))
    teach(ctrl, lookup(1), alpha=0.95)
    assert ctrl.lengths(CALM, [RowOption(lookup(1), 2)]) == [2]


def test_a_source_left_at_zero_is_probed_again():
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=5.0, draft_ms=2.0))
    teach(ctrl, MODEL, alpha=0.05)
    choices = [ctrl.lengths(CALM, [RowOption(MODEL, 8)])[0] for _ in range(PROBE_EVERY)]
    assert choices[:-1] == [0] * (PROBE_EVERY - 1) and choices[-1] == 1


def test_sources_left_at_zero_are_probed_together_on_one_step():
    # a drafting step pays once for widening the verify: a source that appeared later waits for the next
    # probe step rather than costing one of its own
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=5.0, draft_ms=2.0))
    teach(ctrl, lookup(2), alpha=0.05)
    teach(ctrl, lookup(3), alpha=0.05)
    first, both = [RowOption(lookup(2), 8)], [RowOption(lookup(2), 8), RowOption(lookup(3), 8)]
    choices = [ctrl.lengths(CALM, first) + [0] for _ in range(8)]
    choices += [ctrl.lengths(CALM, both) for _ in range(3 * PROBE_EVERY - 8)]
    drafting = [i for i, c in enumerate(choices) if any(c)]
    assert drafting == [PROBE_EVERY - 1, 2 * PROBE_EVERY - 1, 3 * PROBE_EVERY - 1]
    assert choices[2 * PROBE_EVERY - 1] == [1, 1]


def test_a_source_left_at_zero_rides_along_on_steps_that_draft_anyway():
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=2.0))
    teach(ctrl, lookup(2), alpha=0.02)
    teach(ctrl, lookup(5), alpha=0.95)
    options = [RowOption(lookup(2), 8), RowOption(lookup(5), 8)]
    choices = [ctrl.lengths(CALM, options) for _ in range(2 * PROBE_EVERY)]
    assert all(c[1] == 8 for c in choices)
    assert [c[0] for c in choices] == ([0] * (PROBE_EVERY - 1) + [1]) * 2


def test_the_profile_interpolates_between_measured_points_and_clamps_beyond():
    p = CostProfile((1, 4), (1, 5), ((10.0, 20.0), (30.0, 60.0)), (2.0, 6.0), {})
    assert p.verify_s(1, 3) == pytest.approx(0.015)
    assert p.verify_s(4, 1) == pytest.approx(0.030)
    assert p.verify_s(2, 1) == pytest.approx(0.010 + (0.030 - 0.010) / 3)
    assert p.verify_s(64, 9) == pytest.approx(0.060)
    assert p.draft_s(4) == pytest.approx(0.006)
    assert CostProfile((1,), (1,), ((5.0,),), (), {}).draft_s(1) == 0.0


def _small_config(**engine):
    from engine.config import EngineConfig

    controller = ControllerConfig(kind="cost", draft_len=2, min_len=1, max_len=2)
    return EngineConfig(**{"drafter": "model", "max_batch_size": 4, "controller": controller, **engine})


def test_the_profile_is_measured_once_per_machine_and_pair(tiny_pair, tmp_path, monkeypatch):
    monkeypatch.setenv("PDV_PROFILE_DIR", str(tmp_path))
    first = prepare_profile(tiny_pair, _small_config(), engine="baseline")
    assert first.batch_sizes == (1, 2, 4) and first.tokens == (1, 2, 3)
    assert all(v > 0 for row in first.verify_ms for v in row) and len(first.draft_ms) == 3
    path = profile_path(tiny_pair, ProfileShape(4, 3, True))
    assert path.is_file() and path.parent == tmp_path

    def refuse(*args, **kwargs):
        raise AssertionError("a cached profile was measured again")

    monkeypatch.setattr("engine.profiling.prepare.measure", refuse)
    assert prepare_profile(tiny_pair, _small_config(), engine="baseline") == first
    assert "verify t=3" in first.table()
    # a smaller grid reads the larger profile; a larger one, or one without the draft, is measured
    assert prepare_profile(tiny_pair, _small_config(max_batch_size=2), engine="baseline") == first
    with pytest.raises(AssertionError, match="measured again"):
        prepare_profile(tiny_pair, _small_config(max_batch_size=8), engine="baseline")
    with pytest.raises(AssertionError, match="measured again"):
        prepare_profile(tiny_pair, _small_config(max_batch_size=2, drafter="ngram"), engine="baseline")


def test_measuring_reports_progress_up_to_the_whole_grid(tiny_pair, tmp_path, monkeypatch):
    monkeypatch.setenv("PDV_PROFILE_DIR", str(tmp_path))
    reports: list[tuple[str, float]] = []
    prepare_profile(tiny_pair, _small_config(), lambda m, f: reports.append((m, f)), engine="baseline")
    fractions = [f for _, f in reports]
    assert all(m.startswith(MEASURING) for m, _ in reports)
    assert fractions[0] == 0.0 and fractions[-1] == pytest.approx(1.0) and fractions == sorted(fractions)
    assert "s left)" in reports[-1][0]
    reports.clear()
    prepare_profile(tiny_pair, _small_config(), lambda m, f: reports.append((m, f)), engine="baseline")
    assert reports == []  # read from the cache: nothing to watch


def test_an_engine_never_measures_and_names_the_step_when_the_profile_is_missing(tiny_pair, tmp_path, monkeypatch):
    from engine.schedulers.registry import make_engine

    monkeypatch.setenv("PDV_PROFILE_DIR", str(tmp_path))

    def refuse(*args, **kwargs):
        raise AssertionError("an engine measured its profile")

    monkeypatch.setattr("engine.profiling.prepare.measure", refuse)
    with pytest.raises(ProfileMissing, match="python -m engine profile --preset tiny"):
        make_engine("pdv", tiny_pair, _small_config())
    make_engine("ar", tiny_pair, _small_config())  # AR never drafts: it needs no profile
    monkeypatch.undo()
    monkeypatch.setenv("PDV_PROFILE_DIR", str(tmp_path))
    profile = prepare_profile(tiny_pair, _small_config(), engine="baseline")
    assert make_engine("pdv", tiny_pair, _small_config()).controller.profile == profile


def test_the_profile_command_prints_the_table_and_where_it_is_cached(profiles_dir, capsys):
    from engine.__main__ import main

    argv = ["profile", "--preset", "tiny", "--max-batch-size", "2", "--max-draft-len", "2", "--draft-len", "2"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "verify t=3" in printed and str(profiles_dir) in printed


def plain_steps(ctrl: CostController, beyond_s: float, steps: int = 100, batch: int = 1) -> None:
    """Observe steps without proposals that took ``beyond_s`` longer than the profile's forward."""
    took = ctrl.forward_s(batch, 0, 0, 0) + beyond_s
    for _ in range(steps):
        ctrl.observe(StepObservation(batch_size=batch, draft_len=0, drafted=0, accepted=0, draft_s=0.0, verify_s=took))


def test_a_step_overhead_beyond_the_forwards_favours_longer_drafts():
    # each proposed token adds 5 ms to a 10 ms verify: at alpha 0.4 that does not pay on the forwards alone,
    # but once every step also spends 40 ms outside the forwards, 1.4 tokens per step do
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=5.0))
    teach(ctrl, lookup(2), alpha=0.4)
    assert ctrl.lengths(CALM, [RowOption(lookup(2), 4)]) == [0]
    plain_steps(ctrl, beyond_s=0.04)
    assert ctrl.residual.coefficients()[0] == pytest.approx(0.04, abs=1e-4)
    assert ctrl.lengths(CALM, [RowOption(lookup(2), 4)])[0] > 0


def test_proposed_tokens_that_cost_more_than_the_profile_says_stop_the_drafting():
    # the profile says a proposed token adds 1 ms to a 10 ms verify, so at alpha 0.4 drafting pays;
    # the steps say a plain step costs 2 ms more than its forward and a drafting step 2 ms + 8 ms per token more
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=1.0))
    teach(ctrl, lookup(2), alpha=0.4, steps=50, length=2)
    assert ctrl.lengths(CALM, [RowOption(lookup(2), 4)])[0] > 0
    for _ in range(10):
        plain_steps(ctrl, beyond_s=0.002, steps=4)
        for length in (1, 2, 4):
            teach(ctrl, lookup(2), alpha=0.4, steps=4, length=length, beyond_s=0.002 + 0.008 * length)
    per_row, per_token, per_drafting = ctrl.residual.coefficients()
    assert per_row == pytest.approx(0.002, abs=5e-4) and per_token == pytest.approx(0.008, abs=5e-4)
    assert per_drafting == pytest.approx(0.0, abs=1e-3)
    assert ctrl.lengths(CALM, [RowOption(lookup(2), 4)]) == [0]


def test_a_cost_every_drafting_step_pays_once_stops_drafts_too_short_to_share_it():
    # the profile says drafting pays at alpha 0.4; the steps say any drafting step costs 30 ms more, whatever its
    # width (wider attention for every row), which only a well-accepted long draft earns back
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=1.0))
    teach(ctrl, lookup(2), alpha=0.4, steps=50, length=2)
    teach(ctrl, lookup(5), alpha=0.95, steps=50, length=8)
    assert ctrl.lengths(CALM, [RowOption(lookup(2), 4)])[0] > 0
    for _ in range(10):
        plain_steps(ctrl, beyond_s=0.0, steps=4)
        for length in (1, 2, 4):
            teach(ctrl, lookup(2), alpha=0.4, steps=4, length=length, beyond_s=0.03)
    assert ctrl.residual.coefficients() == pytest.approx((0.0, 0.0, 0.03), abs=5e-4)
    assert ctrl.lengths(CALM, [RowOption(lookup(2), 4)]) == [0]
    assert ctrl.lengths(CALM, [RowOption(lookup(5), 8)]) == [8]


@pytest.mark.parametrize(
    ("per_row", "per_token", "per_drafting"), [(0.003, 0.002, 0.0), (0.001, -0.0005, 0.01), (0.0, 0.004, -0.002)]
)
def test_the_residual_fit_recovers_its_parts_per_row_per_token_and_per_drafting_step(per_row, per_token, per_drafting):
    fit = Residual()
    for rows, tokens in [(16, 0), (16, 20), (12, 30), (14, 7), (16, 48), (8, 0), (16, 3)] * 5:
        fit.add(rows, tokens, per_row * rows + per_token * tokens + per_drafting * (tokens > 0))
    assert fit.coefficients() == pytest.approx((per_row, per_token, per_drafting), rel=0.03, abs=2e-5)  # the ridge
    assert Residual().coefficients() == (0.0, 0.0, 0.0)


def test_the_residual_stays_on_the_rows_while_every_step_drafts_alike():
    # tokens per row never vary and every step drafts, so rows, tokens and drafting cannot be told apart:
    # the ridge puts the time on the rows
    fit = Residual()
    for _ in range(50):
        fit.add(8, 32, 0.008)
    per_row, per_token, per_drafting = fit.coefficients()
    assert per_row == pytest.approx(0.001, rel=0.01) and abs(per_token) < 1e-5 and abs(per_drafting) < 1e-5


def test_a_controller_that_always_drafts_runs_a_plain_step_every_so_often():
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=0.1))
    teach(ctrl, lookup(3), alpha=0.95)
    choices = [ctrl.lengths(CALM, [RowOption(lookup(3), 8)])[0] for _ in range(2 * PLAIN_EVERY + 3)]
    assert choices == ([8] * PLAIN_EVERY + [0]) * 2 + [8]
    assert ctrl.lengths(CALM, [RowOption(None, 8)]) == [0]  # a step with nothing to propose is a plain one
    assert [ctrl.lengths(CALM, [RowOption(lookup(3), 8)])[0] for _ in range(PLAIN_EVERY)] == [8] * PLAIN_EVERY


def test_the_realised_factor_is_realised_over_predicted_tokens_per_second_once_a_few_steps_are_seen():
    arm = Realised()
    assert arm.factor() == 1.0
    for _ in range(2 * int(REALISED_MIN_STEPS)):
        arm.add(tokens=12, predicted_tokens=16, seconds=0.2, predicted_seconds=0.1)  # 3/4 the tokens, twice the time
    assert arm.factor() == pytest.approx(0.375)


def test_steps_are_compared_with_the_model_by_kind():
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=1.0))
    plain_steps(ctrl, beyond_s=0.0, steps=10, batch=2)
    assert ctrl.plain.factor() == pytest.approx(1.0) and ctrl.drafted.steps == 0
    teach(ctrl, lookup(2), alpha=0.4, length=2)  # steps on time, accepted as the counts say: the model is right
    assert ctrl.drafted.factor() == pytest.approx(1.0, abs=0.1) and ctrl.plain.factor() == pytest.approx(1.0)
    teach(ctrl, lookup(2), alpha=0.4, steps=8, length=2, beyond_s=0.02)  # then they took 3x longer than predicted
    assert ctrl.drafted.factor() < 0.7 and ctrl.plain.factor() == pytest.approx(1.0)


def test_drafting_that_delivered_less_than_predicted_gives_way_to_plain_steps_with_a_probe_now_and_then():
    ctrl = CostController(CONFIG, profile(per_extra_token_ms=1.0))
    teach(ctrl, lookup(2), alpha=0.4, steps=50, length=2)
    option = [RowOption(lookup(2), 4)]
    assert ctrl.lengths(CALM, option)[0] > 0
    ctrl.drafted.factor = lambda: 0.5  # drafting steps lately emitted half the tokens per second predicted
    choices = [ctrl.lengths(CALM, option)[0] for _ in range(2 * PROBE_EVERY)]
    vetoed = [0] * (PROBE_EVERY - 1)
    assert choices[: PROBE_EVERY - 1] == vetoed and choices[PROBE_EVERY - 1] > 0
    assert choices[PROBE_EVERY : 2 * PROBE_EVERY - 1] == vetoed
    ctrl.drafted.factor = lambda: 1.0
    assert ctrl.lengths(CALM, option)[0] > 0
