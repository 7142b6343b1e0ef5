"""Part 8, llama.cpp as a peer: every engine against llama.cpp's server on the same trace, at C = 1, 4 and 16.

A user with this model on a CPU would run llama.cpp. Its server (llama-cpp-python's,
``workloads.bench.llama_server``: installed on first use, started as a user
starts it) serves the very GGUF file the ``smol`` preset's verifier is
converted from, plain and with its prompt-lookup speculation. The same held-out
trace is replayed into it with the endpoint client (``replay --endpoint``)
beside the in-process engines, in the same rounds and the same balanced order
(``workloads.drivers.sweep``), so each round's ratio divides by llama.cpp's
figure of that round.

What the comparison holds equal and what it cannot:

* greedy, the same prompts as text of the same token ids (its completions take
  text only), the same cap on new tokens, 2 threads; ``repeat_penalty`` 1.0
  (its server's default of 1.1 is not greedy decoding);
* its weights stay 4-bit (Q4_1) and its matmuls run on them; the engines run
  the same weights dequantised to float32. Outputs may therefore differ in a
  few places; the share that equals AR's is reported, not assumed;
* it serves one request at a time, so at C > 1 requests queue in front of it;
* it streams no token counts: its output tokens are its streamed text
  tokenized with the pair's tokenizer, settled to ``max_tokens`` where it
  finished by length (run.json ``endpoint.output_tokens_from`` says which).

Goal (issue's definition of done): the best engine >= 1x llama.cpp's server
at C = 16 in tokens/s; the gap at C = 1 is stated. ``--llama-cpp-loads``,
``--llama-cpp-engines`` and ``--llama-cpp-servers`` restrict a call.
"""

from __future__ import annotations

import sys
from contextlib import ExitStack
from dataclasses import dataclass, field

from engine.config import ENGINES, SamplingParams, flag
from engine.models.presets import smol_gguf_path
from workloads.bench.common import BenchContext, Goal, Listed, PartResult, comma_list, first, held_out, one_of
from workloads.bench.llama_server import (
    ALIAS,
    FLAVOURS,
    PLAIN,
    LlamaServerError,
    ensure_installed,
    serve,
    server_argv,
    shown,
)
from workloads.bench.load import requests_at  # as many requests per load point as the load sweep
from workloads.bench.rows import RateRow, Summary, find, ratio_summary, spread
from workloads.drivers.arrivals import ClosedLoop
from workloads.drivers.run_notes import answered_nothing, endpoint_lines
from workloads.drivers.run_spec import RunSettings
from workloads.drivers.sweep import RunWriter, SweepPlan, run_sweep
from workloads.endpoint.spec import EndpointSpec

NAME = "8-llama-cpp"
PRESET = "smol"  # the preset whose verifier is converted from the GGUF file llama.cpp serves
GOAL = 1.0
GOAL_AT = 16
REFERENCE = PLAIN.label
GREEDY_BODY = {"repeat_penalty": 1.0}  # llama-cpp-python's server penalises repeats by default


@dataclass(frozen=True, kw_only=True)
class LlamaRow(RateRow):
    concurrency: int
    run_id: str
    completed: int
    requests: int
    ttft_p50_ms: float | None
    tpot_p50_ms: float | None
    tpot_p99_ms: float | None
    same_as_ar: int  # of its outputs, text for text


@dataclass(frozen=True)
class LlamaCppOptions:
    """Which load points, engines and llama.cpp servers one call measures."""

    loads: tuple[int, ...] = field(
        default=Listed((1, 4, 16)),
        metadata=flag("--llama-cpp-loads", comma_list(int, "loads"), "comma list of C values"),
    )
    engines: tuple[str, ...] = field(
        default=Listed(ENGINES),
        metadata=flag("--llama-cpp-engines", comma_list(one_of(ENGINES), "engines"), "comma list of engines (with ar)"),
    )
    servers: tuple[str, ...] = field(
        default=Listed(tuple(FLAVOURS)),
        metadata=flag(
            "--llama-cpp-servers",
            comma_list(one_of(tuple(FLAVOURS)), "servers"),
            "llama.cpp plain (the reference) and/or with prompt-lookup decoding",
        ),
    )
    port: int = field(default=8765, metadata=flag("--llama-cpp-port", int, "first port; one per server"))

    def __post_init__(self) -> None:
        if not self.loads or min(self.loads) < 1:
            raise ValueError("--llama-cpp-loads needs concurrencies of at least 1")
        if "ar" not in self.engines:
            raise ValueError("--llama-cpp-engines needs ar: every output is checked against ar's")
        if "plain" not in self.servers:
            raise ValueError("--llama-cpp-servers needs plain: every ratio is to llama.cpp without speculation")

    def quick(self) -> LlamaCppOptions:
        return self  # its sizes come from the settings' prompts and tokens; given loads stay as given


