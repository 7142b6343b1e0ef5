"""``python -m engine generate``: one prompt through one engine; ``python -m engine profile``: step costs;
``python -m engine serve``: one engine behind an OpenAI-compatible HTTP API (``engine.serve``).

``generate`` prints the text (or, with ``--json``, one JSON object) and the speculative
counters. ``elapsed_s`` covers generation only, not model loading;
``weights_mb`` counts every distinct tensor of both models once (a draft that
shares the verifier's embedding does not count it twice) and ``rss_mb`` is the
process's resident memory after generating.

``profile`` prints the step cost profile the ``cost`` controller reads for a
model pair on this machine (measuring it first if it is not cached, with a
progress bar) and where it is cached. ``generate`` and ``serve`` run the same
step before they build their engine, so the first run on a machine shows the
measuring instead of stalling.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import time
from dataclasses import replace

from engine.config import ENGINES, EngineName
from engine.flags import (
    DefaultsHelpFormatter,
    OneLineErrorParser,
    add_engine_args,
    add_model_args,
    add_sampling_args,
    engine_config_from_args,
    engine_name,
    sampling_from_args,
)


def _parser() -> argparse.ArgumentParser:
    parser = OneLineErrorParser(prog="python -m engine", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, parser_class=OneLineErrorParser)
    gen = sub.add_parser("generate", help="generate a completion for one prompt", formatter_class=DefaultsHelpFormatter)
    gen.add_argument(
        "--engine", type=engine_name, choices=ENGINES, default=EngineName.BASELINE, help="engine (default: %(default)s)"
    )
    gen.add_argument("--prompt", required=True, help="user message (chat template applied unless --raw)")
    gen.add_argument("--raw", action="store_true", help="send the prompt text as is, without the chat template")
    gen.add_argument("--seed", type=int, default=None, help="sampling seed (default: none)")
    gen.add_argument("--json", action="store_true", help="print one JSON object")
    add_model_args(gen)
    add_sampling_args(gen)
    add_engine_args(gen)
    prof = sub.add_parser(
        "profile",
        help="print (measuring once) the step cost profile of a model pair",
        formatter_class=DefaultsHelpFormatter,
    )
    add_model_args(prof)
    add_engine_args(prof)
    gpu = sub.add_parser(
        "gpu-check",
        help="smoke-test a GPU: losslessness in float32, bfloat16 divergence, host waits, memory (one report)",
        formatter_class=DefaultsHelpFormatter,
    )
    gpu.add_argument("--device", default="cuda", help="the CUDA device to check")
    gpu.add_argument("--preset", default=None, help="model pair preset (default: smol)")
    gpu.add_argument("--out", default="runs/gpu-check.json", help="the report file")
    srv = sub.add_parser(
        "serve",
        help="serve one engine with an OpenAI-compatible API (/v1/completions, ...)",
        formatter_class=DefaultsHelpFormatter,
    )
    srv.add_argument(
        "--engine", type=engine_name, choices=ENGINES, default=EngineName.BASELINE, help="engine (default: %(default)s)"
    )
    srv.add_argument("--host", default="127.0.0.1", help="address to bind (default: %(default)s, this machine only)")
    srv.add_argument("--port", type=int, default=8000, help="port (default: %(default)s; 0 = any free port)")
    srv.add_argument("--served-model-name", default=None, help="model name in the API (default: the preset's name)")
    srv.add_argument("--api-key", default=None, help="require Authorization: Bearer KEY on /v1 (default: none)")
    srv.add_argument(
        "--max-waiting", type=int, default=None, help="answer 429 while this many requests wait (default: no limit)"
    )
    add_model_args(srv)
    add_engine_args(srv)
    return parser


def generate(args: argparse.Namespace) -> dict:
    import psutil

    from engine.models.pair import load_model_pair
    from engine.profiling.prepare import prepare_profile
    from engine.request import Request
    from engine.schedulers.registry import make_engine
    from engine.terminal_progress import progress_bar

    params = sampling_from_args(args, seed=args.seed)
    config = engine_config_from_args(args)
    pair = load_model_pair(args.preset, args.draft_model, args.verifier_model, args.device, args.dtype)
    prompt_ids = pair.encode_prompt(args.prompt, raw=args.raw)
    with progress_bar() as progress:
        profile = prepare_profile(pair, config, progress, engine=args.engine)
    engine = make_engine(args.engine, pair, config, profile).start()
    start = time.perf_counter()
    try:
        request = engine.submit(Request("cli-0", prompt_ids, params, prompt=args.prompt))
        request.done.wait()
    finally:
        engine.stop()
    elapsed = time.perf_counter() - start
    rss = psutil.Process().memory_info().rss
    if request.status != "ok":
        raise RuntimeError(f"request {request.status}: {request.error}")
    return {
        "engine": args.engine,
        "prompt_token_ids": prompt_ids,
        "token_ids": request.output_token_ids,
        "text": pair.decode(request.output_token_ids),
        "finish_reason": request.finish_reason,
        "drafted": request.drafted,
        "accepted": request.accepted,
        "acceptance_rate": request.accepted / request.drafted if request.drafted else None,
        "verify_steps": request.verify_steps,
        "elapsed_s": round(elapsed, 4),
        "tokens_per_s": round(len(request.output_token_ids) / elapsed, 2) if elapsed > 0 else None,
        "models": pair.describe(),
        "weights_mb": round(pair.weight_bytes() / 2**20, 1),
        "rss_mb": round(rss / 2**20, 1),
    }


def profile(args: argparse.Namespace) -> str:
    from engine.models.pair import load_model_pair
    from engine.profiling.prepare import prepare_profile, profile_shape
    from engine.profiling.store import profile_path
    from engine.terminal_progress import progress_bar

    # the profile any speculative engine with these flags reads, whatever --controller says
    config = engine_config_from_args(args)
    config = replace(config, controller=replace(config.controller, kind="cost"))
    pair = load_model_pair(args.preset, args.draft_model, args.verifier_model, args.device, args.dtype)
    with progress_bar() as progress:
        table = prepare_profile(pair, config, progress, engine=EngineName.BASELINE).table()
    return f"{table}\n(milliseconds per forward; cached in {profile_path(pair, profile_shape(config))})"


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    try:
        if args.command == "profile":
            print(profile(args))
            return 0
        if args.command == "gpu-check":
            from pathlib import Path

            from engine.gpu_check import run as gpu_check

            gpu_check(args.device, args.preset, Path(args.out))
            print(f"gpu-check: report written to {args.out}")
            return 0
        if args.command == "serve":
            from engine.serve.address import check_address

            check_address(args.host, args.port)  # before loading anything: a bad address costs nothing
            from engine.serve.server import serve

            serve(args)
            return 0
        result = generate(args)
    except (ValueError, RuntimeError) as exc:  # a ModelLoadError, a bad address or value: one line
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.json:
        print(json.dumps(result))
    else:
        print(result["text"])
        rate = result["acceptance_rate"]
        print(
            f"\n[{result['engine']}] {len(result['token_ids'])} tokens in {result['elapsed_s']:.2f}s "
            f"({result['tokens_per_s']} tok/s); drafted {result['drafted']}, accepted {result['accepted']}"
            + (f" (acceptance {rate:.2f})" if rate is not None else "")
            + f", verify steps {result['verify_steps']}",
            file=sys.stderr,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
