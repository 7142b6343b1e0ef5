"""``python -m workloads simulate`` and ``validate-sim``: projections on a simulated device, and their check here.

Example::

    python -m workloads simulate --device h200 --pair llama-8b-1b --trace sharegpt \\
        --concurrency 1,16,256 --num-requests 10000 --acceptance 0.7 --out runs/sim-h200

prints one row per engine and load point, every row labelled simulated with
its cost model, then every assumption the projection rests on, and writes the
run files (``workloads.drivers.simulate``). ``--profile FILE`` prices the
forwards from a measured profile instead of the roofline (this machine's, or
one measured on a GPU); ``--acceptance-from RUN_DIR`` takes per-position
acceptance from a real run's recorded steps. ``validate-sim`` runs the real
engines and their simulations on this machine, interleaved, and writes the
predicted-vs-measured table (``workloads.drivers.sim_validate``). Exit codes:
0 done, 2 bad input (one message).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from collections.abc import Sequence
from dataclasses import asdict
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.config import EngineName
from engine.flags import (
    DefaultsHelpFormatter,
    add_engine_args,
    add_model_args,
    add_sampling_args,
    engine_config_from_args,
    sampling_from_args,
)
from engine.profiling.cost_profile import CostProfile
from metrics.export import jsonable
from sim.acceptance import Acceptance, from_run_dir
from sim.measured_cost import load_profile_file
from sim.model_shapes import PAIRS, pair_shape
from sim.roofline import PRESETS, Accelerator, RooflineCost, accelerator
from workloads.datasets.synthetic import LengthSpec
from workloads.drivers.sim_trace import length_trace
from workloads.drivers.sim_validate import HELDOUT, format_validation, validate
from workloads.drivers.simulate import SimPoint, SimSetup, simulate_sweep
from workloads.drivers.trace import DatasetSpec
from workloads.replay_args import EXIT_USAGE, UsageError, _list, _policies

SIM_ENGINES = "baseline,pd,pdv"
DEVICE_FIELDS = tuple(f for f in Accelerator.__dataclass_fields__ if f != "name")


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engines", default=SIM_ENGINES, help="comma list of ar,baseline,pd,pdv")
    load = p.add_argument_group("load (closed loop by default)")
    load.add_argument("--concurrency", help="comma list of closed-loop concurrencies (default 1,4,16)")
    load.add_argument("--rates", help="comma list of open-loop request rates per second")
    load.add_argument("--request-rate", help="one open-loop request rate (same as --rates R)")
    load.add_argument("--burstiness", type=float, default=1.0, help="Gamma shape of arrivals; 1 = Poisson")
    load.add_argument("--max-concurrency", type=int, help="open loop: at most this many requests in flight")
    add_sampling_args(p)
    add_engine_args(p)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m workloads")
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser(
        "simulate", help="project the engines onto a simulated device", formatter_class=DefaultsHelpFormatter
    )
    p.prog = "python -m workloads simulate"
    dev = p.add_argument_group("device and models (every figure is printed beside the table)")
    dev.add_argument("--device", default="h200", help=f"roofline preset: {', '.join(PRESETS)}")
    dev.add_argument("--device-param", action="append", default=[], metavar="NAME=VALUE",
                     help=f"override a roofline parameter: {', '.join(DEVICE_FIELDS)}")  # fmt: skip
    dev.add_argument("--profile", help="a measured step-cost profile file instead of the roofline")
    dev.add_argument("--pair", default="llama-8b-1b", help=f"model pair by shapes: {', '.join(PAIRS)}")
    acc = p.add_argument_group("acceptance (one of)")
    acc.add_argument("--acceptance", type=float, help="parametric: each drafted position accepted with this chance")
    acc.add_argument("--acceptance-from", help="a run directory: per-position rates from its recorded steps")
    acc.add_argument("--acceptance-engine", help="with --acceptance-from: only this engine's steps")
    data = p.add_argument_group("trace")
    data.add_argument("--trace", default="sharegpt", help="sharegpt, mt-bench, synthetic, or a dataset file")
    data.add_argument("--num-requests", type=int, default=1000, help="requests in the trace")
    data.add_argument("--input-len", type=int, default=256, help="synthetic prompt tokens")
    data.add_argument("--output-len", type=int, default=128, help="synthetic output tokens")
    data.add_argument("--seed", type=int, default=0, help="trace, arrivals and acceptance draws")
    _common(p)
    p.add_argument("--out", help="run directory (default: runs/sim-<date-time>); new runs are appended")
    p.add_argument("--json", action="store_true", help="after the table, one JSON line: out_dir, rows, assumptions")
    # a simulated device serves many requests at once; the KV budget defaults to what the device's memory holds
    p.set_defaults(max_batch_size=256, max_cache_tokens=None, drafter="model", max_new_tokens=512)

    v = sub.add_parser(
        "validate-sim",
        help="real runs and their simulations on this machine, predicted vs measured",
        formatter_class=DefaultsHelpFormatter,
    )
    v.prog = "python -m workloads validate-sim"
    v.add_argument("--dataset", default=str(HELDOUT), help="prompts (default: the held-out ShareGPT prompts)")
    v.add_argument("--num-requests", type=int, default=40, help="requests in the trace")
    v.add_argument("--rounds", type=int, default=3, help="interleaved rounds of the real engines per load point")
    v.add_argument("--warmup", type=int, default=1, help="unmeasured warm-up requests per real run")
    v.add_argument("--seed", type=int, default=0, help="trace, arrivals, generation and acceptance draws")
    v.add_argument("--tolerance", type=float, default=0.10, help="the check: |simulated / measured - 1| <= this")
    v.add_argument("--out", help="run directory (default: runs/validate-sim-<date-time>)")
    add_model_args(v)
    _common(v)
    # the simulated tokens have no identity, so no stop token ends a simulated request: nor may one end a real one
    v.set_defaults(drafter="model", max_new_tokens=64, ignore_eos=True)
    return parser


def _device_overrides(pairs: list[str]) -> dict[str, Any]:
    overrides: dict[str, Any] = {}
    for text in pairs:
        name, sep, value = text.partition("=")
        if not sep or name not in DEVICE_FIELDS:
            raise UsageError(
                f"--device-param takes NAME=VALUE with NAME one of {', '.join(DEVICE_FIELDS)}; got {text!r}"
            )
        kind = Accelerator.__dataclass_fields__[name].type
        try:
            overrides[name] = int(value) if kind == "int" else float(value)
        except ValueError:
            raise UsageError(f"--device-param {name}: {value!r} is not a number") from None
    return overrides


def _acceptance(args: argparse.Namespace) -> Acceptance:
    if (args.acceptance is None) == (args.acceptance_from is None):
        raise UsageError("give --acceptance ALPHA (a stated rate) or --acceptance-from RUN_DIR (a real run's steps)")
    if args.acceptance is not None:
        if not 0 <= args.acceptance <= 1:
            raise UsageError(f"--acceptance must be in 0..1, got {args.acceptance}")
        return Acceptance.parametric(args.acceptance)
    return from_run_dir(args.acceptance_from, args.acceptance_engine)


def setup_from_args(args: argparse.Namespace) -> SimSetup:
    pair = pair_shape(args.pair)
    if args.drafter != "model":
        raise UsageError("the simulator models the draft-model drafter only (--drafter model)")
    if args.profile:
        if args.device_param:
            raise UsageError("--device-param tunes the roofline; it does not apply with --profile")
        cost = load_profile_file(args.profile)
        kv = 65_536
    else:
        cost = RooflineCost(accelerator(args.device, **_device_overrides(args.device_param)), pair)
        kv = cost.kv_capacity_tokens()
    if args.max_cache_tokens is None:
        args.max_cache_tokens = kv
    config = engine_config_from_args(args)
    if args.profile:
        _check_covered(cost.measured, config.max_batch_size, config.controller.max_len + 1)
    params = sampling_from_args(args, seed=args.seed)
    return SimSetup(cost, _acceptance(args), config, params, pair.max_context, pair.vocab_size, args.seed)


def _check_covered(profile: CostProfile, max_batch: int, max_tokens: int) -> None:
    """A measured profile is flat past its grid's edge: a run that would read beyond it is refused."""
    if max_batch > profile.batch_sizes[-1] or max_tokens > profile.tokens[-1]:
        raise UsageError(
            f"the profile covers batches up to {profile.batch_sizes[-1]} and {profile.tokens[-1]} tokens per row; "
            f"this run needs {max_batch} and {max_tokens}: lower --max-batch-size / --max-draft-len, or measure a "
            f"profile with them (python -m engine profile --max-batch-size {max_batch} --max-draft-len "
            f"{max_tokens - 1} --drafter model)"
        )


