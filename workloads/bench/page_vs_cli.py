"""Part 6, the dashboard's figures against the command line's: the default Live run in Chromium, beside ``replay``.

Each round runs, in an order that alternates, the Live run as a user does –
``streamlit run app.py`` with a fresh runs directory, the page open in Debian's
Chromium at 1280 x 800 (headed on a virtual screen where Xvfb is installed,
headless otherwise), Start pressed once with the default settings, the
summary table read off the page when it says *Finished* – and the same spec
headless, ``python -m workloads replay`` with the page's defaults given as
flags. Per engine it compares the page's pooled tok/s and TPOT p50 with the
replay's, and the two verdicts' wording (each engine's standing: faster,
the same, within noise, slower). Goal: every figure within ±10 % (±5 % is the
aim) and the same standings.

The page's server and its engine process are separate processes, and the
replay a third: nothing of one runs while another is timed. Each call's
machine load (load average, the CPU other processes took) is recorded with it.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workloads.bench.common import BenchContext, Goal, PartResult
from workloads.bench.rows import Row
from workloads.drivers.default_run import DEFAULT_RUN
from workloads.drivers.rounds import DEFAULT_ROUNDS

NAME = "6-dashboard"
ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-quic",
                 "--no-first-run", "--disable-component-update", "--disable-sync"]  # fmt: skip
VIEWPORT = {"width": 1280, "height": 800}
GOAL, AIM = 0.10, 0.05
PAGE, CLI = "page (Chromium)", "replay (headless)"
ENGINES = ("ar", "baseline", "pd", "pdv")
LABELS = {"ar": "AR", "baseline": "Baseline", "pd": "PD", "pdv": "PDV"}
FIGURES = {"output_tok_s": "Output tok/s (pooled)", "tpot_p50_ms": "TPOT p50 (ms)"}
# an engine's standing in a verdict line: "PD within noise of AR", "Baseline the same as AR", "PDV faster than AR"
STANDING = re.compile(r"(AR|Baseline|PD|PDV) (within noise of|the same as|faster than|slower than) AR")
READ_TABLE = """() => {
    const table = [...document.querySelectorAll('[data-testid="stTable"] table')]
        .find(t => t.innerText.includes('Output tok/s (pooled)'));
    if (!table) return null;
    const head = [...table.querySelectorAll('thead th')].map(th => th.innerText.trim());
    const rows = [...table.querySelectorAll('tbody tr')].map(tr => [...tr.querySelectorAll('th, td')]
        .map(c => c.innerText.trim()));
    return {head, rows};
}"""


@dataclass(frozen=True)
class LiveDefaults:
    """The Live run's defaults (``workloads.drivers.default_run``) as ``replay`` flags."""

    preset: str
    concurrency: int
    num_requests: int
    max_new_tokens: int
    rounds: int
    precise: float | None  # the half width rounds are added until, or None
    budget_s: float | None

    @classmethod
    def read(cls, preset: str) -> LiveDefaults:
        d = DEFAULT_RUN
        precision = d.precision()
        return cls(preset, d.concurrency, d.num_requests, d.max_new_tokens, d.rounds,
                   precision.within if precision else None, precision.budget_s if precision else None)  # fmt: skip

    def replay_args(self, out: Path) -> list[str]:
        args = ["--engines", ",".join(ENGINES), "--concurrency", str(self.concurrency), "--num-requests",
                str(self.num_requests), "--max-new-tokens", str(self.max_new_tokens), "--seed", "0",
                "--rounds", str(self.rounds), "--preset", self.preset, "--out", str(out), "--json"]  # fmt: skip
        if self.precise is not None:
            args += ["--until-precise", str(self.precise)]
            if self.budget_s is not None:
                args += ["--round-budget-s", str(self.budget_s)]
        return args


@dataclass(frozen=True)
class Measured:
    """One call's figures per engine, its verdict's standings and how long it took."""

    figures: dict[str, dict[str, float]]  # engine -> figure name -> value
    standings: tuple[str, ...]  # "PD within noise of AR", ... in the verdict's order
    verdict: str
    wall_s: float  # from Start (or the command) to the verdict
    load: str


def _load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min)"


def standings(verdict: str) -> tuple[str, ...]:
    return tuple(sorted(" ".join(m) for m in STANDING.findall(verdict)))


def _number(text: str) -> float:
    return float(text.replace(",", "").split()[0])


