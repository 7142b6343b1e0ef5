"""Every part of ``python -m workloads bench`` in its --quick mode, end to end on the tiny pair: the rows it
writes, and its "every output identical" check, shown to fail when one engine's output is made to differ.

The load sweep and the overhead part's passing run are in test_bench.py (with the docs renderer); the drafter
comparison, which runs when named, is here too.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.config import ENGINES
from metrics.runs import list_run_dirs
from workloads.bench import drafters, lanes, load, overhead, single
from workloads.bench.common import read_csv
from workloads.bench.run import main

QUICK = ["--quick", "--preset", "tiny", "--device", "cpu"]


def bench(out: Path, *args: str) -> Path:
    assert main([*QUICK, "--out", str(out), *args]) == 0
    return out


def notes_of(out: Path, part: str) -> list[str]:
    return [n["note"] for n in read_csv(out / "notes.csv") if n["part"] == part]


def one_output_longer(module, monkeypatch, wanted) -> None:
    """Make ``module``'s replay hand back one extra token on the first request of the runs ``wanted(spec)``
    picks: the engine's output then differs from the reference's, as a lossless bug would make it."""
    real = module.replay

    def replay(pair, trace, spec, *args, **kwargs):
        result = real(pair, trace, spec, *args, **kwargs)
        if wanted(spec):
            result.requests[0].output_token_ids.append(result.requests[0].output_token_ids[0])
        return result

    monkeypatch.setattr(module, "replay", replay)


def test_single_stream_runs_every_engine_and_transformers_with_outputs_equal_to_ar(tmp_path):
    out = bench(tmp_path / "b", "--parts", "single")
    rows = read_csv(out / "2-single.csv")
    assert {r["label"] for r in rows} >= {*ENGINES, single.HF, single.HF_LOOKUP}
    assert all(float(r["output_tok_s"]) > 0 for r in rows)
    assert {r["same_output_as_ar"] for r in rows} == {"True"}
    assert "Every output equal to ar's: True." in notes_of(out, single.NAME)


def test_single_streams_identical_output_check_fails_when_one_engine_differs(tmp_path, monkeypatch):
    one_output_longer(single, monkeypatch, lambda spec: spec.engine == "pdv")
    out = bench(tmp_path / "b", "--parts", "single")
    same = {r["label"]: r["same_output_as_ar"] for r in read_csv(out / "2-single.csv")}
    assert same["pdv"] == "False" and same["baseline"] == same["ar"] == "True"
    [note] = [n for n in notes_of(out, single.NAME) if n.startswith("Every output")]
    assert note.startswith("Every output equal to ar's: False. Different: pdv (C=1, round 0)")


def test_overheads_identical_output_check_fails_when_transformers_differs(tmp_path, monkeypatch):
    real = overhead.hf_generate

    def hf_generate(*args, **kwargs):
        tok_s, outputs = real(*args, **kwargs)
        return tok_s, [outputs[0] + [0], *outputs[1:]]

    monkeypatch.setattr(overhead, "hf_generate", hf_generate)
    out = bench(tmp_path / "b", "--parts", "overhead")
    assert {r["same_output"] for r in read_csv(out / "1-overhead.csv")} == {"False"}
    assert "identical on every prompt: False." in notes_of(out, overhead.NAME)[0]


def one_sweep_output_longer(module, monkeypatch, engine: str) -> None:
    """As ``one_output_longer``, for the parts that run sweeps: ``engine``'s first request gets one more token."""
    real = module.run_sweep

    def run_sweep(*args, **kwargs):
        results = real(*args, **kwargs)
        for result in results:
            if result.key.engine == engine:
                result.requests[0].output_token_ids.append(result.requests[0].output_token_ids[0])
        return results

    monkeypatch.setattr(module, "run_sweep", run_sweep)


def test_the_load_sweeps_identical_output_check_fails_when_one_engine_differs(tmp_path, monkeypatch):
    one_sweep_output_longer(load, monkeypatch, "pd")
    out = bench(tmp_path / "b", "--parts", "load")
    rows = read_csv(out / "3-load.csv")
    assert {r["same_output_as_ar"] for r in rows if r["label"] == "pd"} == {"False"}
    assert {r["same_output_as_ar"] for r in rows if r["label"] != "pd"} == {"True"}  # transformers' too
    [note] = [n for n in notes_of(out, load.NAME) if n.startswith("Every output")]
    assert note.startswith("Every output equal to ar's: False. Different: pd (C=1, round 0), pd (C=16, round 0)")


