"""The ``bench`` command: run the chosen parts, write their CSVs and figures, print the summary.

Files in ``--out``: ``<part>.csv`` (one row per round and competitor),
``summary.csv`` (median ratios with min–max, every part), ``goals.csv`` (each
goal met or missed, with its figure), ``pdv-goal.csv`` (PDV's goal per load point
of the load sweep and the mixed traffic, ``workloads.bench.pdv_goal``), ``notes.csv``, ``bench.json`` (setup,
machine, timings), ``figures/`` (``figures.html``, PNGs where kaleido works)
and the run directories ``load-sweep/`` and ``lanes/`` (the dashboard's Runs
page lists and opens them; ``python -m workloads report`` too).
The drafter comparison, which runs when named (``--parts drafters``), writes
its own files into ``drafters/`` beside these (``workloads.bench.parts``); a
part's options are flags named after it (``--load-loads``, ``--drafters-loads``, …).
``--render-docs DIR`` writes ``docs/results.md`` and the README's status table
from such a directory instead of measuring (``workloads.bench.docs``).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import sys
import time
from dataclasses import asdict, replace
from datetime import UTC, datetime
from pathlib import Path

from engine.flags import OneLineErrorParser, add_config_args, config_from_args
from workloads import bench
from workloads.bench import pdv_goal
from workloads.bench.common import (
    GOALS_CSV,
    SUMMARY_CSV,
    BenchContext,
    BenchSettings,
    PartOptions,
    PartResult,
    write_csv,
)
from workloads.bench.lanes import NAME as LANES
from workloads.bench.load import NAME as LOAD
from workloads.bench.parts import PARTS, SUITE, parse_parts


def build_parser() -> argparse.ArgumentParser:
    p = OneLineErrorParser(
        prog="python -m workloads bench",
        description=bench.__doc__.split("\n\n")[0].replace("``", ""),
        epilog="Parts: " + ", ".join(PARTS) + ". " + __doc__.split("\n\n")[1].replace("``", ""),
    )
    p.add_argument("--quick", action="store_true", help="1 round, the smallest sizes of every part (seconds on tiny)")
    p.add_argument("--preset", default="smol", help="model pair preset (default %(default)s)")
    p.add_argument("--device", default="auto", help="auto, cpu or cuda (default %(default)s)")
    p.add_argument("--out", help="bench directory (default runs/bench-<date-time>)")
    p.add_argument(
        "--parts", default=",".join(SUITE), help="comma list of parts, by name or number (default: the suite)"
    )
    p.add_argument("--rounds", type=int, help="override the rounds of every part that counts them")
    p.add_argument("--conditions", default="", help="what else ran on the machine, recorded with the figures")
    p.add_argument("--render-docs", metavar="DIR", help="write --docs from DIR's CSVs; measure nothing")
    p.add_argument("--docs", default="docs/results.md", help="the results page to write (default %(default)s)")
    p.add_argument("--readme", default="README.md", help="the README whose status table to write (default %(default)s)")
    for part in PARTS.values():
        if part.options is not None:
            add_config_args(
                p.add_argument_group(f"{part.name} (with --parts {part.name.split('-', 1)[1]})"), part.options
            )
    return p


def part_options(kind: type, argv: list[str] | None) -> PartOptions:
    """The options of type ``kind`` given in ``argv``, read by a parser of their own: two parts' fields may share
    a name (``loads``), so the one parser that checks and documents every flag cannot tell them apart."""
    own = argparse.ArgumentParser(add_help=False)
    add_config_args(own, kind)
    known, _ = own.parse_known_args(argv)
    return config_from_args(kind, known)


def print_table(results: list[PartResult]) -> None:
    print(f"\n{'part':<12} {'group':<14} {'competitor':<36} {'metric':<14} {'median':>10}  x reference (min-max)")
    for part in results:
        for s in part.summary:
            ratio = "" if s.ratio is None else s.ratio.text()
            median = "" if s.median is None else f"{s.median:.4g}"
            print(f"{part.name:<12} {s.group:<14} {s.label[:36]:<36} {s.metric:<14} {median:>10}  {ratio}")
    print("\ngoals:")
    for part in results:
        for g in part.goals:
            print(f"  [{'met' if g.met else 'MISSED'}] {g.goal}: {g.figure}")
        for note in part.notes:
            print(f"  {part.name}: {note}")


def figures(out: Path, results: list[PartResult]) -> list[str]:
    from presentation.bench_figures import load_curve, pareto, ratio_bars, write_figures

    figs = []
    for part in results:
        if part.name == LOAD:
            rows = [r.record() for r in part.rows]
            figs += [("load-throughput", load_curve(rows, "output_tok_s", "Output tokens/s against C"))]
            figs += [("load-tpot-p99", load_curve(rows, "tpot_p99_ms", "TPOT p99 (ms) against C"))]
            figs += [("load-pareto", pareto(rows))]
        elif any(s.ratio is not None for s in part.summary):
            figs.append((part.name, ratio_bars([s.record() for s in part.summary], part.title)))
    return write_figures(figs, out / "figures", "PD-Verify benchmark") if figs else []


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.render_docs:
        from workloads.bench.docs import render

        try:
            render(Path(args.render_docs), Path(args.docs), Path(args.readme))
        except ValueError as exc:
            parser.error(str(exc))
        print(f"wrote {args.docs} and the status table of {args.readme} from {args.render_docs}")
        return 0
    from engine.models.pair import load_model_pair
    from engine.profiling import prepare_default_profiles
    from engine.terminal_progress import progress_bar
    from workloads.drivers.environment import run_context

    try:  # every bad value in one line before any model loads
        parts = parse_parts(args.parts)
        settings = BenchSettings.quick_settings() if args.quick else BenchSettings.full()
        if args.rounds is not None:
            settings = replace(settings, rounds=args.rounds)
        options = tuple(part_options(PARTS[n].options, argv) for n in parts if PARTS[n].options is not None)
    except ValueError as exc:
        parser.error(str(exc))
    out = Path(args.out) if args.out else Path("runs") / datetime.now().strftime("bench-%Y%m%d-%H%M%S")
    out.mkdir(parents=True, exist_ok=True)
    began, start = datetime.now(UTC).isoformat(timespec="seconds"), time.perf_counter()
    load_before = os.getloadavg()  # what else kept the machine busy: recorded with the figures
    pair = load_model_pair(preset=args.preset, device=args.device)
    with progress_bar() as measuring:  # the step costs every part's engines read: once per machine, first
        prepare_default_profiles(pair, measuring)
    context = run_context(pair)
    ctx = BenchContext(pair, settings, out, {**context, "invocation": {"argv": sys.argv[1:]}}, options)
    results, timings = [], {}

    def record(skipped: list[str]) -> dict:
        """Write the summary files of the parts done so far: a suite cut short keeps what it measured."""
        write_csv(out / SUMMARY_CSV, [s.record() for r in results for s in r.summary])
        write_csv(out / GOALS_CSV, [g.row() for r in results for g in r.goals])
        swept = [row for r in results if r.name in (LOAD, LANES) for row in r.rows]
        write_csv(out / pdv_goal.FILE, pdv_goal.goal_rows(swept))
        write_csv(out / "notes.csv", [{"part": r.name, "title": r.title, "note": n} for r in results for n in r.notes])
        setup = {
            "command": "python -m workloads bench " + shlex.join(sys.argv[2:] if argv is None else argv),
            "started_at": began,
            "elapsed_s": round(time.perf_counter() - start, 1),
            "part_seconds": timings,
            "parts_planned": parts,
            "settings": asdict(settings),
            "titles": {r.name: r.title for r in results},
            "figure_notes": skipped,
            "conditions": args.conditions,
            "load_average": {"start": load_before, "end": os.getloadavg(), "cpus": os.cpu_count()},
            **context,
        }
        (out / "bench.json").write_text(json.dumps(setup, indent=2, default=str))
        return setup

    for name in parts:
        print(f"bench: {name} ...", file=sys.stderr, flush=True)
        t = time.perf_counter()
        result = PARTS[name].run(ctx)
        timings[name] = round(time.perf_counter() - t, 1)
        results.append(result)
        write_csv(out / f"{name}.csv", [row.record() for row in result.rows])
        record([])
        print(f"bench: {name} done in {timings[name]:.0f} s", file=sys.stderr, flush=True)
    skipped = figures(out, results)
    setup = record(skipped)
    print_table(results)
    for note in skipped:
        print(note)
    print(f"\nwrote {out} in {setup['elapsed_s']:.0f} s")
    print(json.dumps({"out_dir": str(out), "goals": [g.row() for r in results for g in r.goals]}))
    return 0