def run_replay(defaults: LiveDefaults, out: Path, timeout_s: float) -> Measured:
    """The Live run's spec through ``python -m workloads replay``, headless."""
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-m", "workloads", "replay", *defaults.replay_args(out)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout_s)  # fmt: skip
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise RuntimeError(f"replay exited with {done.returncode}: {done.stderr[-2000:]}")
    machine = json.loads(done.stdout.strip().splitlines()[-1])
    figures = {row["engine"]: {name: float(row[name]) for name in FIGURES} for row in machine["summaries"]}
    verdict = next(iter(machine["verdicts"].values()))
    return Measured(figures, standings(verdict), verdict, wall, _load())


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextlib.contextmanager
def dashboard_server(runs_dir: Path, preset: str, log: Path) -> Iterator[str]:
    """``streamlit run app.py`` on a free port, runs in ``runs_dir``; yields its URL, and stops it (and so its
    engine process) at the end."""
    port = _free_port()
    env = {**os.environ, "PDV_RUNS_DIR": str(runs_dir), "PDV_DEFAULT_PRESET": preset}
    env.pop("PDV_ENGINE_HOST", None)  # the product's own layout: the engines in their own process
    command = [sys.executable, "-m", "streamlit", "run", "app.py", "--server.headless", "true",
               "--server.port", str(port), "--server.address", "127.0.0.1"]  # fmt: skip
    with open(log, "w") as out:
        server = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"streamlit exited with {server.returncode}: {log.read_text()[-2000:]}")
            try:
                with urllib.request.urlopen(f"{url}/_stcore/health", timeout=2) as response:
                    if response.status == 200:
                        break
            except OSError:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"streamlit did not answer within 120 s: {log.read_text()[-2000:]}") from None
                time.sleep(0.5)
        yield url
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@contextlib.contextmanager
def virtual_screen(headed: bool) -> Iterator[bool]:
    """A display for a headed Chromium: the one there is, or Xvfb's; yields whether the browser is headed."""
    if not headed:
        yield False
        return
    if os.environ.get("DISPLAY"):
        yield True
        return
    xvfb = shutil.which("Xvfb")
    if xvfb is None:
        yield False
        return
    display = ":97"
    screen = subprocess.Popen([xvfb, display, "-screen", "0", "1600x1000x24", "-nolisten", "tcp"],
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)  # fmt: skip
    old = os.environ.get("DISPLAY")
    os.environ["DISPLAY"] = display
    try:
        time.sleep(1.0)
        yield True
    finally:
        screen.terminate()
        screen.wait()
        if old is None:
            os.environ.pop("DISPLAY", None)
        else:
            os.environ["DISPLAY"] = old


def run_page(preset: str, workdir: Path, timeout_s: float, headed: bool = True) -> Measured:
    """The default Live run as a user does it: open the page in Chromium, press Start, read the summary."""
    from playwright.sync_api import sync_playwright

    workdir.mkdir(parents=True, exist_ok=True)
    with virtual_screen(headed) as is_headed, dashboard_server(workdir / "runs", preset, workdir / "server.log") as url:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=str(CHROMIUM), headless=not is_headed, args=CHROMIUM_ARGS)
            try:
                page = browser.new_page(viewport=VIEWPORT)
                page.goto(url)  # / opens Live run
                start = page.get_by_role("button", name="Start")
                start.wait_for(timeout=120_000)
                page.wait_for_timeout(1000)  # let the first script run settle before clicking
                start.click()
                started = time.monotonic()
                page.get_by_text("Finished.").first.wait_for(timeout=timeout_s * 1000)
                wall = time.monotonic() - started
                time.sleep(2.5)  # the refresh loop draws the final table after the status
                table = page.evaluate(READ_TABLE)
                verdict_text = " ".join(page.locator('[data-testid="stAlert"]').all_inner_texts())
            finally:
                browser.close()
    if table is None:
        raise RuntimeError("the Live run page showed no summary table")
    head, rows = table["head"], {r[0]: r[1:] for r in table["rows"]}
    figures = {}
    for engine in ENGINES:
        column = head.index(LABELS[engine]) - 1
        figures[engine] = {name: _number(rows[label][column]) for name, label in FIGURES.items()}
    return Measured(figures, standings(verdict_text), verdict_text, wall, f"{'headed' if is_headed else 'headless'} "
                    f"Chromium; {_load()}")  # fmt: skip


@dataclass(frozen=True, kw_only=True)
class PageRow(Row):
    """One engine's figure in one call: on the page and through replay. ``label`` is the engine."""

    figure: str  # output_tok_s | tpot_p50_ms
    page: float
    cli: float
    page_over_cli: float
    first: str  # which of the two ran first in the call