def test_lanes_run_pdv_pd_and_baseline_under_mixed_traffic_into_a_run_directory(tmp_path):
    out = bench(tmp_path / "b", "--parts", "lanes", "--lanes-compute", "none")
    rows = read_csv(out / "4-lanes.csv")
    assert sorted(r["label"] for r in rows) == ["baseline", "pd", "pdv"]
    assert all(float(r["output_tok_s"]) > 0 and float(r["tpot_p99_ms"]) > 0 for r in rows)
    assert {r["same_output_as_baseline"] for r in rows} == {"True"}
    assert "Every output equal to baseline's: True." in notes_of(out, lanes.NAME)
    runs = {info.path.name: info for info in list_run_dirs(out)}
    assert set(runs["lanes"].engines) == {"baseline", "pd", "pdv"}
    goals = [g for g in read_csv(out / "goals.csv") if g["part"] == "4-lanes"]
    assert len(goals) == 3 and {g["met"] for g in goals} <= {"met", "missed"}
    rate = {r["label"]: float(r["output_tok_s"]) for r in rows}  # --quick: one round
    to_b, to_pd = rate["pdv"] / rate["baseline"], rate["pdv"] / rate["pd"]
    assert goals[2]["goal"] == f"PDV >= 0.97x Baseline and PD (tokens/s, {rows[0]['group']})"
    assert goals[2]["figure"].startswith(f"÷ Baseline {to_b:.3f}× (1 round), ")
    assert f"; ÷ PD {to_pd:.3f}× (1 round), " in goals[2]["figure"]
    assert goals[2]["met"] == ("met" if min(to_b, to_pd) >= 0.97 else "missed")
    [table] = read_csv(out / "pdv-goal.csv")  # the same reading, one row per load point, beside the goals
    assert table["load"] == rows[0]["group"] and table["median >= 0.97"] == goals[2]["met"]


def test_lanes_also_run_pd_and_pdv_elastic_by_default_with_the_claims_read_for_both_pdvs(tmp_path):
    out = bench(tmp_path / "b", "--parts", "lanes")
    rows = read_csv(out / "4-lanes.csv")
    assert sorted(r["label"] for r in rows) == ["baseline", "pd", "pd elastic", "pdv", "pdv elastic"]
    assert {r["same_output_as_baseline"] for r in rows} == {"True"}
    summary = {r["label"] for r in read_csv(out / "summary.csv") if r["part"] == "4-lanes"}
    assert {"pd elastic", "pdv elastic"} <= summary
    assert any(n.startswith("Elastic lanes") for n in notes_of(out, lanes.NAME))
    goals = [g for g in read_csv(out / "goals.csv") if g["part"] == "4-lanes"]
    assert [g["goal"].split(" ")[:2] for g in goals[:4]] == [["PDV", "cuts"], ["PDV", "adds"], ["PDV", "elastic"],
                                                           ["PDV", "elastic"]]  # fmt: skip
    p99 = {r["label"]: float(r["tpot_p99_ms"]) for r in rows}  # --quick: one round
    ratio = p99["pdv elastic"] / p99["baseline"]
    assert goals[2]["figure"].startswith(f"PDV elastic TPOT p99 = {ratio:.2f}× (1 round) Baseline's")
    assert goals[2]["met"] == ("met" if 1 - ratio >= 0.30 else "missed")
    assert goals[4]["goal"].startswith("PDV >= 0.97x Baseline and PD")  # the defaults' PDV only


def test_the_lanes_identical_output_check_fails_when_one_engine_differs(tmp_path, monkeypatch):
    one_sweep_output_longer(lanes, monkeypatch, "pdv")
    out = bench(tmp_path / "b", "--parts", "lanes")
    same = {r["label"]: r["same_output_as_baseline"] for r in read_csv(out / "4-lanes.csv")}
    assert same == {"baseline": "True", "pd": "True", "pd elastic": "True", "pdv": "False", "pdv elastic": "False"}


