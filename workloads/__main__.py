"""``python -m workloads replay``: run every engine at every load on one trace, write the run files.

Example::

    python -m workloads replay --engines ar,baseline,pd,pdv --concurrency 1,4,16 \\
        --num-requests 100 --dataset sharegpt --preset smol --seed 0 --out runs/smol-c

``python -m workloads simulate`` projects the engines onto a simulated device and ``validate-sim`` checks the
simulator against real runs here (``workloads.simulate_cli``).
``python -m workloads bench`` runs the benchmarks, every one a part of it (``workloads.bench``);
``python -m workloads report RUN_DIR... --out report.html`` writes a
self-contained HTML report of run directories (``workloads.report.html``).

Open-loop instead of closed-loop: ``--rates 1,2,4 [--burstiness B] [--max-concurrency M]``
(``--request-rate R`` is a one-rate ``--rates``). Prints a summary table and,
with ``--json``, one JSON line (``{"out_dir", "run_ids", "summaries", "verdicts"}``) as
the last line of stdout. At each load point the engines run ``--rounds`` rounds
(3 by default) in a balanced order; the table's × AR columns are the median
ratio to AR of the same round with the interval a repeat run's median
falls in, and one verdict line
per load point follows the table, then for each endpoint how its prompts were sent and
its output tokens counted. Exit codes: 0 when every planned run ran to its
end; 1 when a run stopped early (timeout, engine error, an engine that did not stop), a run's
every request failed (with the first error), a run
file could not be written, or the sweep ended before its last run, each
named on stderr; 2 for bad input, with
one message; 130 on Ctrl-C, which keeps the runs that finished.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path

from metrics.export import jsonable
from workloads.datasets.sharegpt_file import TruncatedDatasetWarning
from workloads.drivers.trace import DatasetSpec
from workloads.replay_args import (
    EXIT_INCOMPLETE,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    UsageError,
    build_parser,
    plan_from_args,
)
from workloads.report.table import format_table


def check_dataset_file(dataset: DatasetSpec) -> None:
    """Read a local dataset file's prompts before any model loads: a file that cannot be used fails in a
    second rather than after the models have loaded. ``UsageError`` names the file and what is wrong with it.

    The bundled sets are known to be readable; a hub dataset is fetched only when it is loaded.
    """
    from workloads.datasets.sharegpt_file import ScanReport, iter_exchanges
    from workloads.datasets.sources import load_exchanges

    if not Path(dataset.name).is_file():
        return
    report = ScanReport()
    try:
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", category=TruncatedDatasetWarning)  # loading reports it again
            logging.disable(logging.WARNING)
            found = load_exchanges(dataset.name, dataset.split, dataset.config)
            usable = len(found) if found is not None else sum(1 for _ in iter_exchanges(dataset.name, report))
    except (ValueError, OSError) as exc:
        raise UsageError(str(exc)) from exc
    finally:
        logging.disable(logging.NOTSET)
    if usable == 0:
        cut = "" if report.truncated_at is None else f"; the file ends inside a record at byte {report.truncated_at}"
        raise UsageError(f"{dataset.name}: no usable prompt (expected ShareGPT records with a human turn{cut})")


def replay_command(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from tqdm import tqdm

    from engine.models.pair import load_model_pair
    from engine.profiling import prepare_profiles
    from engine.terminal_progress import progress_bar
    from metrics.round_summary import ComparisonRow
    from workloads.drivers.environment import run_context
    from workloads.drivers.mt_bench import run_mt_bench
    from workloads.drivers.rounds import LoadPointComparison
    from workloads.drivers.run_notes import answered_nothing, endpoint_lines
    from workloads.drivers.run_spec import RunHooks, SweepProgress
    from workloads.drivers.sweep import RunNotWritten, run_sweep, setting_limits
    from workloads.drivers.trace import MT_BENCH, load_trace

    plan, dataset, out = plan_from_args(args)
    check_dataset_file(dataset)
    for note in setting_limits(dataset, plan.policies, args.num_requests, args.max_new_tokens):
        print(f"note: {note}", file=sys.stderr)
    try:
        loading = tqdm(total=100, desc="loading models", file=sys.stderr, bar_format="{desc} ({percentage:3.0f}%)")
        with loading:

            def loaded(message: str, fraction: float) -> None:
                loading.set_description(message, refresh=False)
                loading.update(round(100 * fraction) - loading.n)

            pair = load_model_pair(
                preset=args.preset,
                draft_model=args.draft_model,
                verifier_model=args.verifier_model,
                device=args.device,
                dtype=args.dtype,
                progress=loaded,
            )
        with tqdm(total=args.num_requests, desc="sampling prompts", unit="req", file=sys.stderr) as sampling:
            trace = load_trace(
                dataset,
                pair,
                args.num_requests,
                args.seed,
                args.max_new_tokens,
                lambda done, _wanted: sampling.update(done - sampling.n),
            )
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from exc
    except KeyboardInterrupt:
        print("interrupted before the first run: nothing was written", file=sys.stderr)
        return EXIT_INTERRUPTED
    with progress_bar() as measuring:  # the cost controller's step costs: once per machine, before any run
        prepare_profiles(pair, plan.settings.config, plan.engines, measuring)
    meta = {
        "invocation": {
            "argv": sys.argv[1:],
            "seed": args.seed,
            "dataset": dataset.describe(),
            "num_requests": args.num_requests,
        },
        **run_context(pair),
    }
    runs = len(plan.run_order())
    bar = tqdm(total=runs * len(trace), unit="req", file=sys.stderr, dynamic_ncols=True)

    def progress(p: SweepProgress) -> None:
        bar.set_description(f"run {p.run_index + 1}/{p.runs} {p.engine} {p.load}", refresh=False)
        bar.update(p.overall[0] - bar.n)

    cancel = threading.Event()
    ended = threading.Event()
    results = []
    points: list[LoadPointComparison] = []
    failure: list[Exception] = []

    shown_rounds: dict[str, int] = {}

    def compared(point: LoadPointComparison) -> None:
        if point.final:
            points.append(point)
        elif point.rounds_done > shown_rounds.get(point.load, 0):  # a round has ended: the verdict so far
            shown_rounds[point.load] = point.rounds_done
            bar.write(f"{point.load} after round {point.rounds_done}: {point.verdict_line()}", sys.stderr)

    def work() -> None:
        try:
            hooks = RunHooks(cancel, progress, results.append)
            if dataset.name == MT_BENCH:  # each run, then its own turn 2
                run_mt_bench(pair, trace, plan, out, meta, hooks, compared)
            else:
                run_sweep(pair, trace, plan, out, meta, hooks, compared)
        except Exception as exc:  # noqa: BLE001 - re-raised on the main thread
            failure.append(exc)
        finally:
            ended.set()

    worker = threading.Thread(target=work, name="sweep")
    worker.start()
    interrupted = False
    # Ctrl-C lands in this thread; waiting on an Event (not Thread.join) survives being interrupted
    while not ended.is_set():
        try:
            ended.wait(0.2)
        except KeyboardInterrupt:
            interrupted = True
            cancel.set()
            bar.write("interrupted: cancelling the run in progress (the finished runs are kept)", file=sys.stderr)
    worker.join()
    bar.close()
    if failure and not isinstance(failure[0], RunNotWritten):
        raise failure[0]
    rows = [row for p in points for row in p.comparison.rows]
    parts = [p.part for p in points for _ in p.comparison.rows]  # MT-Bench's turn of each row
    print(format_table(rows, parts) if rows else format_table([ComparisonRow(r.summary, {}, 1) for r in results]))
    for point in points:
        print(f"{point.load}: {point.verdict_line()}")
        if point.ended_by:
            print(f"{point.load}: rounds ended: {point.ended_by}")
        if point.comparison.noise_warning:
            print(f"warning: {point.comparison.noise_warning}", file=sys.stderr)
    for line in endpoint_lines(results):
        print(line)
    nothing = [line for line in map(answered_nothing, results) if line is not None]
    for line in nothing:
        print(line, file=sys.stderr)
    run_ids = list(dict.fromkeys(r.run_id for r in results))
    each = f", {plan.rounds} rounds each," if plan.rounds > 1 else ""
    print(f"wrote {len(run_ids)} run(s){each} to {out}")
    if args.json:
        machine = {
            "out_dir": str(out),
            "run_ids": run_ids,
            "summaries": [row.row() for row in rows] or [asdict(r.summary) for r in results],
            "verdicts": {p.load: p.verdict_line() for p in points},
        }
        print(json.dumps(jsonable(machine), allow_nan=False))
    if failure:  # a run file could not be written (disk full, permissions): the sweep ended there
        print(failure[0], file=sys.stderr)
    if interrupted:
        return EXIT_INTERRUPTED
    if failure:
        return EXIT_INCOMPLETE
    short = [r for r in results if r.stop_reason is not None]
    for r in short:
        print(
            f"{r.key.run_id} stopped early ({r.stop_reason}): "
            f"{r.summary.completed} of the trace's {len(trace)} requests completed",
            file=sys.stderr,
        )
    # rounds a precision made unnecessary (every point's rounds ended by it) are not missing
    precise = bool(points) and all(p.ended_by for p in points)
    early = len(results) < runs and not precise
    if early:
        print(f"the sweep ended early: {runs - len(results)} of its {runs} rounds did not run", file=sys.stderr)
    return EXIT_INCOMPLETE if short or nothing or early else 0


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # the benchmark suite and the HTML report have parsers of their own
        from workloads.bench.run import main as bench_main

        return bench_main(argv[1:])
    if argv[:1] == ["report"]:
        from workloads.report.html import main as report_main

        return report_main(argv[1:])
    if argv[:1] in (["simulate"], ["validate-sim"]):  # projections on a simulated device, and their check here
        from workloads.simulate_cli import main as simulate_main

        return simulate_main(argv)
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        with warnings.catch_warnings():
            # the loader logs a truncated file itself; its warning is for callers that catch it
            warnings.filterwarnings("ignore", category=TruncatedDatasetWarning)
            return replay_command(args)
    except UsageError as exc:
        print(f"{parser.prog} {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE


if __name__ == "__main__":
    sys.exit(main())
