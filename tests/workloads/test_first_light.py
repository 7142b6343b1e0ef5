"""The first light's CPU dry run: the GPU script's own code on the tiny shape, so it cannot rot unseen.

The dry run goes through ``scripts/gpu-first-light.sh``, as the GPU run does;
one intra-op thread keeps it to seconds on a busy machine (its figures are
not measurements of anything).
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from engine.profiling.cost_profile import CostProfile
from engine.profiling.store import _interference
from workloads.bench import first_light
from workloads.bench.first_light_context import TINY_ESTIMATES, Budget, Context

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def dry_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path_factory.mktemp("first-light")
    env = {**os.environ, "OUT": str(out), "OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT)}
    script = ROOT / "scripts" / "gpu-first-light.sh"
    command = [str(script), "--device", "cpu", "--tiny"]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    return done, out


def test_the_dry_run_writes_every_section_and_finishes_in_its_budget(dry_run):
    done, out = dry_run
    assert done.returncode == 0, done.stdout[-2000:]
    report = json.loads((out / "first-light.json").read_text())
    assert report["status"] == "complete" and report["ran_on_gpu"] is False
    assert list(report["sections"]) == list(first_light.SECTIONS)
    assert report["elapsed_s"] < report["budget_s"]
    page = (out / "first-light.md").read_text()
    assert page.startswith("# First light") and "on the CPU (a dry run" in page
    assert "No forward replayed a graph (not on CUDA)" in page  # no eager-against-eager ratio passed off as one
    assert "speed: ar C=1" in (out / "first-light.log").read_text()


def test_the_dry_run_imports_nothing_the_gpu_machine_lacks(dry_run):
    report = json.loads((dry_run[1] / "first-light.json").read_text())
    assert report["imported_but_absent_on_gpu"] == []


def test_every_engine_eager_and_with_graphs_matches_ar_and_every_speed_run_has_its_figures(dry_run):
    sections = json.loads((dry_run[1] / "first-light.json").read_text())["sections"]
    identical = sections["lossless_float32"]["identical_to_ar"]
    assert set(identical) == {f"{e}{g}" for e in ("ar", "baseline", "pd", "pdv") for g in ("", "+graphs")}
    assert set(identical.values()) == {1.0}
    runs = sections["speed"]["runs"]
    assert {(r["engine"], r["concurrency"], r["graphs"]) for r in runs} == {
        (e, c, g) for e in ("ar", "baseline", "pd", "pdv") for c in (1, 2) for g in (False, True)
    }
    assert all(r["failed"] == 0 and r["tok_per_s"] > 0 and r["tpot_ms_p99"] >= r["tpot_ms_p50"] for r in runs)
    assert sections["host_waits"]["not_applicable"]  # a CUDA debug mode, said so on the CPU


def test_the_step_cost_file_reads_as_the_engine_stored_profile_with_the_device(dry_run):
    data = json.loads((dry_run[1] / "step-costs.json").read_text())
    profile = CostProfile(
        tuple(data["batch_sizes"]),
        tuple(data["tokens"]),
        tuple(map(tuple, data["verify_ms"])),
        tuple(data["draft_ms"]),
        data["machine"],
        _interference(data["interference"]),
    )
    assert profile.batch_sizes == (1, 2) and profile.tokens[-1] == 5 and profile.verify_s(2, 5) > 0
    assert profile.draft_s(1) > 0 and data["device"]["device"] == "cpu"


def test_a_section_that_does_not_fit_the_budget_is_skipped_and_named(tmp_path):
    settings = first_light.tiny_settings("cpu", tmp_path, budget_s=30)
    settings = type(settings)(**{**vars(settings), "estimates": {**TINY_ESTIMATES, "lossless_float32": 1e6}})
    ctx_budget = Budget(30, settings.estimates)
    assert ctx_budget.fits("device") and not ctx_budget.fits("lossless_float32")
    ctx = Context(settings, ctx_budget, ("device", "speed", "acceptance"), current="speed")
    ctx.budget.estimates["acceptance"] = 29.5  # what the later section needs is kept back from this one
    assert not ctx.allows("speed")


def test_the_watchdog_writes_the_report_and_ends_the_process_when_the_budget_is_spent(tmp_path, monkeypatch):
    settings = first_light.tiny_settings("cpu", tmp_path, budget_s=30)
    ctx = Context(settings, Budget(30, settings.estimates), tuple(first_light.SECTIONS), current="speed")
    ctx.report["device"] = {"device": "cpu"}

    def exit_now(status):
        raise SystemExit(status)

    monkeypatch.setattr(first_light.os, "_exit", exit_now)
    with pytest.raises(SystemExit) as ended:
        first_light._cut_off(ctx)
    assert ended.value.code == first_light.CUT_OFF_EXIT
    report = json.loads((tmp_path / "first-light.json").read_text())
    assert report["status"].startswith("partial") and "cut_off" in report["sections"]["speed"]
    assert report["sections"]["acceptance"] == {"skipped": "the time budget ran out first"}
    assert report["sections"]["device"] == {"device": "cpu"}


def test_asking_for_cuda_where_there_is_none_fails_in_one_line(tmp_path, capsys):
    if sys.modules["torch"].cuda.is_available():
        pytest.skip("this machine has CUDA")
    assert first_light.main(["--device", "cuda", "--out", str(tmp_path)]) == 2
    assert "CUDA is not usable" in capsys.readouterr().err and not any(tmp_path.iterdir())


def test_a_speed_run_that_fails_is_its_own_row_and_the_others_still_run(tmp_path, monkeypatch):
    settings = first_light.tiny_settings("cpu", tmp_path, budget_s=60)
    ctx = Context(settings, Budget(60, settings.estimates), tuple(first_light.SECTIONS), current="speed")

    def closed_batch(pair, engine, config, c, tokens, min_requests):
        if engine == "pd" and c == 2:
            raise TimeoutError("request b0-1 did not finish within 180s")
        return {"tok_per_s": 1.0}

    monkeypatch.setattr(first_light.sections, "closed_batch", closed_batch)
    section = first_light.sections.speed_section(ctx)
    assert len(section["runs"]) == 14 and len(section["failed_runs"]) == 2
    assert all("did not finish" in run["failed"] and run["engine"] == "pd" for run in section["failed_runs"])
    assert not first_light._whole(section)