def run(ctx: BenchContext) -> PartResult:
    s, pair, o = ctx.settings, ctx.pair, ctx.options(LlamaCppOptions)
    if pair.source.get("preset") != PRESET:
        raise SystemExit(f"bench: {NAME} serves the {PRESET} preset's GGUF file; run it with --preset {PRESET}")

    def say(line: str) -> None:
        print(f"bench: {NAME}: {line}", file=sys.stderr, flush=True)

    try:
        version = ensure_installed(say)
    except LlamaServerError as exc:
        raise SystemExit(f"bench: {NAME}: {exc}") from None
    gguf = smol_gguf_path()
    flavours = [FLAVOURS[name] for name in FLAVOURS if name in o.servers]
    engines = tuple(e for e in ENGINES if e in o.engines)
    pool = held_out(ctx, max(requests_at(ctx, c) for c in o.loads), s.load_max_new_tokens)
    params = SamplingParams(max_new_tokens=s.load_max_new_tokens, seed=0)
    writer = RunWriter(ctx.out / "llama-cpp")
    commands = {}
    with ExitStack() as servers:
        endpoints = []
        for i, flavour in enumerate(flavours):
            argv = server_argv(gguf, o.port + i, flavour)
            commands[flavour.label] = shown(argv)
            say(f"starting {commands[flavour.label]}")
            try:
                url = servers.enter_context(
                    serve(argv, f"http://127.0.0.1:{o.port + i}", ctx.out / "llama-cpp" / f"{flavour.label}.log")
                )
            except LlamaServerError as exc:
                raise SystemExit(f"bench: {NAME}: {exc}") from None
            endpoints.append(EndpointSpec(url, ALIAS, flavour.label, prompt="text", extra_body=GREEDY_BODY))
        results = []
        for c in o.loads:
            plan = SweepPlan(engines, (ClosedLoop(c),), RunSettings(params=params), tuple(endpoints), s.rounds)
            meta = {**ctx.meta, "bench": NAME, "llama_cpp": {"version": version, "commands": commands}}
            results += run_sweep(pair, first(pool, requests_at(ctx, c)), plan, writer, meta)
    rows = [_row(r, results) for r in results]
    summary = ratio_summary(rows, "output_tok_s", REFERENCE, NAME)
    for metric in ("ttft_p50_ms", "tpot_p50_ms"):
        summary += ratio_summary(rows, metric, REFERENCE, NAME, lower_is_better=True)
    notes = [f"{PLAIN.label} is llama-cpp-python {version}'s server: {commands[PLAIN.label]}."]
    notes += [f"{f.label}: {commands[f.label]}." for f in flavours if f is not PLAIN]
    notes += endpoint_lines(results)
    notes += [line for line in map(answered_nothing, results) if line is not None]
    notes += [_same_note(rows, f.label) for f in flavours]
    goals = []
    for c in o.loads:
        best = _best(summary, c, engines)
        if best is None:
            notes.append(f"C = {c}: no engine has a ratio to {REFERENCE}.")
            continue
        figure = f"best engine at C = {c}: {best.label}, {spread(best)} {REFERENCE}"
        if c == GOAL_AT:
            goals.append(Goal(NAME, f"best engine >= {GOAL}x {REFERENCE}'s server at C = {c} (tokens/s)", figure,
                              best.ratio.median >= GOAL))  # fmt: skip
        else:
            notes.append(figure + ".")
    title = "llama.cpp as a peer: every engine against llama.cpp's server on the same trace"
    return PartResult(NAME, title, rows, summary, goals, notes)


def _row(result, results) -> LlamaRow:
    c, round_ = result.key.concurrency, result.round - 1
    ar = next(r for r in results if r.key.engine == "ar" and r.key.concurrency == c and r.round == result.round)
    texts = [o.text for o in result.outputs]
    m = result.summary
    return LlamaRow(
        group=f"C={c}", round=round_, label=result.key.engine, concurrency=c, run_id=result.key.run_id,
        output_tok_s=m.output_tok_s, completed=m.completed, requests=m.num_requests, ttft_p50_ms=m.ttft_p50_ms,
        tpot_p50_ms=m.tpot_p50_ms, tpot_p99_ms=m.tpot_p99_ms,
        same_as_ar=sum(a == b for a, b in zip(texts, (o.text for o in ar.outputs), strict=True)),
    )  # fmt: skip


def _best(summary: list[Summary], c: int, engines: tuple[str, ...]) -> Summary | None:
    at = [find(summary, f"C={c}", e, "output_tok_s") for e in engines]
    measured = [a for a in at if a is not None and a.ratio is not None]
    return max(measured, key=lambda a: a.ratio.median, default=None)


def _same_note(rows: list[LlamaRow], label: str) -> str:
    mine = [r for r in rows if r.label == label]
    same, total = sum(r.same_as_ar for r in mine), sum(r.requests for r in mine)
    return f"{label}: {same} of {total} outputs equal to AR's, text for text (4-bit matmuls against float32)."