def compare(page: Measured, cli: Measured, call: int, first: str, group: str) -> list[PageRow]:
    """Per engine and figure: the page's value over the replay's."""
    return [
        PageRow(group=group, round=call, label=engine, figure=name, page=page.figures[engine][name],
                cli=cli.figures[engine][name], page_over_cli=page.figures[engine][name] / cli.figures[engine][name],
                first=first)
        for engine in ENGINES
        for name in FIGURES
    ]  # fmt: skip


def run(ctx: BenchContext) -> PartResult:
    preset = str((ctx.meta.get("models") or {}).get("preset") or "smol")
    return measure(preset, ctx.settings.rounds if not ctx.settings.quick else 1, ctx.out, timeout_s=900)


def measure(preset: str, calls: int, out: Path, timeout_s: float = 900, headed: bool = True) -> PartResult:
    """``calls`` pairs of a page run and a replay, alternating which goes first."""
    defaults = LiveDefaults.read(preset)
    rows: list[PageRow] = []
    verdicts: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="pdv-page-vs-cli-") as tmp:
        for call in range(calls):
            order = (PAGE, CLI) if call % 2 == 0 else (CLI, PAGE)
            got: dict[str, Measured] = {}
            for which in order:
                where = Path(tmp) / f"{call}-{'page' if which == PAGE else 'cli'}"
                if which == PAGE:
                    got[which] = run_page(preset, where, timeout_s, headed)
                else:
                    got[which] = run_replay(defaults, where, timeout_s)
            rows += compare(got[PAGE], got[CLI], call, order[0], f"C={defaults.concurrency}")
            verdicts.append({"call": call, **{f"{k} verdict": m.verdict for k, m in got.items()},
                             **{f"{k} s": round(m.wall_s, 1) for k, m in got.items()},
                             **{f"{k} load": m.load for k, m in got.items()},
                             "same standings": got[PAGE].standings == got[CLI].standings})  # fmt: skip
    worst = max(abs(r.page_over_cli - 1) for r in rows)
    same = all(v["same standings"] for v in verdicts)
    agreed = sum(v["same standings"] for v in verdicts)
    figure = f"largest page ÷ replay difference {worst:.1%} over {calls} call(s)"
    goals = [
        Goal(NAME, f"every engine's tok/s and TPOT p50 on the page within ±{GOAL:.0%} of replay's", figure,
             worst <= GOAL),
        Goal(NAME, "the page's verdict names the same standings as replay's", f"{agreed} of {calls} call(s)", same),
    ]  # fmt: skip
    notes = [f"Aim ±{AIM:.0%}. Defaults: {defaults}."] + [json.dumps(v, ensure_ascii=False) for v in verdicts]
    (out / f"{NAME}-calls.json").write_text(json.dumps(verdicts, indent=2, ensure_ascii=False))
    return PartResult(NAME, "The Live run in Chromium against the same spec headless", rows, [], goals, notes)


def main(argv: list[str] | None = None) -> int:
    import argparse
    import csv

    parser = argparse.ArgumentParser(prog="python -m workloads.bench.page_vs_cli", description=__doc__.split("\n")[0])
    parser.add_argument("--preset", default="smol")
    parser.add_argument("--calls", type=int, default=DEFAULT_ROUNDS - 2, help="pairs of a page run and a replay")
    parser.add_argument("--out", type=Path, required=True, help="directory for page-vs-cli.csv and the calls")
    parser.add_argument("--headless", action="store_true", help="a headless Chromium (default: headed on Xvfb)")
    parser.add_argument("--timeout-s", type=float, default=900)
    args = parser.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    result = measure(args.preset, args.calls, args.out, args.timeout_s, headed=not args.headless)
    with open(args.out / f"{NAME}.csv", "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(result.rows[0].record()))
        writer.writeheader()
        writer.writerows(r.record() for r in result.rows)
    for row in result.rows:
        print(f"call {row.round} {row.label:>8} {row.figure:>12}: page {row.page:8.2f}  "
              f"replay {row.cli:8.2f}  page/replay {row.page_over_cli:.3f}")  # fmt: skip
    for goal in result.goals:
        print(f"{'met' if goal.met else 'missed'}: {goal.goal}: {goal.figure}")
    for note in result.notes:
        print(note)
    return 0


if __name__ == "__main__":
    sys.exit(main())