def format_rows(points: Sequence[SimPoint]) -> str:
    head = ("engine", "load", "tok/s", "TPOT p50", "TPOT p99", "TTFT p50", "TTFT p99", "accept", "sim s", "cpu s",
            "simulated")  # fmt: skip
    lines = ["  ".join(f"{h:>9}" for h in head[:-1]) + "  " + head[-1]]
    for point in points:
        s = point.result.summary
        load = f"c{s.concurrency}" if s.concurrency is not None and s.request_rate is None else f"r{s.request_rate:g}"

        def cell(v: float | None, digits: int = 1) -> str:
            return f"{'—' if v is None or (isinstance(v, float) and math.isnan(v)) else f'{v:.{digits}f}':>9}"

        figures = (s.output_tok_s, s.tpot_p50_ms, s.tpot_p99_ms, s.ttft_p50_ms, s.ttft_p99_ms)
        cells = [f"{s.engine:>9}", f"{load:>9}", cell(figures[0], 0), *map(cell, figures[1:]),
                 cell(s.acceptance_rate, 2), cell(point.wall_s, 2), cell(point.cpu_s, 2)]  # fmt: skip
        lines.append("  ".join(cells) + f"  simulated: {s.simulated}")
    return "\n".join(lines)


def format_pdv_vs_pd(points: Sequence[SimPoint]) -> list[str]:
    """Per load point with both engines: PDV's tok/s and TPOT p99 over PD's (simulated)."""
    by_load: dict[tuple, dict[str, Any]] = {}
    for point in points:
        s = point.result.summary
        by_load.setdefault((s.concurrency, s.request_rate), {})[s.engine] = s
    lines = []
    for (concurrency, rate), engines in by_load.items():
        pd, pdv = engines.get(EngineName.PD), engines.get(EngineName.PDV)
        if pd is None or pdv is None or not pd.output_tok_s or not pd.tpot_p99_ms or pdv.tpot_p99_ms is None:
            continue
        load = f"c{concurrency}" if rate is None else f"r{rate:g}"
        lines.append(f"  {load}: PDV / PD tok/s {pdv.output_tok_s / pd.output_tok_s:.3f}, "
                     f"TPOT p99 {pdv.tpot_p99_ms / pd.tpot_p99_ms:.3f} (simulated)")  # fmt: skip
    return lines


