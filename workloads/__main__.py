"""``python -m workloads replay``: run every engine at every load on one trace, write the run files.

Example::

    python -m workloads replay --engines ar,baseline,pd,pdv --concurrency 1,4,16 \\
        --num-requests 100 --dataset sharegpt --preset smol --seed 0 --out runs/smol-c

Open-loop instead of closed-loop: ``--rates 1,2,4 [--burstiness B] [--max-concurrency M]``
(``--request-rate R`` is a one-rate ``--rates``). Prints a summary table, then
one JSON line (``{"out_dir", "run_ids", "summaries"}``) as the last line of
stdout. Exit codes: 0 when every planned run ran to its end; 1 when a run
stopped early (timeout, engine error, an engine that did not stop), a run
file could not be written, or the sweep ended before its last run, each
named on stderr; 2 for bad input, with
one message; 130 on Ctrl-C, which keeps the runs that finished.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import NoReturn, TypeVar

from engine.config import (
    DTYPE_HELP,
    DTYPES,
    ENGINES,
    EngineConfig,
    SamplingParams,
    add_controller_args,
    controller_from_args,
)
from engine.models.presets import PRESETS
from metrics.export import check_appendable, jsonable
from metrics.summary import SLO, RunSummary
from metrics.timeseries import DEFAULT_HZ
from workloads.arrivals import ArrivalPolicy, ClosedLoop, OpenLoop
from workloads.sharegpt import BUNDLED, TruncatedDatasetWarning
from workloads.synthetic import LengthSpec
from workloads.trace import SYNTHETIC, DatasetSpec

T = TypeVar("T")
EXIT_INCOMPLETE = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


class UsageError(Exception):
    """Bad command-line input: reported in one line, exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message} (see --help)\n")


def _list(text: str, convert: Callable[[str], T], flag: str) -> tuple[T, ...]:
    parts = [p.strip() for p in text.split(",") if p.strip()]
    if not parts:
        raise UsageError(f"{flag} needs at least one value")
    try:
        return tuple(convert(p) for p in parts)
    except ValueError as exc:
        raise UsageError(f"{flag}: {exc}") from exc


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise ValueError(f"{text!r} must be >= 1")
    return value