def test_hardware_measures_the_machine_and_the_verifier_step_at_both_batches(tmp_path):
    out = bench(tmp_path / "b", "--parts", "hardware")
    rows = read_csv(out / "5-hardware.csv")
    assert {(r["group"], r["label"]) for r in rows} == {
        ("machine", "matmul"),
        ("machine", "memory read"),
        ("C=1", "verifier step"),
        ("C=32", "verifier step"),
    }
    steps = [r for r in rows if r["label"] == "verifier step"]
    assert all(float(r["step_ms"]) > 0 and float(r["flop_share"]) > 0 and float(r["bytes_share"]) > 0 for r in steps)
    assert any(n.startswith("C = 32: the verifier step reaches") for n in notes_of(out, "5-hardware"))


def test_drafters_compare_every_setup_with_ar_in_its_own_directory(tmp_path):
    out = bench(tmp_path / "b", "--parts", "drafters", "--drafters-cases", "single,load")
    runs = read_csv(out / "drafters" / "runs.csv")
    engines = [r for r in runs if r["case"] == "single" and not r["label"].startswith("transformers")]
    assert [r["label"] for r in engines] == [s.label for s in drafters.SETUPS]
    assert {r["identical"] for r in runs} == {"True"}
    assert {r["group"] for r in runs if r["case"] == "load"} == {"C=1", "C=4"}  # --quick: the first two loads
    assert read_csv(out / "drafters" / "summary-single.csv")[0]["x AR (median)"] == "1.0"
    assert not (out / "drafters" / "summary-mtbench.csv").exists()
    summary = [s for s in read_csv(out / "summary.csv") if s["part"] == drafters.NAME]
    assert {s["group"] for s in summary} == {"single C=1", "load C=1", "load C=4"}
    assert "Every output equal to ar's: True." in notes_of(out, drafters.NAME)


def test_drafters_identical_output_check_fails_when_one_setup_differs(tmp_path, monkeypatch):
    one_output_longer(drafters, monkeypatch, lambda spec: spec.settings.config.drafter == "ngram")
    out = bench(tmp_path / "b", "--parts", "drafters", "--drafters-cases", "mtbench")
    runs = read_csv(out / "drafters" / "runs.csv")
    assert {r["identical"] for r in runs if r["label"] == "ngram L4"} == {"False"}
    assert {r["identical"] for r in runs if r["label"] != "ngram L4"} == {"True"}
    assert "Different: ngram L4 (mtbench coding, round 0)" in notes_of(out, drafters.NAME)[0]


def test_the_load_sweep_measures_only_the_load_points_and_engines_it_is_given(tmp_path):
    out = bench(tmp_path / "b", "--parts", "load", "--load-loads", "2", "--load-engines", "baseline,ar")
    rows = read_csv(out / "3-load.csv")
    assert {r["group"] for r in rows} == {"C=2"}
    assert {r["label"] for r in rows} == {"ar", "baseline", load.HF}
    assert {r["same_output_as_ar"] for r in rows} == {"True"}


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--parts", "nine"], "unknown part 'nine'"),
        (["--parts", "drafters", "--drafters-prompts", "0"], "--drafters-prompts"),
        (["--parts", "drafters", "--drafters-load-setups", "ngram L4"], "--drafters-mtbench-setups need ar"),
        (["--parts", "load", "--load-engines", "pd,pdv"], "--load-engines needs ar"),
        (["--parts", "load", "--load-loads", "0"], "--load-loads"),
        (["--parts", "lanes", "--lanes-compute", "turns"], "turns is the default every engine runs in"),
        (["--parts", "lanes", "--lanes-compute", "sideways"], "--lanes-compute"),
    ],
)
def test_a_bad_part_option_is_one_error_before_any_model_loads(tmp_path, capsys, flags, message):
    with pytest.raises(SystemExit) as exit_:
        main([*QUICK, "--out", str(tmp_path / "b"), *flags])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err and not (tmp_path / "b").exists()


def test_two_parts_options_of_the_same_name_stay_apart():
    from workloads.bench.run import part_options

    argv = ["--parts", "drafters,load", "--rounds", "2", "--drafters-loads", "1,2", "--load-loads", "4"]
    assert part_options(drafters.DrafterOptions, argv).loads == (1, 2)
    assert part_options(load.LoadOptions, argv).loads == (4,)
