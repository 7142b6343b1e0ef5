"""``docs/results.md`` and the README's status table, from the latest suite run's CSVs: rendered, never typed.

A bench directory's ``summary.csv``, ``goals.csv``, ``notes.csv`` and
``bench.json`` (and ``pdv-goal.csv`` where the run has one) are first copied to
``docs/data/bench/``, so both can be rendered again without the run directory
(``python -m workloads bench --render-docs docs/data/bench``):

* ``docs/results.md`` is generated whole (``results_page``): rendering it again
  from ``docs/data/bench`` gives the file byte for byte, which the tests check.
  It holds only what that run measured; the dated experiments before it are
  in ``docs/notebook.md``, written by hand.
* ``README.md``'s status table (``status_table``) sits between
  ``<!-- status:begin -->`` and ``<!-- status:end -->``; only that block is
  rewritten.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from metrics.rounds import RatioInterval
from workloads.bench import page_vs_cli, pdv_goal
from workloads.bench.common import GOALS_CSV, SUMMARY_CSV, read_csv

FILES = (SUMMARY_CSV, GOALS_CSV, "notes.csv", "bench.json")
# where the run has them: the goal per load point, the rows PDV's goal is read from, the calls and the machine load
OPTIONAL = (pdv_goal.FILE, "3-load.csv", "4-lanes.csv", "calls.csv")
STATUS_BEGIN, STATUS_END = "<!-- status:begin -->", "<!-- status:end -->"
TITLE = "# Current results"


def markdown_table(rows: list[dict[str, str]], columns: list[str] | None = None) -> str:
    columns = columns or list(rows[0])
    lines = ["| " + " | ".join(columns) + " |", "|" + " --- |" * len(columns)]
    lines += ["| " + " | ".join(str(r.get(c, "")).replace("|", "\\|") for c in columns) + " |" for r in rows]
    return "\n".join(lines)


def _fmt(value: str) -> str:
    try:
        x = float(value)
    except ValueError:
        return value
    return f"{x:.3g}" if abs(x) >= 1e5 or (0 < abs(x) < 0.01) else f"{x:.3f}".rstrip("0").rstrip(".")


def ratio_of(s: dict[str, str]) -> RatioInterval | None:
    """A ``summary.csv`` row's ratio to its reference, as the run computed it; None where it has none."""
    if not s["ratio_median"]:
        return None
    return RatioInterval(float(s["ratio_median"]), float(s["ratio_min"]), float(s["ratio_max"]), int(s["rounds"]))


def _summary_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """One row per (group, competitor): the part's first metric, its ratio with its min–max, every other median."""
    lead = rows[0]["metric"]
    table: dict[tuple[str, str], dict[str, str]] = {}
    for s in rows:
        row = table.setdefault((s["group"], s["label"]), {"group": s["group"], "competitor": s["label"]})
        row[s["metric"]] = _fmt(s["median"])
        if s["metric"] == lead:
            ratio = ratio_of(s)
            if ratio is not None:
                row[f"× {s['reference']} (min–max)"] = "reference" if s["label"] == s["reference"] else ratio.text()
            else:
                row[f"{lead} min–max"] = f"{_fmt(s['min'])}–{_fmt(s['max'])}"
            row["rounds"] = s["rounds"]
    columns = list(dict.fromkeys(k for r in table.values() for k in r))
    return [{c: r.get(c, "") for c in columns} for r in table.values()]


def _recorded(setup: dict) -> str:
    """The run in one sentence: when, the command, how long, the pair, the sizes."""
    models, settings = setup.get("models", {}), setup["settings"]
    return (
        f"Recorded {setup['started_at']} with `{setup['command']}` in {setup['elapsed_s']:.0f} s "
        f"(per part: {', '.join(f'{k} {v:.0f} s' for k, v in setup['part_seconds'].items())}). "
        f"Pair: {models.get('preset', '')} ({models.get('verifier', '')}), {models.get('dtype', '')} on "
        f"{setup.get('device', '')}; {settings['rounds']} round(s), {settings['prompts']} prompts per "
        f"single-stream part, up to {settings['max_new_tokens']} new tokens, greedy."
    )


