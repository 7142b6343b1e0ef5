"""Part 9, the cost of one packed forward (``python -m workloads bench --parts forward-cost``): dispatched
operators per layer and wall time.

It measures, for the record in docs/results.md (``--forward-cost-measures``):

* ``host`` – **operators per layer**: aten operators dispatched during one
  forward (counted with a ``TorchDispatchMode``), divided by the layers, on the
  tiny preset at 1, 8 and 32 rows of 1 and 5 new tokens over ``CONTEXT`` cached
  tokens. The tiny model (3 layers, hidden 64) does almost no arithmetic, so its
  forward time – the median wall time of the same forwards – is the host's
  overhead: Python and dispatch;
* ``step`` – **the verifier step** of ``--preset``'s pair at C = 1 and C = 32 (one
  new token per row) beside this machine's float32 matmul rate and memory read
  rate, measured in the same call (``workloads.bench.hardware``), with the share
  of each the step reaches;
* ``widths`` – **what a few proposals cost a large batch**: the verifier's
  forward at ``WIDE_BATCH`` rows, every row one new token, against the same
  with k rows of w tokens (``WIDTHS``: the shapes a drafting step at that batch
  verifies), the cases interleaved in every repeat; rows are labelled ``rows``
  = the batch, ``tokens`` = w, metric ``forward_ms_<k>_wide``;
* ``padding`` – **the attention's groups against one padded call** over the
  load sweep's prompts (``workloads.bench.padding``);
* ``profile`` – **where the C = 32 step's time goes**: ``torch.profiler`` (CPU,
  with shapes) over ``PROFILED`` forwards of that step, each aten operator's own
  time per forward put in one ``Cost`` class (``cost_of``), and the rest of the
  wall time – Python, transformers' module calls, dispatch – as ``host``.

Rows are appended to ``--forward-cost-csv`` (``<out>/forward-cost/forward-cost.csv``
by default) with ``--forward-cost-label`` (before or after a change) and
``--forward-cost-round``, so one CSV holds both sides of a comparison measured
in interleaved rounds (docs/results.md gives the loop that ran them); each call
then rewrites the table of medians beside it (``forward-cost.md``).
"""

from __future__ import annotations

import csv
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from engine.config import flag
from engine.models.pair import ModelPair, load_model_pair
from engine.runner import ModelRunner
from workloads.bench.common import BenchContext, Listed, PartResult, comma_list, held_out
from workloads.bench.hardware import FULL, QUICK, kv_bytes, matmul_flops, read_bandwidth
from workloads.bench.padding import PADDED_ROWS, padding_rows

CONTEXT = 128  # cached tokens per row, as the cost profile uses
ROWS = (1, 8, 32)
TOKENS = (1, 5)
REPEATS = 15
QUICK_REPEATS = 2
FIELDS = ("label", "round", "preset", "rows", "tokens", "metric", "value")
NAME = "9-forward-cost"
DIRECTORY = "forward-cost"


class Measure(Enum):
    HOST = "host"  # operators per layer and forward time on the tiny pair: the host's overhead
    STEP = "step"  # the --preset verifier's step against the machine's matmul and read rates
    PROFILE = "profile"  # the --preset verifier's C = 32 step, per class of operator (torch.profiler)
    WIDTHS = "widths"  # the --preset verifier at 16 rows with a few rows wider than one token (a drafting step)
    PADDING = "padding"  # the --preset verifier over the load sweep's prompts, per attention group overhead


class Cost(Enum):
    """Where a forward's time goes, as the profile rows name it (``profile_<value>_ms``)."""

    LINEAR = "linear"  # the layers' projections (oneDNN or BLAS)
    LM_HEAD = "lm_head"  # the output layer over the vocabulary
    ATTENTION = "attention"  # the scaled-dot-product kernel
    KV = "kv"  # writes into the block pool and the gather of the rows' keys and values
    OTHER_OPS = "other_ops"  # norms, rotary, SiLU, residual adds, the step index, casts
    HOST = "host"  # wall time outside any aten operator: Python, module calls, dispatch


