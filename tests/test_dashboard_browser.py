"""The dashboard in a real browser: ``streamlit run app.py`` opened in headless Chromium.

Starts the server on a free port with a temporary runs directory, presses Start
on the Live run page with the default settings, waits for the charts and for
the run to finish, and checks that the engines' panels are there and no error
is shown. The screenshot goes to a temporary directory, or – with
``PDV_SCREENSHOT=1`` – to ``docs/screenshot.png`` (the README's), taken on the
default preset unless ``PDV_SCREENSHOT_PRESET`` names another.

Uses Debian's Chromium (``apt-get install chromium``); skipped when it is absent.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-quic",
    "--no-first-run",
    "--disable-component-update",
    "--disable-sync",
]
SCREENSHOT = os.environ.get("PDV_SCREENSHOT") == "1"
PRESET = os.environ.get("PDV_SCREENSHOT_PRESET", "smol") if SCREENSHOT else "tiny"
RUN_TIMEOUT_S = 900 if PRESET != "tiny" else 180
ENGINE_LABELS = ("Baseline", "PD", "PDV")

pytestmark = pytest.mark.skipif(not CHROMIUM.exists(), reason=f"Debian's Chromium is not installed at {CHROMIUM}")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_healthy(url: str, server: subprocess.Popen, log: Path, timeout: float = 120.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"streamlit exited with {server.returncode}:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                if response.status == 200:
                    return
        except OSError:
            time.sleep(0.5)
    raise AssertionError(f"streamlit did not answer within {timeout}s:\n{log.read_text()[-3000:]}")


@pytest.mark.timeout(RUN_TIMEOUT_S + 300)
def test_live_run_in_a_real_browser_fills_the_charts_without_errors(tmp_path):
    from playwright.sync_api import sync_playwright

    port = free_port()
    url = f"http://127.0.0.1:{port}"
    log = tmp_path / "streamlit.log"
    env = {**os.environ, "PDV_RUNS_DIR": str(tmp_path / "runs"), "PDV_DEFAULT_PRESET": PRESET}
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true"]
    command += ["--server.port", str(port), "--server.address", "127.0.0.1"]
    with open(log, "w") as log_file:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log_file, stderr=subprocess.STDOUT)
    try:
        wait_healthy(url, server, log)
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport={"width": 1600, "height": 2300})
                page.goto(url)
                start = page.get_by_role("button", name="Start")
                start.wait_for(timeout=120_000)
                page.wait_for_timeout(1000)  # let the first script run settle before clicking
                start.click()

                page.wait_for_function(
                    "document.querySelectorAll('.js-plotly-plot').length >= 9", timeout=RUN_TIMEOUT_S * 1000
                )
                page.get_by_text("Finished.").wait_for(timeout=RUN_TIMEOUT_S * 1000)
                done = page.get_by_text("requests · done")
                page.wait_for_function(
                    "[...document.querySelectorAll('[data-testid=\"stProgress\"]')]"
                    ".filter(e => e.innerText.includes('requests · done')).length === 3",
                    timeout=30_000,
                )
                page.wait_for_timeout(2000)  # the last chart redraws

                shot = ROOT / "docs" / "screenshot.png" if SCREENSHOT else tmp_path / "screenshot.png"
                shot.parent.mkdir(parents=True, exist_ok=True)
                page.screenshot(path=str(shot), full_page=True)

                headers = [h.inner_text() for h in page.locator("h4").all()]
                assert [h.removeprefix("● ") for h in headers if h.startswith("●")] == list(ENGINE_LABELS)
                assert done.count() == 3
                assert page.locator(".js-plotly-plot").count() >= 9
                assert page.locator('[data-testid="stException"]').count() == 0
                errors = page.locator('[data-testid="stAlertContentError"]')
                assert errors.count() == 0, errors.all_inner_texts()
                assert shot.stat().st_size > 50_000
            finally:
                browser.close()
    finally:
        server.terminate()
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
