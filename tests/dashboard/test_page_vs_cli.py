"""The bench's page-against-CLI part, quick: the default Live run in Chromium beside ``replay`` of its spec."""

from __future__ import annotations

import json

import pytest

from workloads.bench.page_vs_cli import CHROMIUM, CLI, ENGINES, FIGURES, PAGE, measure

pytestmark = [
    pytest.mark.engine_process,
    pytest.mark.skipif(not CHROMIUM.exists(), reason=f"Debian's Chromium is not installed at {CHROMIUM}"),
]


@pytest.mark.timeout(900)
def test_the_page_and_replay_of_the_same_spec_each_give_every_engines_figures_and_a_verdict(tmp_path):
    result = measure("tiny", 1, tmp_path, timeout_s=400)
    assert sorted((r.label, r.figure) for r in result.rows) == sorted(
        (e, f) for e in ENGINES for f in FIGURES
    )  # fmt: skip
    assert all(r.page > 0 and r.cli > 0 and r.page_over_cli > 0 for r in result.rows)
    [call] = json.loads((tmp_path / "6-dashboard-calls.json").read_text())
    assert "AR" in call[f"{PAGE} verdict"] and "AR" in call[f"{CLI} verdict"]
    assert {g.goal.split(" ")[0] for g in result.goals} == {"every", "the"}