PROFILED = 5  # forwards under the profiler; its figures are per forward
WIDE_BATCH = 16
WIDTHS = ((0, 1), (1, 2), (3, 2), (1, 4), (8, 4), (16, 2))  # (k rows of w new tokens; the rest one each)
LINEAR_OPS = ("mkldnn::_linear_pointwise", "aten::addmm", "aten::mm", "aten::bmm")


@dataclass(frozen=True)
class ForwardCostOptions:
    """What one call measures and how its rows are labelled in the CSV that collects the rounds."""

    label: str = field(default="after", metadata=flag("--forward-cost-label", str, "the rows' label, e.g. before"))
    round: int = field(default=0, metadata=flag("--forward-cost-round", int, "this call's round (rounds interleave)"))
    measures: tuple[Measure, ...] = field(
        default=Listed((Measure.HOST, Measure.STEP)),
        metadata=flag(
            "--forward-cost-measures",
            comma_list(Measure, "measures"),
            "comma list of host, step, profile, widths, padding",
        ),
    )
    csv: Path | None = field(
        default=None,
        metadata=flag("--forward-cost-csv", Path, "CSV to append to; off: <out>/forward-cost/forward-cost.csv"),
    )

    def __post_init__(self) -> None:
        if not self.label or self.round < 0:
            raise ValueError("label must not be empty and round not negative")

    def quick(self) -> ForwardCostOptions:
        return self  # the quick size is in the repeats and the hardware probes' sizes (settings.quick)


