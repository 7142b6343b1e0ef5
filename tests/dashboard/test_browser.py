"""The dashboard in a real browser: ``streamlit run app.py`` opened in headless Chromium at 1280 x 800.

Starts the server on a free port with a temporary runs directory, checks that
``/`` opens Live run at ``/live`` and that a new session opened straight at
``/live`` finds it, presses Start on Live run with the default settings – AR,
Baseline, PD and PDV – waits for the run to finish, and checks that every
engine's panel is there, that no metric's value is cut off at a laptop's
width, that each engine's speed-up against AR is shown with the rounds'
min–max, and that no error is shown; that no dataframe there, and no table of
the run's HTML report, needs a horizontal scroll at that width; that Chromium
requested nothing outside 127.0.0.1 (the page icon and fonts come from the
package); and that the server's terminal output over the whole run holds no
warning line.
The screenshot goes to a temporary directory, or – with ``PDV_SCREENSHOT=1`` –
to ``docs/screenshot.png`` (the README's), taken on the default preset unless
``PDV_SCREENSHOT_PRESET`` names another.

Uses Debian's Chromium (``apt-get install chromium``); skipped when it is absent.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from tests.support import ROOT as ROOT_DIR
from workloads.bench.page_vs_cli import CHROMIUM, CHROMIUM_ARGS, VIEWPORT, dashboard_server

ROOT = ROOT_DIR
SCREENSHOT = os.environ.get("PDV_SCREENSHOT") == "1"
PRESET = os.environ.get("PDV_SCREENSHOT_PRESET", "smol") if SCREENSHOT else "tiny"
RUN_TIMEOUT_S = 900 if PRESET != "tiny" else 180
ENGINE_LABELS = ("AR", "Baseline", "PD", "PDV")
SCROLLED = "section, div"  # wherever Streamlit's scrolling container is, its content height is the largest
# every metric tile's value and label, and every cell of the summary table, with whatever they hold
# that is cut off: an element whose content is wider than its box
CUT_OFF = """() => [...document.querySelectorAll(
    '[data-testid="stMetricValue"], [data-testid="stMetricValue"] *, [data-testid="stMetricLabel"] *,'
    + ' [data-testid="stMetricDelta"], [data-testid="stMetricDelta"] *, [data-testid="stTable"] td,'
    + ' [data-testid="stTable"] th')]
    .filter(e => e.scrollWidth > e.clientWidth)
    .map(e => `${e.innerText} (${e.scrollWidth} > ${e.clientWidth} px)`)"""

# every glide-grid dataframe (st.dataframe) whose columns do not fit its width at 1280 px: a horizontal scroll
# would hide the right-hand columns (tokens/step, draft length, TTFT)
SCROLLS_SIDEWAYS = """() => [...document.querySelectorAll('[data-testid="stDataFrame"] .dvn-scroller')]
    .filter(e => e.scrollWidth > e.clientWidth + 1)
    .map(e => `${e.closest('[data-testid="stDataFrame"]').innerText.slice(0, 60)}`
        + ` (${e.scrollWidth} > ${e.clientWidth} px)`)"""
# the HTML report's tables sit in .wide boxes that scroll sideways when a table does not fit
REPORT_SCROLLS = """() => [...document.querySelectorAll('.wide')].filter(e => e.scrollWidth > e.clientWidth + 1)
    .map(e => `${e.innerText.slice(0, 60)} (${e.scrollWidth} > ${e.clientWidth} px)`)"""
# a tile's tokens/s against AR: the median over rounds, then the rounds' min–max
TIMES_AR = re.compile(r"\d+\.\d\d× AR \(\d+\.\d\d–\d+\.\d\d\)")
LOCAL_SCHEMES = ("data:", "blob:", "about:", "file:")
# a line a user would read as something wrong: a logged WARNING/ERROR or a Python warning (FutureWarning, ...)
WARNING_LINE = re.compile(r"\b(WARNING|ERROR)\b|\w+Warning:")

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"Debian's Chromium is not installed at {CHROMIUM}")


@contextmanager
def dashboard(tmp_path: Path) -> Iterator[str]:
    """``streamlit run app.py`` on a free port with a runs directory under ``tmp_path``; yields its URL.

    The server's terminal output goes to ``tmp_path / "streamlit.log"``.
    """
    with dashboard_server(tmp_path / "runs", PRESET, tmp_path / "streamlit.log") as url:
        yield url


@pytest.mark.timeout(RUN_TIMEOUT_S + 300)
def test_live_run_at_laptop_width_shows_every_engine_against_ar_with_no_number_cut_off(tmp_path):
    from playwright.sync_api import sync_playwright

    log = tmp_path / "streamlit.log"
    with dashboard(tmp_path) as url:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            requested: list[str] = []  # every URL either context asks for: nothing may leave 127.0.0.1
            try:
                # / opens Live run at its own address ...
                first = browser.new_context(viewport=VIEWPORT)
                first.on("request", lambda request: requested.append(request.url))
                home = first.new_page()
                home.goto(url)
                home.get_by_role("button", name="Start").wait_for(timeout=120_000)
                assert home.url == f"{url}/live" and home.get_by_text("Page not found").count() == 0
                home.close()
                # ... and a new session opened straight at that address finds the page
                second = browser.new_context(viewport=VIEWPORT)
                second.on("request", lambda request: requested.append(request.url))
                page = second.new_page()
                page.goto(f"{url}/live")
                start = page.get_by_role("button", name="Start")
                start.wait_for(timeout=120_000)
                assert page.get_by_role("heading", name="Live run").count() == 1
                assert page.get_by_text("Page not found").count() == 0
                page.wait_for_timeout(1000)  # let the first script run settle before clicking
                start.click()

                page.get_by_text("Finished.").wait_for(timeout=RUN_TIMEOUT_S * 1000)
                done = page.get_by_text("requests · done")
                page.wait_for_function(
                    "[...document.querySelectorAll('[data-testid=\"stProgress\"]')]"
                    ".filter(e => e.innerText.includes('requests · done')).length === 4",
                    timeout=30_000,
                )
                page.wait_for_function("document.querySelectorAll('.js-plotly-plot').length >= 10", timeout=30_000)
                page.wait_for_timeout(2000)  # the last chart redraws

                shot = ROOT / "docs" / "screenshot.png" if SCREENSHOT else tmp_path / "screenshot.png"
                shot.parent.mkdir(parents=True, exist_ok=True)
                # the page scrolls inside Streamlit's own container, so a "full page" shot would stop at 800 px:
                # the window is made as tall as the content, at the same width, for the picture only
                tall = page.evaluate(
                    f"Math.max(...[...document.querySelectorAll('{SCROLLED}')].map(e => e.scrollHeight))"
                )
                page.set_viewport_size({"width": VIEWPORT["width"], "height": tall})
                page.wait_for_timeout(2000)
                page.screenshot(path=str(shot))
                page.set_viewport_size(VIEWPORT)
                page.wait_for_timeout(2000)

                headers = [h.inner_text() for h in page.locator("h4").all()]
                assert [h.removeprefix("● ") for h in headers if h.startswith("●")] == list(ENGINE_LABELS)
                assert done.count() == 4
                values = page.locator('[data-testid="stMetricValue"]').all_inner_texts()
                assert len(values) == 3 * len(ENGINE_LABELS) and "—" not in values[::3]  # tok/s of every engine
                assert page.evaluate(CUT_OFF) == []
                deltas = page.locator('[data-testid="stMetricDelta"]').all_inner_texts()
                # each engine's median × AR over the rounds with the rounds' min–max, whole on its tile
                assert len(deltas) == len(ENGINE_LABELS) and all(TIMES_AR.fullmatch(d) for d in deltas), deltas
                assert deltas[0] == "1.00× AR (1.00–1.00)"
                table = page.locator('[data-testid="stTable"]').first
                row = table.locator("tr", has_text="tok/s × AR").first.locator("td").all_inner_texts()
                assert row == [d.replace("× AR", "×") for d in deltas], row
                assert page.locator('[data-testid="stException"]').count() == 0
                errors = page.locator('[data-testid="stAlertContentError"]')
                assert errors.count() == 0, errors.all_inner_texts()
                assert shot.stat().st_size > 50_000
                assert page.evaluate(SCROLLS_SIDEWAYS) == []

                # the shareable report of the same run: its tables fit 1280 px as well
                from workloads.report.html import build_report

                report = tmp_path / "report.html"
                run_dirs = sorted({p.parent for p in (tmp_path / "runs").rglob("run.json")})
                report.write_text(build_report(run_dirs, report))
                sheet = browser.new_context(viewport=VIEWPORT)
                sheet.on("request", lambda request: requested.append(request.url))
                paper = sheet.new_page()
                paper.goto(report.as_uri())
                assert paper.evaluate(REPORT_SCROLLS) == []

                away = [u for u in requested if not u.startswith(LOCAL_SCHEMES) and urlsplit(u).hostname != "127.0.0.1"]
                assert requested and away == [], away
            finally:
                browser.close()
    # what the terminal showed over a default run: no line a user would read as something wrong
    warned = [line for line in log.read_text().splitlines() if WARNING_LINE.search(line)]
    assert warned == [], "\n".join(warned[:20])


# a keyed dataframe's grid: its scroller's content against its box, both ways
GRID_FIT = """key => { const s = document.querySelector(`.st-key-${key} .dvn-scroller`);
    return s && {wide: s.scrollWidth, width: s.clientWidth, tall: s.scrollHeight, height: s.clientHeight,
        headers: [...document.querySelectorAll(`.st-key-${key} [role=columnheader]`)].map(h => h.innerText)} }"""
KEY_HEADERS = ["Output tok/s", "tok/s × AR", "TPOT p50 (ms)", "TTFT p50 (ms)", "Tokens / step", "Draft L", "Acceptance"]


def write_cli_run(out: Path) -> None:
    from workloads.__main__ import main

    assert main([
        "replay", "--engines", "ar,pdv", "--concurrency", "1,2", "--num-requests", "2", "--dataset", "synthetic",
        "--input-len", "12", "--output-len", "4", "--preset", "tiny", "--device", "cpu", "--rounds", "1",
        "--out", str(out),
    ]) == 0  # fmt: skip


@pytest.mark.timeout(RUN_TIMEOUT_S + 300)
def test_sweep_results_runs_and_report_tables_show_their_key_columns_at_laptop_width_unscrolled(tmp_path):
    from playwright.sync_api import sync_playwright

    from workloads.report.html import build_report

    # a second directory with a long name beside the sweep's: the Runs page's run names grow with it
    write_cli_run(tmp_path / "runs" / "an-earlier-replay-from-the-command-line")
    with dashboard(tmp_path) as url, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
        try:
            page = browser.new_context(viewport=VIEWPORT).new_page()
            page.goto(url)
            page.get_by_role("button", name="Start").wait_for(timeout=120_000)
            page.get_by_role("link", name="Sweep").click()
            page.get_by_role("heading", name="Sweep").wait_for()
            sidebar = page.get_by_test_id("stSidebar")
            # 4 engines at 3 loads: 12 rows, more than a grid shows without being sized to them
            for label, value in (("Requests", "3"), ("Max new tokens", "4"), ("Rounds", "1")):
                box = sidebar.get_by_label(label, exact=True)
                box.fill(value)
                box.press("Enter")
            levels = sidebar.get_by_label("Concurrency levels", exact=True)
            levels.fill("1, 2, 4")
            levels.press("Enter")
            page.wait_for_timeout(1000)
            page.get_by_role("button", name="Start").click()
            page.get_by_text("Finished.").wait_for(timeout=RUN_TIMEOUT_S * 1000)
            page.locator(".st-key-sweep-results .dvn-scroller").wait_for(timeout=30_000)
            # the grid draws its scroller before its column headers: on a busy machine a fixed pause was too short
            page.locator(".st-key-sweep-results [role=columnheader]").first.wait_for(state="attached", timeout=30_000)
            page.wait_for_timeout(2000)
            results = page.evaluate(GRID_FIT, "sweep-results")
            assert results["headers"] == ["Engine", "Load", *KEY_HEADERS], results
            assert results["wide"] <= results["width"] + 1, results  # every key column in view
            assert results["tall"] <= results["height"] + 1, results  # every row in view: no inner scroll

            page.get_by_role("link", name="Runs").click()
            page.get_by_role("heading", name="Runs").wait_for()
            picker = page.get_by_test_id("stMultiSelect")
            picker.click()
            page.get_by_role("option", name="an-earlier-replay-from-the-command-line").click()
            page.keyboard.press("Escape")
            page.locator(".st-key-runs-summary .dvn-scroller").wait_for(timeout=30_000)
            # the grid draws its scroller before its column headers: on a busy machine a fixed pause was too short
            page.locator(".st-key-runs-summary [role=columnheader]").first.wait_for(state="attached", timeout=30_000)
            page.wait_for_timeout(2000)
            runs = page.evaluate(GRID_FIT, "runs-summary")
            assert runs["headers"] == ["Run", *KEY_HEADERS], runs
            assert runs["wide"] <= runs["width"] + 1, runs
            assert runs["tall"] <= runs["height"] + 1, runs

            report = tmp_path / "report.html"
            report.write_text(build_report(sorted({p.parent for p in (tmp_path / "runs").rglob("run.json")}), report))
            paper = browser.new_context(viewport=VIEWPORT).new_page()
            paper.goto(report.as_uri())
            assert paper.evaluate(REPORT_SCROLLS) == []
        finally:
            browser.close()