def results_page(data: Path, shown: str) -> str:
    """The whole of ``docs/results.md`` for the bench files in ``data`` (named ``shown`` on the page)."""
    setup = json.loads((data / "bench.json").read_text())
    summary, goals, notes = read_csv(data / SUMMARY_CSV), read_csv(data / GOALS_CSV), read_csv(data / "notes.csv")
    settings = setup["settings"]
    lines = [
        TITLE,
        "",
        f"_Generated from `{shown}` by `python -m workloads bench --render-docs {shown}`; do not edit by hand._",
        "",
        "Only what the latest run of the benchmark suite (`python -m workloads bench`) measured. The dated "
        "experiments that led here, each with its command, are in [notebook.md](notebook.md); what they settled is "
        "in [architecture.md](architecture.md). Metric definitions are in "
        "[`metrics/METRICS.md`](../metrics/METRICS.md).",
        "",
        _recorded(setup),
    ]
    if settings.get("quick") or settings["rounds"] < 3:
        lines += ["", f"**{settings['rounds']} round(s) only (`--quick`): no spread to speak of; a smoke test of the "
                      "suite, not figures to quote.**"]  # fmt: skip
    load = setup.get("load_average")
    if load:
        busy = "/".join(f"{x:.1f}" for x in load["start"]), "/".join(f"{x:.1f}" for x in load["end"])
        lines += [
            "",
            f"Load average (1/5/15 min) on the {load['cpus']} CPUs: {busy[0]} at the start, {busy[1]} at the end.",
        ]
    missing = [p for p in setup.get("parts_planned", []) if p not in setup["part_seconds"]]
    if missing:
        lines += ["", f"**The run ended before these parts: {', '.join(missing)}.**"]
    if setup.get("conditions"):
        lines += ["", f"Conditions: {setup['conditions']}"]
    lines += [
        "",
        "Each part ran its competitors one after another on the same prompts, every round, in a balanced "
        'order (`metrics.rounds`); "× reference" is the median over rounds of a competitor\'s figure divided by '
        "the reference's in the same round, with its min–max.",
        "",
        "## Goals",
        "",
        markdown_table(goals, ["part", "goal", "figure", "met"]) if goals else "No goal was measured.",
    ]
    if goal_table := read_csv(data / pdv_goal.FILE):
        lines += ["", "## PDV's goal per load point (`workloads.bench.pdv_goal`)", "", markdown_table(goal_table)]
    titles = setup.get("titles", {})
    for part in dict.fromkeys(s["part"] for s in summary):
        table = markdown_table(_summary_rows([s for s in summary if s["part"] == part]))
        lines += ["", f"## {titles.get(part, part)}", "", table]
        part_notes = [n["note"] for n in notes if n["part"] == part]
        if part_notes:
            lines += ["", *(f"* {n}" for n in part_notes)]
    for note in setup.get("figure_notes", []):
        lines += ["", note]
    if calls := read_csv(data / "calls.csv"):
        lines += ["", "## The calls and the machine load", "", markdown_table(calls)]
    lines += live_run_section(data.parent / LIVE_RUN)
    return "\n".join(lines) + "\n"


LIVE_RUN = "live-run"  # beside ``bench``: the default Live run in Chromium against replay (``page_vs_cli``)


def live_run_section(live: Path) -> list[str]:
    """The default Live run's measurement, if one is recorded in ``live`` (``docs/data/live-run``)."""
    rows = read_csv(live / f"{page_vs_cli.NAME}.csv")
    calls_file = live / f"{page_vs_cli.NAME}-calls.json"
    if not rows or not calls_file.exists():
        return []
    calls = json.loads(calls_file.read_text())
    shown = [{"call": r["round"], "first": r["first"], "engine": r["label"], "figure": r["figure"],
              "page": _fmt(r["page"]), "replay": _fmt(r["cli"]), "page ÷ replay": _fmt(r["page_over_cli"])}
             for r in rows]  # fmt: skip
    keys = [k for k in calls[0] if k != "call"]
    lines = [
        "",
        "## The default Live run in Chromium against replay of its spec",
        "",
        f"Recorded with `python -m workloads.bench.page_vs_cli --preset smol --calls {len(calls)} --out "
        f"docs/data/{LIVE_RUN}`: each call runs the default Live run in Chromium (Start pressed once, the summary "
        "table read off the page) and `python -m workloads replay` with the same spec, the two in an order that "
        "alternates. Per engine, the page's pooled figure over replay's:",
        "",
        markdown_table(shown),
        "",
        "Each call: seconds from Start (or the command) to the verdict, the verdicts, the machine's load:",
        "",
        markdown_table([{"call": str(c["call"]), **{k: str(c[k]) for k in keys}} for c in calls]),
    ]
    return lines