def format_assumptions(assumptions: dict[str, Any], indent: str = "  ") -> str:
    lines = []
    for name, value in assumptions.items():
        if isinstance(value, dict):
            lines.append(f"{indent}{name}:")
            lines.append(format_assumptions(value, indent + "  "))
        else:
            lines.append(f"{indent}{name}: {value}")
    return "\n".join(lines)


def simulate_command(args: argparse.Namespace) -> int:
    try:
        setup = setup_from_args(args)
        engines = tuple(EngineName.parse(e) for e in _list(args.engines, str, "--engines"))
        policies = _policies(args)
        spec = DatasetSpec(args.trace, LengthSpec(args.input_len), LengthSpec(args.output_len))
        spec.check()
        trace = length_trace(spec, args.num_requests, args.seed, args.max_new_tokens, setup.max_context)
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from exc
    out = Path(args.out) if args.out else Path("runs") / datetime.now().strftime("sim-%Y%m%d-%H%M%S")

    def progress(done: int, total: int, label: str) -> None:
        print(f"simulating {done}/{total}: {label}", file=sys.stderr, flush=True)

    meta = {"invocation": {"argv": sys.argv[1:], "pair": args.pair}}
    try:
        points = simulate_sweep(trace, engines, policies, setup, out, meta, progress)
    except ValueError as exc:
        raise UsageError(str(exc)) from exc
    print(f"SIMULATED, not measured: {len(trace)} requests ({trace.source}), pair {args.pair}")
    print(format_rows(points))
    if ratios := format_pdv_vs_pd(points):
        print("PDV against PD at each load:")
        print("\n".join(ratios))
    print("assumptions:")
    print(format_assumptions(setup.assumptions()))
    wall, cpu = sum(p.wall_s for p in points), sum(p.cpu_s for p in points)
    print(f"simulated {len(points)} run(s) in {wall:.1f} s ({cpu:.1f} s of CPU); wrote them to {out}")
    if args.json:
        machine = {
            "out_dir": str(out),
            "simulated": True,
            "rows": [{**asdict(p.result.summary), "sim_wall_s": p.wall_s, "sim_cpu_s": p.cpu_s} for p in points],
            "assumptions": setup.assumptions(),
        }
        print(json.dumps(jsonable(machine), allow_nan=False))
    return 0