class OperatorCounter(TorchDispatchMode):
    """Counts every aten operator dispatched inside the ``with`` block, by name."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.counts[str(func)] += 1
        return func(*args, **(kwargs or {}))

    @property
    def total(self) -> int:
        return sum(self.counts.values())


def _prepared(runner: ModelRunner, rows: int, tokens: int, seed: int = 0):
    """Stores holding ``CONTEXT`` tokens each, and the ids of the next forward of ``tokens`` per row."""
    gen = torch.Generator().manual_seed(seed)
    stores = [runner.new_store(CONTEXT + tokens) for _ in range(rows)]
    context = torch.randint(0, runner.vocab_size, (rows * CONTEXT,), generator=gen).to(runner.device)
    runner.forward(stores, context, [CONTEXT] * rows, torch.tensor([CONTEXT - 1], device=runner.device))
    ids = torch.randint(0, runner.vocab_size, (rows * tokens,), generator=gen).to(runner.device)
    keep = torch.arange(rows * tokens, device=runner.device)
    return stores, ids, keep


def _forward(runner: ModelRunner, stores, ids, tokens: int, keep) -> None:
    runner.forward(stores, ids, [tokens] * len(stores), keep)
    if runner.device.type == "cuda":
        torch.cuda.synchronize(runner.device)
    for store in stores:
        store.truncate(CONTEXT)


def operators_per_layer(runner: ModelRunner, rows: int, tokens: int) -> float:
    """Aten operators one forward of ``rows`` x ``tokens`` new tokens dispatches, per layer."""
    stores, ids, keep = _prepared(runner, rows, tokens)
    _forward(runner, stores, ids, tokens, keep)  # warm-up: first calls may dispatch extra
    with OperatorCounter() as counter:
        _forward(runner, stores, ids, tokens, keep)
    return counter.total / runner.num_layers


def forward_ms(runner: ModelRunner, rows: int, tokens: int, repeats: int = REPEATS) -> float:
    """Median wall milliseconds of one forward of ``rows`` x ``tokens`` new tokens."""
    stores, ids, keep = _prepared(runner, rows, tokens)
    _forward(runner, stores, ids, tokens, keep)
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        _forward(runner, stores, ids, tokens, keep)
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def tiny_rows(label: str, round_: int, repeats: int = REPEATS, pair: ModelPair | None = None) -> list[dict]:
    """Operators per layer and forward time on the tiny pair (``pair`` if it is the tiny one, else loaded)."""
    pair = pair or load_model_pair("tiny", device="cpu")
    out = []
    for rows in ROWS:
        for tokens in TOKENS:
            ops = operators_per_layer(pair.verifier, rows, tokens)
            ms = forward_ms(pair.verifier, rows, tokens, repeats)
            common = {"label": label, "round": round_, "preset": "tiny", "rows": rows, "tokens": tokens}
            out.append({**common, "metric": "operators_per_layer", "value": round(ops, 1)})
            out.append({**common, "metric": "forward_ms", "value": round(ms, 3)})
    return out


def step_rows(label: str, round_: int, pair: ModelPair, quick: bool = False) -> list[dict]:
    """``pair``'s verifier step at C = 1 and 32 beside the machine's matmul and read rates, measured together."""
    verifier = pair.verifier
    params = sum(p.numel() for p in verifier.model.parameters())
    weights = sum(p.numel() * p.element_size() for p in verifier.model.parameters())
    element = torch.empty((), dtype=verifier.dtype).element_size()
    sizes = QUICK if quick else FULL
    peak, bandwidth = matmul_flops(sizes), read_bandwidth(sizes)
    common = {"label": label, "round": round_, "preset": pair.source.get("preset") or "custom", "tokens": 1}
    out = [
        {**common, "rows": 0, "metric": "matmul_gflop_s", "value": round(peak / 1e9, 2)},
        {**common, "rows": 0, "metric": "read_gb_s", "value": round(bandwidth / 1e9, 2)},
    ]
    for rows in (1, 32):
        ms = forward_ms(verifier, rows, 1, repeats=QUICK_REPEATS if quick else 5)
        flop_s = 2 * params * rows / (ms / 1000)
        bytes_s = (weights + kv_bytes(verifier.model, rows, CONTEXT, element)) / (ms / 1000)
        row = {**common, "rows": rows}
        out.append({**row, "metric": "step_ms", "value": round(ms, 2)})
        out.append({**row, "metric": "matmul_share", "value": round(flop_s / peak, 3)})
        out.append({**row, "metric": "read_share", "value": round(bytes_s / bandwidth, 3)})
    return out


def widths_rows(label: str, round_: int, pair: ModelPair, repeats: int = REPEATS) -> list[dict]:
    """Median milliseconds of ``pair``'s verifier forward at ``WIDE_BATCH`` rows for each of ``WIDTHS``."""
    runner = pair.verifier
    stores, _, _ = _prepared(runner, WIDE_BATCH, max(w for _, w in WIDTHS))
    gen = torch.Generator().manual_seed(1)
    times: dict[tuple[int, int], list[float]] = {case: [] for case in WIDTHS}
    for _ in range(repeats + 1):  # the first pass warms every shape up and is not kept
        for k, w in WIDTHS:
            counts = [w] * k + [1] * (WIDE_BATCH - k)
            ids = torch.randint(0, runner.vocab_size, (sum(counts),), generator=gen).to(runner.device)
            start = time.perf_counter()
            runner.forward(stores, ids, counts, torch.arange(sum(counts), device=runner.device))
            if runner.device.type == "cuda":
                torch.cuda.synchronize(runner.device)
            times[(k, w)].append(time.perf_counter() - start)
            for store in stores:
                store.truncate(CONTEXT)
    common = {"label": label, "round": round_, "preset": pair.source.get("preset") or "custom", "rows": WIDE_BATCH}
    return [
        {**common, "tokens": w, "metric": f"forward_ms_{k}_wide", "value": round(statistics.median(t[1:]) * 1000, 2)}
        for (k, w), t in times.items()
    ]


def cost_of(name: str, shapes: list, vocab: int, slots: int) -> Cost:
    """The ``Cost`` class of one aten operator, from its name and input shapes (``slots``: the KV pool's)."""
    if name in LINEAR_OPS:
        return Cost.LM_HEAD if any(vocab in shape for shape in shapes[1:] if shape) else Cost.LINEAR
    if "scaled_dot_product" in name or "flash_attention" in name:
        return Cost.ATTENTION
    if name in ("aten::index_select", "aten::index_copy_") and shapes and shapes[0][:1] == [slots]:
        return Cost.KV
    return Cost.OTHER_OPS