def _pdv_row(goals: list[dict[str, str]]) -> dict[str, str]:
    """PDV's goals at every load point, as one line: how many met, and how many the rounds tell."""
    loads = [g["goal"].rsplit(", ", 1)[1].rstrip(")") for g in goals]
    met = [load for load, g in zip(loads, goals, strict=True) if g["met"] == "met"]
    told = [g["figure"].rsplit("the rounds tell: ", 1)[1] for g in goals]
    verdicts = sorted(set(told))
    return {
        "goal": f"PDV >= {pdv_goal.GOAL}x Baseline and PD (tokens/s), at every load point",
        "measured": f"median met at {len(met)} of {len(goals)} ({', '.join(met) or 'none'}); "
        f"the rounds tell: {', '.join(f'{v} at {told.count(v)}' for v in verdicts)}",
        "met": "met" if len(met) == len(goals) else "missed",
    }


def status_table(data: Path) -> str:
    """The README's status: every goal of the latest suite run, PDV's per-load-point goals as one row."""
    setup = json.loads((data / "bench.json").read_text())
    goals = read_csv(data / GOALS_CSV)
    pdv = [g for g in goals if g["goal"].startswith(f"PDV >= {pdv_goal.GOAL}x")]
    rows = []
    for g in goals:
        if g in pdv:
            if g is pdv[0]:
                rows.append(_pdv_row(pdv))
            continue
        rows.append({"goal": g["goal"], "measured": g["figure"], "met": g["met"]})
    models, settings = setup.get("models", {}), setup["settings"]
    head = (
        f"The latest suite run ({setup['started_at'][:10]}, {models.get('preset', '')} pair on "
        f"{setup.get('device', '')}, {settings['rounds']} rounds; generated from `docs/data/bench`, every "
        "table in [docs/results.md](docs/results.md)):"
    )
    return "\n".join([STATUS_BEGIN, head, "", markdown_table(rows, ["goal", "measured", "met"]), STATUS_END])


def with_status(readme: str, table: str) -> str:
    """``readme`` with its status block replaced by ``table``; a README without the markers is an error."""
    if STATUS_BEGIN not in readme or STATUS_END not in readme:
        raise ValueError(f"README has no {STATUS_BEGIN} … {STATUS_END} block for the status table")
    return readme[: readme.index(STATUS_BEGIN)] + table + readme[readme.index(STATUS_END) + len(STATUS_END) :]


def copy_run(bench_dir: Path, data: Path) -> None:
    """The run's files into ``data`` (``docs/data/bench``); an optional file an earlier run left is removed."""
    missing = [f for f in FILES if not (bench_dir / f).exists()]
    if missing:
        raise SystemExit(f"{bench_dir} is not a bench directory: {', '.join(missing)} missing")
    data.mkdir(parents=True, exist_ok=True)
    for f in FILES + OPTIONAL:
        if (bench_dir / f).exists():
            shutil.copyfile(bench_dir / f, data / f)
        else:  # an optional file of an earlier run must not stand beside this run's
            (data / f).unlink(missing_ok=True)


def render(bench_dir: Path, docs: Path, readme: Path | None = None) -> None:
    """Write ``docs`` (the results page) and ``readme``'s status block from ``bench_dir`` (copied to
    ``docs/data/bench`` first)."""
    data = docs.parent / "data" / "bench"
    if bench_dir.resolve() != data.resolve():
        copy_run(bench_dir, data)
    root = docs.parent.parent.resolve()
    shown = data.resolve().relative_to(root) if data.resolve().is_relative_to(root) else data
    page = results_page(data, str(shown))
    status = None if readme is None else with_status(readme.read_text(), status_table(data))  # both or neither
    docs.write_text(page)
    if readme is not None:
        readme.write_text(status)