def _rate(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number (use inf for all at once)") from None
    if math.isnan(value) or value <= 0:
        raise ValueError(f"{text!r} must be > 0")
    return value


def _engine(text: str) -> str:
    if text not in ENGINES:
        raise ValueError(f"unknown engine {text!r}; choose from {', '.join(ENGINES)}")
    return text


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m workloads", description="Benchmark workloads for PD-Verify engines.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    p = sub.add_parser("replay", help="replay one trace on every engine and load point")
    p.prog = "python -m workloads replay"
    add = p.add_argument
    add("--engines", default=",".join(ENGINES), help=f"comma list of {','.join(ENGINES)} (default: all)")
    load = p.add_argument_group("load (closed loop by default)")
    load.add_argument("--concurrency", help="comma list of closed-loop concurrencies (default 1,4,16)")
    load.add_argument("--rates", help="comma list of open-loop request rates per second (inf = all at once)")
    load.add_argument("--request-rate", help="one open-loop request rate (same as --rates R)")
    load.add_argument("--burstiness", type=float, default=1.0, help="Gamma shape of arrivals; 1 = Poisson")
    load.add_argument("--max-concurrency", type=int, help="open loop: at most this many requests in flight")
    data = p.add_argument_group("trace")
    data.add_argument("--num-requests", type=int, default=50)
    data.add_argument("--dataset", default=BUNDLED, help=f"PATH to a ShareGPT JSON, {BUNDLED}, or {SYNTHETIC}")
    data.add_argument("--input-len", type=int, default=256, help="synthetic prompt tokens")
    data.add_argument("--output-len", type=int, default=128, help="synthetic output tokens")
    data.add_argument("--range-ratio", type=float, default=0.0, help="synthetic lengths vary by +- this share")
    data.add_argument("--seed", type=int, default=0, help="sampling of the trace, arrivals and generation")
    models = p.add_argument_group("models")
    models.add_argument("--preset", help="model pair preset (default smol)")
    models.add_argument("--draft-model")
    models.add_argument("--verifier-model")
    models.add_argument("--device", default="auto", help="auto, cpu, cuda or cuda:N")
    models.add_argument("--dtype", choices=DTYPES, default=None, help=DTYPE_HELP)
    eng = p.add_argument_group("engine")
    add_controller_args(eng)
    eng.add_argument("--max-batch-size", type=int, default=EngineConfig.max_batch_size)
    eng.add_argument("--max-cache-tokens", type=int, default=EngineConfig.max_cache_tokens)
    eng.add_argument("--prefill-chunk-tokens", type=int, default=EngineConfig.prefill_chunk_tokens)
    eng.add_argument(
        "--hybrid-threshold",
        type=int,
        default=EngineConfig.hybrid_threshold,
        help="pdv: below this many running requests draft+verify run atomically (0 = never)",
    )
    eng.add_argument("--verify-promote-margin", type=int, default=EngineConfig.verify_promote_margin)
    eng.add_argument(
        "--micro-batches",
        type=int,
        default=EngineConfig.micro_batches,
        help="pdv: groups of running requests pipelined between the draft and verify lanes",
    )
    eng.add_argument(
        "--intra-op-threads",
        type=int,
        default=EngineConfig.intra_op_threads,
        help="torch intra-op threads (0 = torch's default)",
    )
    eng.add_argument(
        "--concurrent-lanes",
        type=int,
        default=EngineConfig.concurrent_lanes,
        help="lanes that may run on the device at once (0 = auto: one on a CPU, every lane on CUDA)",
    )
    gen = p.add_argument_group("generation")
    gen.add_argument(
        "--max-new-tokens",
        type=int,
        default=SamplingParams.max_new_tokens,
        help="cap on each request's output length",
    )
    gen.add_argument("--temperature", type=float, default=0.0)
    gen.add_argument("--top-p", type=float, default=1.0)
    gen.add_argument("--top-k", type=int, default=0, help="0 = no top-k truncation")
    gen.add_argument("--ignore-eos", action="store_true", help="generate max tokens even past end-of-sequence")
    run = p.add_argument_group("measurement and output")
    run.add_argument("--ttft-slo-ms", type=float, help="goodput: TTFT objective")
    run.add_argument("--tpot-slo-ms", type=float, help="goodput: TPOT objective")
    run.add_argument("--sample-hz", type=float, default=DEFAULT_HZ, help="time series sampling rate (>= 2)")
    run.add_argument("--warmup", type=int, default=1, help="unmeasured warm-up requests per run")
    run.add_argument("--timeout-s", type=float, help="cancel a run still going after this many seconds")
    run.add_argument("--out", help="run directory (default runs/<date-time>); new runs are appended")
    return parser


def _policies(args: argparse.Namespace) -> tuple[ArrivalPolicy, ...]:
    rates_text = args.rates if args.rates is not None else args.request_rate
    if args.rates is not None and args.request_rate is not None:
        raise UsageError("give --rates or --request-rate, not both")
    if rates_text is not None:
        if args.concurrency is not None:
            raise UsageError("give --concurrency (closed loop) or --rates (open loop), not both")
        rates = _list(rates_text, _rate, "--rates")
        return tuple(OpenLoop(r, args.burstiness, args.max_concurrency, args.seed) for r in rates)
    if args.max_concurrency is not None:
        raise UsageError("--max-concurrency caps open-loop runs; with a closed loop use --concurrency")
    if args.burstiness != 1.0:
        raise UsageError("--burstiness applies to open-loop runs (--rates)")
    return tuple(ClosedLoop(c) for c in _list(args.concurrency or "1,4,16", _positive_int, "--concurrency"))


def plan_from_args(args: argparse.Namespace):
    """The sweep plan, dataset and output directory; ``UsageError`` for anything invalid."""
    from workloads.sweep import SweepPlan

    try:
        engines = tuple(dict.fromkeys(_list(args.engines, _engine, "--engines")))
        policies = _policies(args)
        controller = controller_from_args(args)
        config = EngineConfig(
            engine=engines[0],
            controller=controller,
            max_batch_size=args.max_batch_size,
            max_cache_tokens=args.max_cache_tokens,
            prefill_chunk_tokens=args.prefill_chunk_tokens,
            hybrid_threshold=args.hybrid_threshold,
            verify_promote_margin=args.verify_promote_margin,
            micro_batches=args.micro_batches,
            intra_op_threads=args.intra_op_threads,
            concurrent_lanes=args.concurrent_lanes,
        )
        params = SamplingParams(
            temperature=args.temperature,
            top_p=args.top_p,
            top_k=args.top_k,
            max_new_tokens=args.max_new_tokens,
            seed=args.seed,
            stop_token_ids=() if args.ignore_eos else None,
        )
        slo = SLO(args.ttft_slo_ms, args.tpot_slo_ms)
        if args.num_requests < 1:
            raise ValueError(f"--num-requests must be >= 1, got {args.num_requests}")
        if args.seed < 0:
            raise ValueError(f"--seed must be >= 0, got {args.seed}")
        if args.preset is not None and args.preset not in PRESETS:
            raise ValueError(f"unknown preset {args.preset!r}; choose one of {', '.join(PRESETS)}")
        if args.warmup < 0:
            raise ValueError(f"--warmup must be >= 0, got {args.warmup}")
        dataset = DatasetSpec(
            args.dataset,
            LengthSpec(args.input_len, args.range_ratio),
            LengthSpec(args.output_len, args.range_ratio),
        )
        dataset.check()
        plan = SweepPlan(
            engines,
            policies,
            config,
            params,
            slo if slo.any else None,
            args.sample_hz,
            args.warmup,
            args.timeout_s,
        )
        if plan.timeout_s is not None and not plan.timeout_s > 0:
            raise ValueError(f"--timeout-s must be > 0, got {plan.timeout_s}")
        if not (2 <= plan.sample_hz < float("inf")):  # also refuses nan
            raise ValueError(f"--sample-hz must be a finite number >= 2, got {plan.sample_hz:g}")
        out = Path(args.out) if args.out else Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
        check_appendable(out)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from exc
    return plan, dataset, out


def format_table(summaries: Sequence[RunSummary]) -> str:
    def num(value: float | None, fmt: str = ".1f") -> str:
        return "-" if value is None else format(value, fmt)

    header = (
        "engine",
        "load",
        "ok/n",
        "tok/s",
        "req/s",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "TPOT p99",
        "accept",
        "acc.len",
        "goodput",
    )
    rows = [header]
    for s in summaries:
        if s.request_rate is None:
            load = f"C={s.concurrency}"
        else:
            load = f"R={s.request_rate:g}" + ("" if s.concurrency is None else f",C<={s.concurrency}")
        rows.append(
            (
                s.engine,
                load,
                f"{s.completed}/{s.num_requests}",
                num(s.output_tok_s),
                num(s.req_s, ".2f"),
                num(s.ttft_p50_ms),
                num(s.ttft_p99_ms),
                num(s.tpot_p50_ms),
                num(s.tpot_p99_ms),
                num(s.acceptance_rate, ".2f"),
                num(s.mean_acceptance_length, ".2f"),
                num(s.goodput_req_s, ".2f"),
            )
        )
    widths = [max(len(r[i]) for r in rows) for i in range(len(header))]
    lines = [
        "  ".join(cell.rjust(w) if i > 1 else cell.ljust(w) for i, (cell, w) in enumerate(zip(r, widths, strict=True)))
        for r in rows
    ]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines) + "\n(latencies in ms; goodput in req/s meeting the SLOs)"


