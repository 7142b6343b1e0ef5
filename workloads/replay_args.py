"""The ``replay`` command line: its options and the sweep plan they describe.

Engine, draft-length, sampling and model options come from ``engine.flags``
(shared with ``python -m engine generate``); this module adds the load, trace
and measurement options and turns them into a ``SweepPlan``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import NoReturn, TypeVar

from engine.config import ENGINES
from engine.flags import (
    DefaultsHelpFormatter,
    add_engine_args,
    add_model_args,
    add_sampling_args,
    engine_config_from_args,
    sampling_from_args,
)
from metrics.export import check_appendable
from metrics.summary import SLO
from metrics.timeseries import DEFAULT_HZ
from workloads.datasets.sharegpt_file import BUNDLED
from workloads.datasets.synthetic import LengthSpec
from workloads.drivers.arrivals import ArrivalPolicy, ClosedLoop, OpenLoop
from workloads.drivers.rounds import DEFAULT_ROUNDS, Precision
from workloads.drivers.trace import MT_BENCH, SYNTHETIC, DatasetSpec
from workloads.endpoint.spec import DEFAULT_LABEL, ENDPOINT_TYPES, PROMPT_FORMS, EndpointSpec

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


def _whole(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a whole number") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number (use inf for all at once)") from None


def json_object(text: str) -> dict:
    """A flag's type: a JSON object."""
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"needs a JSON object ({{...}}), got {text!r}")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="python -m workloads", description="Benchmark workloads for PD-Verify engines.")
    sub = parser.add_subparsers(dest="command", required=True, parser_class=_Parser)
    # bench and report have parsers of their own (workloads.__main__ hands them their arguments); listed here
    # so that --help names every command
    sub.add_parser("bench", help="the benchmark suite: is it faster, and do the lanes help? (bench --help)")
    sub.add_parser("report", help="one self-contained HTML report of run directories (report --help)")
    sub.add_parser("simulate", help="project the engines onto a simulated device (simulate --help)")
    sub.add_parser("validate-sim", help="the simulator against real runs on this machine (validate-sim --help)")
    p = sub.add_parser(
        "replay", help="replay one trace on every engine and load point", formatter_class=DefaultsHelpFormatter
    )
    p.prog = "python -m workloads replay"
    add = p.add_argument
    add("--engines", help=f"comma list of {','.join(ENGINES)}, any case (default: all; none with --endpoint)")
    server = p.add_argument_group("endpoint (an OpenAI-compatible server, run after the engines)")
    server.add_argument("--endpoint", help="server base URL, e.g. http://127.0.0.1:8000/v1")
    server.add_argument("--model", help="the model name the server serves (required with --endpoint)")
    server.add_argument("--label", default=DEFAULT_LABEL, help="its name in the run files (default: %(default)s)")
    server.add_argument("--api-key", help="sent as Authorization: Bearer KEY; never written to the run files")
    server.add_argument("--endpoint-type", choices=ENDPOINT_TYPES, default="completions", help="API to call")
    server.add_argument(
        "--endpoint-prompt",
        choices=PROMPT_FORMS,
        default="auto",
        help="prompts as the trace's token ids, their text, or a chat message (the chat API); auto: ids where the "
        "server takes them, else text, else chat, asked once per run",
    )
    server.add_argument(
        "--endpoint-body",
        type=json_object,
        default={},
        help="JSON object of fields added to every request, e.g. '{\"repeat_penalty\": 1.0}' for llama.cpp",
    )
    load = p.add_argument_group("load (closed loop by default)")
    load.add_argument("--concurrency", help="comma list of closed-loop concurrencies (default 1,4,16)")
    load.add_argument("--rates", help="comma list of open-loop request rates per second (inf = all at once)")
    load.add_argument("--request-rate", help="one open-loop request rate (same as --rates R)")
    load.add_argument("--burstiness", type=float, default=1.0, help="Gamma shape of arrivals; 1 = Poisson")
    load.add_argument("--max-concurrency", type=int, help="open loop: at most this many requests in flight")
    data = p.add_argument_group("trace")
    data.add_argument("--num-requests", type=int, default=50, help="requests in the trace")
    data.add_argument(
        "--dataset",
        default=BUNDLED,
        help=f"{BUNDLED}, {MT_BENCH} (two turns), {SYNTHETIC}, or anything datasets.load_dataset reads: "
        "a JSON/JSONL/CSV/Parquet file or directory, or a hub id",
    )
    data.add_argument("--dataset-split", default="train", help="split of a hub dataset or directory")
    data.add_argument("--dataset-config", help="configuration of a hub dataset")
    data.add_argument("--input-len", type=int, default=256, help="synthetic prompt tokens")
    data.add_argument("--output-len", type=int, default=128, help="synthetic output tokens")
    data.add_argument("--range-ratio", type=float, default=0.0, help="synthetic lengths vary by +- this share")
    data.add_argument("--seed", type=int, default=0, help="sampling of the trace, arrivals and generation")
    add_model_args(p)
    add_sampling_args(p)
    add_engine_args(p)
    run = p.add_argument_group("measurement and output")
    run.add_argument("--ttft-slo-ms", type=float, help="goodput: TTFT objective")
    run.add_argument("--tpot-slo-ms", type=float, help="goodput: TPOT objective")
    run.add_argument("--sample-hz", type=float, default=DEFAULT_HZ, help="time series sampling rate (>= 2)")
    run.add_argument(
        "--rounds",
        type=int,
        default=DEFAULT_ROUNDS,
        help="each engine runs the trace this many times per load point, in a balanced order; × AR is the median "
        "over rounds with the interval a repeat run's median falls in, and a verdict needs 3",
    )
    run.add_argument(
        "--until-precise",
        type=float,
        metavar="HALF_WIDTH",
        help="add rounds past 5 (up to --rounds) until every engine's tok/s × AR interval is within ± this share "
        "of its median, e.g. 0.1 (the Live run's default)",
    )
    run.add_argument(
        "--round-budget-s", type=float, help="with --until-precise: no round that would end after this many seconds"
    )
    run.add_argument(
        "--warmup", type=int, default=1, help="unmeasured warm-up requests per run, at least (sent at its concurrency)"
    )
    run.add_argument("--timeout-s", type=float, help="cancel a run still going after this many seconds")
    run.add_argument("--out", help="run directory (default: runs/<date-time>); new runs are appended")
    run.add_argument(
        "--json", action="store_true", help="after the table, print one JSON line: out_dir, run_ids, summaries"
    )
    return parser