def profile_rows(label: str, round_: int, pair: ModelPair, rows: int = 32) -> list[dict]:
    """Milliseconds per forward of ``pair``'s verifier step at ``rows`` rows, by ``Cost`` class (see above)."""
    from torch.profiler import ProfilerActivity, profile

    verifier = pair.verifier
    stores, ids, keep = _prepared(verifier, rows, 1)
    _forward(verifier, stores, ids, 1, keep)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        start = time.perf_counter()
        for _ in range(PROFILED):
            _forward(verifier, stores, ids, 1, keep)
        wall = (time.perf_counter() - start) * 1000 / PROFILED
    spent = dict.fromkeys(Cost, 0.0)
    slots = verifier.pool.keys.shape[1]
    for event in prof.key_averages(group_by_input_shape=True):
        cost = cost_of(event.key, event.input_shapes, verifier.vocab_size, slots)
        spent[cost] += event.self_cpu_time_total / 1000 / PROFILED
    spent[Cost.HOST] = wall - sum(spent.values())
    common = {"label": label, "round": round_, "preset": pair.source.get("preset") or "custom", "rows": rows}
    out = [{**common, "tokens": 1, "metric": f"profile_{c.value}_ms", "value": round(ms, 2)} for c, ms in spent.items()]
    return out + [{**common, "tokens": 1, "metric": "profile_wall_ms", "value": round(wall, 2)}]


def append_csv(path: Path, rows: list[dict]) -> None:
    new = not path.exists()
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS)
        if new:
            writer.writeheader()
        writer.writerows(rows)


def render(path: Path) -> str:
    """A markdown table of ``path``: the median over rounds of each figure, before and after."""
    values: dict[tuple, list[float]] = {}
    with path.open() as f:
        for row in csv.DictReader(f):
            key = (row["preset"], int(row["rows"]), int(row["tokens"]), row["metric"], row["label"])
            values.setdefault(key, []).append(float(row["value"]))
    rounds = max(len(v) for v in values.values())
    lines = [
        f"Medians of {rounds} rounds.",
        "",
        "| preset | rows | new tokens per row | figure | before | after |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for preset, rows, tokens, metric in sorted({k[:4] for k in values}, key=lambda k: (k[0] != "tiny", k)):
        before = values.get((preset, rows, tokens, metric, "before"))
        after = values.get((preset, rows, tokens, metric, "after"))
        cells = [f"{statistics.median(v):g}" if v else "–" for v in (before, after)]
        lines.append(f"| {preset} | {rows or '–'} | {tokens} | {metric} | {cells[0]} | {cells[1]} |")
    return "\n".join(lines)


def run(ctx: BenchContext) -> PartResult:
    """This call's measures appended to the CSV, and the table of medians over every call rewritten beside it."""
    o, quick = ctx.options(ForwardCostOptions), ctx.settings.quick
    path = o.csv or ctx.out / DIRECTORY / "forward-cost.csv"
    rows = []
    if Measure.HOST in o.measures:
        tiny = ctx.pair if ctx.pair.source.get("preset") == "tiny" else None
        rows += tiny_rows(o.label, o.round, QUICK_REPEATS if quick else REPEATS, tiny)
    if Measure.STEP in o.measures:
        rows += step_rows(o.label, o.round, ctx.pair, quick)
    if Measure.PROFILE in o.measures:
        rows += profile_rows(o.label, o.round, ctx.pair)
    if Measure.WIDTHS in o.measures:
        rows += widths_rows(o.label, o.round, ctx.pair, QUICK_REPEATS if quick else REPEATS)
    if Measure.PADDING in o.measures:
        trace = held_out(ctx, PADDED_ROWS, 1)
        rows += padding_rows(o.label, o.round, ctx.pair, trace, QUICK_REPEATS if quick else REPEATS)
    append_csv(path, rows)
    table = path.with_suffix(".md")
    table.write_text(render(path) + "\n")
    notes = [f"{len(rows)} rows appended to {path}; the medians of every round: {table}."]
    return PartResult(NAME, "The cost of one forward: operators per layer, host time, the step", rows, [], [], notes)