def replay_command(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from tqdm import tqdm

    from engine.models.pair import load_model_pair
    from workloads.environment import run_context
    from workloads.sweep import RunNotWritten, SweepProgress, run_sweep, setting_limits
    from workloads.trace import load_trace

    plan, dataset, out = plan_from_args(args)
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
    meta = {
        "invocation": {
            "argv": sys.argv[1:],
            "seed": args.seed,
            "dataset": dataset.describe(),
            "num_requests": args.num_requests,
        },
        **run_context(pair),
    }
    runs = len(plan.runs())
    bar = tqdm(total=runs * len(trace), unit="req", file=sys.stderr, dynamic_ncols=True)

    def progress(p: SweepProgress) -> None:
        bar.set_description(f"run {p.run_index + 1}/{p.runs} {p.engine} {p.load}", refresh=False)
        bar.update(p.overall[0] - bar.n)

    cancel = threading.Event()
    ended = threading.Event()
    results = []
    failure: list[Exception] = []

    def work() -> None:
        try:
            run_sweep(pair, trace, plan, out, meta=meta, cancel=cancel, progress=progress, on_result=results.append)
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
    summaries = [r.summary for r in results]
    print(format_table(summaries))
    print(f"wrote {len(results)} run(s) to {out}")
    print(
        json.dumps(
            jsonable(
                {
                    "out_dir": str(out),
                    "run_ids": [r.run_id for r in results],
                    "summaries": [asdict(s) for s in summaries],
                }
            ),
            allow_nan=False,
        )
    )
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
    if len(results) < runs:
        print(f"the sweep ended early: {runs - len(results)} of its {runs} runs did not run", file=sys.stderr)
    return EXIT_INCOMPLETE if short or len(results) < runs else 0


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
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
