"""The verdict line: a winner only when its interval clears everyone's, within noise, slower, too few rounds."""

from __future__ import annotations

from metrics.rounds import RatioInterval
from metrics.verdict import Standing, verdict

AR = RatioInterval(1.0, 1.0, 1.0, 5)


def names(engine: str) -> str:
    return {"ar": "AR", "baseline": "Baseline", "pd": "PD", "pdv": "PDV"}[engine]


def test_the_fastest_is_named_when_its_interval_clears_every_other():
    v = verdict(
        {
            "ar": AR,
            "baseline": RatioInterval(1.10, 0.97, 1.15, 5),
            "pd": RatioInterval(0.80, 0.75, 0.85, 5),
            "pdv": RatioInterval(1.26, 1.18, 1.40, 5),
        }
    )
    assert v.fastest == "pdv"
    assert [(n, s) for n, s, _ in v.standings] == [
        ("pdv", Standing.FASTER),
        ("baseline", Standing.WITHIN_NOISE),
        ("pd", Standing.SLOWER),
    ]
    assert v.line(names) == (
        "PDV is fastest: 1.26× AR (1.18–1.40) over 5 rounds; Baseline within noise of AR: 1.10× AR (0.97–1.15); "
        "PD slower than AR: 0.80× AR (0.75–0.85)."
    )


def test_no_winner_when_the_two_fastest_overlap_even_if_both_beat_ar():
    v = verdict({"ar": AR, "baseline": RatioInterval(1.2, 1.1, 1.3, 3), "pdv": RatioInterval(1.25, 1.15, 1.35, 3)})
    assert v.fastest is None
    assert [s for _, s, _ in v.standings] == [Standing.FASTER, Standing.FASTER]
    assert v.line(names).startswith(
        "No engine is clearly fastest over 3 rounds; PDV faster than AR: 1.25× AR (1.15–1.35)"
    )


def test_ar_is_fastest_when_everyone_else_clears_below_it():
    v = verdict({"ar": AR, "baseline": RatioInterval(0.9, 0.85, 0.95, 3), "pd": RatioInterval(0.7, 0.6, 0.99, 3)})
    assert v.fastest == "ar"
    assert v.line(names) == (
        "AR is fastest over 3 rounds; Baseline slower than AR: 0.90× AR (0.85–0.95); "
        "PD slower than AR: 0.70× AR (0.60–0.99)."
    )


def test_an_interval_that_reaches_one_is_within_noise_and_names_no_winner():
    v = verdict({"ar": AR, "baseline": RatioInterval(0.9, 0.8, 1.0, 3)})
    assert v.fastest is None
    assert v.standings[0][1] == Standing.WITHIN_NOISE
    assert "Baseline within noise of AR: 0.90× AR (0.80–1.00)." in v.line(names)


def test_too_few_rounds_give_no_verdict_however_large_the_ratio():
    v = verdict({"ar": AR, "pdv": RatioInterval(3.0, 2.9, 3.1, 2)})
    assert v.fastest is None and v.problem is not None
    assert v.line(names) == "No verdict yet: 2 rounds measured, a verdict needs at least 3."


def test_no_verdict_without_ar_or_before_every_engine_has_a_ratio():
    assert verdict({"pdv": RatioInterval(1.2, 1.1, 1.3, 3)}).line() == (
        "No verdict yet: the comparison has no AR run to compare with."
    )
    assert verdict({"ar": AR, "pdv": None}).line() == "No verdict yet: no ratio yet for pdv."


def test_an_interval_inside_the_margin_says_the_same_and_one_past_it_within_noise():
    v = verdict({"ar": AR, "baseline": RatioInterval(1.02, 0.95, 1.09, 5), "pd": RatioInterval(1.02, 0.95, 1.11, 5)})
    assert v.fastest is None
    assert [(n, s) for n, s, _ in v.standings] == [("baseline", Standing.SAME), ("pd", Standing.WITHIN_NOISE)]
    assert v.line(names) == (
        "No engine is clearly fastest over 5 rounds; Baseline the same as AR within ±10 %: 1.02× AR (0.95–1.09); "
        "PD within noise of AR: 1.02× AR (0.95–1.11)."
    )


def test_a_single_round_is_never_called_the_same():
    v = verdict({"ar": AR, "baseline": RatioInterval(1.0, 1.0, 1.0, 1)}, min_rounds=1)
    assert v.standings[0][1] == Standing.WITHIN_NOISE
