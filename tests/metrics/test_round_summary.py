"""A load point over rounds: pooled summaries, paired × AR intervals per figure, verdict and noise."""

from __future__ import annotations

import pytest

from metrics.host_noise import HostNoise
from metrics.request_metrics import RequestMetrics
from metrics.round_summary import RoundRun, compare_load
from metrics.run_key import RunKey
from metrics.schema import RATIO_COLUMNS
from metrics.summary import summarize


def metric(rid: str, ttft: float, tpot: float, out: int) -> RequestMetrics:
    return RequestMetrics(rid, "ok", None, 5, out, 0.0, 0.0, 0.0, ttft, tpot, 100.0, 0.0, (), 0, 0, 0)


def run(engine: str, round_: int, tokens: int, duration: float, ttft: float, complete: bool = True, noise=None):
    ms = (
        metric(f"{engine}-{round_}-a", ttft, 10.0, tokens // 2),
        metric(f"{engine}-{round_}-b", ttft, 10.0, tokens // 2),
    )
    key = RunKey(f"{engine}-r{round_}", engine, 4, None)
    return RoundRun(round_, summarize(key, ms, duration), ms, complete, noise)


def key_for(engine: str) -> RunKey:
    return RunKey(f"cmp-{engine}", engine, 4, None)


def test_ratios_pair_rounds_and_the_summary_pools_requests():
    runs = {
        # AR: 100 tokens in 10 s, 5 s, 10 s -> 10, 20, 10 tok/s; PDV: 15, 24, 13 tok/s -> 1.5, 1.2, 1.3 x AR
        "ar": [run("ar", 0, 100, 10.0, 100.0), run("ar", 1, 100, 5.0, 100.0), run("ar", 2, 100, 10.0, 100.0)],
        "pdv": [run("pdv", 1, 120, 5.0, 50.0), run("pdv", 0, 150, 10.0, 80.0), run("pdv", 2, 130, 10.0, 300.0)],
    }
    out = compare_load(runs, key_for)
    ar, pdv = out.rows
    assert (ar.summary.run_id, ar.rounds, pdv.rounds) == ("cmp-ar", 3, 3)
    # the interval a repeat run's median falls in (metrics.rounds.IntervalKind.REPEAT_RUN): log ratios of 1.5,
    # 1.2, 1.3 have s = 0.113047; t(0.975, 2) = 4.303; half width 4.303 * 0.113047 * sqrt(pi / 3) = 0.497788;
    # 1.3 * exp(-0.497788) = 0.790236 and 1.3 * exp(0.497788) = 2.138602, wider than the rounds' 1.2–1.5
    tok = pdv.ratios["tok_s"]
    assert (tok.median, tok.lo, tok.hi) == (pytest.approx(1.3), pytest.approx(0.790236), pytest.approx(2.138602))
    ttft = pdv.ratios["ttft_p50"]  # 0.8, 0.5, 3.0
    assert ttft.median == pytest.approx(0.8) and ttft.lo < 0.5 and ttft.hi > 3.0
    # pooled: 400 tokens in 25 s; TTFT p50 over the six requests (50, 50, 80, 80, 300, 300)
    assert pdv.summary.output_tok_s == pytest.approx(400 / 25)
    assert pdv.summary.ttft_p50_ms == pytest.approx(80.0)
    assert pdv.summary.completed == 6
    row = pdv.row()
    assert set(RATIO_COLUMNS) | {"rounds"} <= set(row)
    assert (row["tok_s_x_ar"], row["tok_s_x_ar_lo"], row["tok_s_x_ar_hi"], row["rounds"]) == (
        pytest.approx(1.3), pytest.approx(0.790236), pytest.approx(2.138602), 3,
    )  # fmt: skip
    assert (ar.row()["tok_s_x_ar"], ar.row()["tpot_p99_x_ar_hi"]) == (1.0, 1.0)
    assert out.verdict.fastest is None  # three rounds from 1.2 to 1.5: a repeat run could land below AR
    assert out.noise_warning is None


def test_an_incomplete_run_is_pooled_but_not_compared():
    runs = {
        "ar": [run("ar", 0, 100, 10.0, 100.0), run("ar", 1, 100, 10.0, 100.0)],
        "pd": [run("pd", 0, 50, 10.0, 100.0), run("pd", 1, 20, 1.0, 100.0, complete=False)],
    }
    pd = compare_load(runs, key_for).rows[1]
    tok = pd.ratios["tok_s"]
    assert (tok.median, tok.rounds) == (0.5, 1)
    assert pd.summary.completed == 4 and pd.rounds == 2


def test_an_engine_without_runs_yet_has_no_ratio_and_no_verdict():
    out = compare_load({"ar": [run("ar", 0, 100, 10.0, 100.0)], "pdv": []}, key_for)
    assert out.rows[1].ratios["tok_s"] is None and out.rows[1].row()["tok_s_x_ar_lo"] is None
    assert out.verdict.line() == "No verdict yet: no ratio yet for pdv."


def test_a_noisy_round_is_named_in_the_warning():
    busy = HostNoise(10.0, 0.5, 0.0, 2.0)
    runs = {"ar": [run("ar", 0, 100, 10.0, 100.0)], "pdv": [run("pdv", 0, 100, 10.0, 100.0, noise=busy)]}
    warning = compare_load(runs, key_for, label=str.upper).noise_warning
    assert warning is not None and "(PDV, round 1; worst: other processes took 50% of the CPU" in warning