def validate_command(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from engine.models.pair import load_model_pair
    from engine.profiling import prepare_profile
    from engine.terminal_progress import progress_bar
    from workloads.drivers.environment import run_context
    from workloads.drivers.run_spec import RunHooks, RunSettings, SweepProgress
    from workloads.drivers.sweep import SweepPlan
    from workloads.drivers.trace import load_trace

    if args.drafter != "model":
        raise UsageError("the simulator models the draft-model drafter only (--drafter model)")
    try:
        engines = tuple(EngineName.parse(e) for e in _list(args.engines, str, "--engines"))
        policies = _policies(args)
        config = engine_config_from_args(args)
        params = sampling_from_args(args, seed=args.seed)
        settings = RunSettings(config, params, None, warmup=args.warmup)
        plan = SweepPlan(tuple(str(e) for e in engines), policies, settings, rounds=args.rounds)
        dataset = DatasetSpec(args.dataset)
        dataset.check()
    except (ValueError, FileNotFoundError) as exc:
        raise UsageError(str(exc)) from exc
    out = Path(args.out) if args.out else Path("runs") / datetime.now().strftime("validate-sim-%Y%m%d-%H%M%S")
    print("loading the model pair", file=sys.stderr, flush=True)
    pair = load_model_pair(preset=args.preset, draft_model=args.draft_model, verifier_model=args.verifier_model,
                           device=args.device, dtype=args.dtype)  # fmt: skip
    trace = load_trace(dataset, pair, args.num_requests, args.seed, args.max_new_tokens)
    # the simulation prices every forward from the profile, whatever controller the engines run
    measured = replace(config, controller=replace(config.controller, kind="cost"))
    with progress_bar() as measuring:
        profile = prepare_profile(pair, measured, measuring, engine=EngineName.PD)
    assert profile is not None  # the cost controller always needs one

    def progress(p: SweepProgress) -> None:
        if p.finished in (0, p.total):
            state = "starts" if p.finished == 0 else "done"
            print(f"real run {p.run_index + 1}/{p.runs} {p.engine} {p.load} {state}", file=sys.stderr, flush=True)

    meta = {"invocation": {"argv": sys.argv[1:], "seed": args.seed}, **run_context(pair)}
    rows = validate(pair, trace, plan, profile, pair.verifier.vocab_size, pair.max_context, out, meta,
                    RunHooks(progress=progress), args.tolerance, args.seed)  # fmt: skip
    print(f"predicted (SIMULATED with this machine's profile and each run's own acceptance) vs measured, "
          f"{args.rounds} interleaved rounds, {len(trace)} requests:")  # fmt: skip
    print(format_validation(rows))
    checked = [r for r in rows if r.within is not None]
    print(f"{sum(bool(r.within) for r in checked)} of {len(checked)} figures within ±{args.tolerance:.0%}; "
          f"wrote the runs, validation.csv and validation.md to {out}")  # fmt: skip
    return 0


def main(argv: Sequence[str]) -> int:
    parser = build_parser()
    args = parser.parse_args(list(argv))
    try:
        if args.command == "simulate":
            return simulate_command(args)
        return validate_command(args)
    except UsageError as exc:
        print(f"python -m workloads {args.command}: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
