"""``docs/results.md`` from CSVs: the page's tables are rendered, never typed.

Two kinds of generated block, each between HTML comments the renderer owns:

* ``<!-- bench:begin -->`` … ``<!-- bench:end -->`` – the benchmark suite's
  section, from a bench directory's ``summary.csv``, ``goals.csv``,
  ``notes.csv`` and ``bench.json``, and ``pdv-goal.csv`` where the run has
  one. Those files are first copied to ``docs/data/bench/`` so the page can be
  rendered again without the run directory (``--render-docs docs/data/bench``).
* ``<!-- csv: PATH -->`` … ``<!-- /csv -->`` – one table from the CSV at PATH
  (relative to the repository), columns as in the file; the drafter
  benchmark's tables (``summary-<part>.csv``) are kept this way.

Prose outside the blocks is left as it is.
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

from workloads.bench import pdv_goal
from workloads.bench.common import GOALS_CSV, SUMMARY_CSV, read_csv

BEGIN, END = "<!-- bench:begin -->", "<!-- bench:end -->"
CSV_BLOCK = re.compile(r"<!-- csv: (?P<path>\S+) -->\n.*?<!-- /csv -->", re.S)
FILES = (SUMMARY_CSV, GOALS_CSV, "notes.csv", "bench.json")
OPTIONAL = (pdv_goal.FILE,)  # written by runs with the load sweep or the mixed traffic
HEADING = "## The benchmark suite: is it faster, and do the lanes help?"


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


def _summary_rows(rows: list[dict[str, str]]) -> list[dict[str, str]]:
    """One row per (group, competitor): every metric's median; the part's first metric also as a ratio."""
    lead = rows[0]["metric"]
    table: dict[tuple[str, str], dict[str, str]] = {}
    for s in rows:
        row = table.setdefault((s["group"], s["label"]), {"group": s["group"], "competitor": s["label"]})
        row[s["metric"]] = _fmt(s["median"])
        if s["metric"] == lead:
            if s["ratio_median"]:
                row[f"x {s['reference']}"] = _fmt(s["ratio_median"])
                row["min–max"] = f"{_fmt(s['ratio_min'])}–{_fmt(s['ratio_max'])}"
            else:
                row[f"{lead} min–max"] = f"{_fmt(s['min'])}–{_fmt(s['max'])}"
            row["rounds"] = s["rounds"]
    columns = list(dict.fromkeys(k for r in table.values() for k in r))
    return [{c: r.get(c, "") for c in columns} for r in table.values()]


def bench_section(data: Path, shown: str) -> str:
    """The generated section for the bench files in ``data`` (named ``shown`` on the page)."""
    setup = json.loads((data / "bench.json").read_text())
    summary, goals, notes = read_csv(data / SUMMARY_CSV), read_csv(data / GOALS_CSV), read_csv(data / "notes.csv")
    models = setup.get("models", {})
    settings = setup["settings"]
    lines = [
        BEGIN,
        f"_Generated from `{shown}` by `python -m workloads bench --render-docs {shown}`; do not edit by hand._",
        "",
        f"Recorded {setup['started_at']} with `{setup['command']}` in {setup['elapsed_s']:.0f} s "
        f"(per part: {', '.join(f'{k} {v:.0f} s' for k, v in setup['part_seconds'].items())}). "
        f"Pair: {models.get('preset', '')} ({models.get('verifier', '')}), {models.get('dtype', '')} on "
        f"{setup.get('device', '')}; {settings['rounds']} round(s), {settings['prompts']} prompts per "
        f"single-stream part, up to {settings['max_new_tokens']} new tokens, greedy.",
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
        'order (`metrics.rounds`); "x reference" is the median over rounds of a competitor\'s figure divided by '
        "the reference's in the same round, with its min–max.",
        "",
        "### Goals",
        "",
        markdown_table(goals, ["part", "goal", "figure", "met"]) if goals else "No goal was measured.",
    ]
    if goal_table := read_csv(data / pdv_goal.FILE):
        lines += ["", "### PDV's goal per load point (`workloads.bench.pdv_goal`)", "", markdown_table(goal_table)]
    titles = setup.get("titles", {})
    for part in dict.fromkeys(s["part"] for s in summary):
        table = markdown_table(_summary_rows([s for s in summary if s["part"] == part]))
        lines += ["", f"### {titles.get(part, part)}", "", table]
        part_notes = [n["note"] for n in notes if n["part"] == part]
        if part_notes:
            lines += ["", *(f"* {n}" for n in part_notes)]
    for note in setup.get("figure_notes", []):
        lines += ["", note]
    lines.append(END)
    return "\n".join(lines)


def render_csv_blocks(text: str, root: Path) -> str:
    def table(match: re.Match) -> str:
        path = match["path"]
        rows = read_csv(root / path)
        if not rows:
            raise FileNotFoundError(f"{root / path}: no rows to render")
        return f"<!-- csv: {path} -->\n{markdown_table(rows)}\n<!-- /csv -->"

    return CSV_BLOCK.sub(table, text)


def render(bench_dir: Path, docs: Path) -> None:
    """Rewrite ``docs``'s generated blocks from ``bench_dir`` (copied to ``docs/data/bench`` first)."""
    data = docs.parent / "data" / "bench"
    if bench_dir.resolve() != data.resolve():
        missing = [f for f in FILES if not (bench_dir / f).exists()]
        if missing:
            raise SystemExit(f"{bench_dir} is not a bench directory: {', '.join(missing)} missing")
        data.mkdir(parents=True, exist_ok=True)
        for f in FILES + OPTIONAL:
            if (bench_dir / f).exists():
                shutil.copyfile(bench_dir / f, data / f)
            else:  # an optional file of an earlier run must not stand beside this run's
                (data / f).unlink(missing_ok=True)
    root = docs.parent.parent
    text = docs.read_text() if docs.exists() else "# Measured results\n"
    shown = data.resolve().relative_to(root.resolve()) if data.resolve().is_relative_to(root.resolve()) else data
    section = bench_section(data, str(shown))
    if BEGIN in text and END in text:
        text = text[: text.index(BEGIN)] + section + text[text.index(END) + len(END) :]
    elif "\n## " in text:
        at = text.index("\n## ", text.index("## Contents") + 1 if "## Contents" in text else 0)
        text = text[: at + 1] + f"{HEADING}\n\n{section}\n\n" + text[at + 1 :]
    else:
        text += f"\n{HEADING}\n\n{section}\n"
    docs.write_text(render_csv_blocks(text, root))