def _policies(args: argparse.Namespace) -> tuple[ArrivalPolicy, ...]:
    rates_text = args.rates if args.rates is not None else args.request_rate
    if args.rates is not None and args.request_rate is not None:
        raise UsageError("give --rates or --request-rate, not both")
    if rates_text is not None:
        if args.concurrency is not None:
            raise UsageError("give --concurrency (closed loop) or --rates (open loop), not both")
        return _list(
            rates_text, lambda r: OpenLoop(_number(r), args.burstiness, args.max_concurrency, args.seed), "--rates"
        )
    if args.max_concurrency is not None:
        raise UsageError("--max-concurrency caps open-loop runs; with a closed loop use --concurrency")
    if args.burstiness != 1.0:
        raise UsageError("--burstiness applies to open-loop runs (--rates)")
    return _list(args.concurrency or "1,4,16", lambda c: ClosedLoop(_whole(c)), "--concurrency")


def plan_from_args(args: argparse.Namespace):
    """The sweep plan, dataset and output directory; ``UsageError`` for anything invalid."""
    from workloads.drivers.run_spec import RunSettings
    from workloads.drivers.sweep import SweepPlan

    try:
        endpoints = _endpoints(args)
        default = "" if endpoints else ",".join(ENGINES)
        # as the dashboard names them ("AR", "PDV") or as the engine registry does ("ar", "pdv")
        engines = tuple(dict.fromkeys(_list(args.engines, str.lower, "--engines"))) if args.engines else ()
        engines = engines or tuple(e for e in default.split(",") if e)
        policies = _policies(args)
        config = engine_config_from_args(args)
        params = sampling_from_args(args, seed=args.seed)
        slo = SLO(args.ttft_slo_ms, args.tpot_slo_ms)
        if args.num_requests < 1:
            raise ValueError(f"--num-requests must be >= 1, got {args.num_requests}")
        dataset = DatasetSpec(
            args.dataset,
            LengthSpec(args.input_len, args.range_ratio),
            LengthSpec(args.output_len, args.range_ratio),
            args.dataset_split,
            args.dataset_config,
        )
        dataset.check()
        settings = RunSettings(config, params, slo if slo.any else None, args.sample_hz, args.warmup, args.timeout_s)
        if args.round_budget_s is not None and args.until_precise is None:
            raise ValueError("--round-budget-s needs --until-precise")
        precision = None if args.until_precise is None else Precision(args.until_precise, budget_s=args.round_budget_s)
        plan = SweepPlan(engines, policies, settings, endpoints, args.rounds, precision)
        out = Path(args.out) if args.out else Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
        check_appendable(out)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from exc
    return plan, dataset, out


def _endpoints(args: argparse.Namespace) -> tuple[EndpointSpec, ...]:
    """The ``--endpoint`` server, if any; its flags without it are a usage error."""
    if args.endpoint is None:
        given = [
            flag
            for flag, value in (
                ("--model", args.model),
                ("--api-key", args.api_key),
                ("--label", args.label != DEFAULT_LABEL),
                ("--endpoint-type", args.endpoint_type != "completions"),
                ("--endpoint-prompt", args.endpoint_prompt != "auto"),
                ("--endpoint-body", args.endpoint_body),
            )
            if value
        ]
        if given:
            raise UsageError(f"{', '.join(given)} only applies with --endpoint URL")
        return ()
    if not args.model:
        raise UsageError("--endpoint needs --model NAME: the model name the server serves")
    prompt, body = args.endpoint_prompt, args.endpoint_body
    return (EndpointSpec(args.endpoint, args.model, args.label, args.api_key, args.endpoint_type, prompt, body),)
