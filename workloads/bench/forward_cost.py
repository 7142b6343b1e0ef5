"""What one packed forward costs the host: dispatched operators per layer and wall time.

``python -m workloads.bench.forward_cost --label L --out CSV`` measures, for the
record in docs/results.md:

* **operators per layer** – aten operators dispatched during one forward
  (counted with a ``TorchDispatchMode``), divided by the layers, on the tiny
  preset at 1, 8 and 32 rows of 1 and 5 new tokens over ``CONTEXT`` cached
  tokens. The tiny model (3 layers, hidden 64) does almost no arithmetic, so
  its forward time is the host's overhead: Python and dispatch;
* **host overhead per forward** – the median wall time of the same forwards;
* **the smol verifier step** at C = 1 and C = 32 (one new token per row) beside
  this machine's float32 matmul rate and memory read rate, measured in the same
  call (``workloads.bench.hardware``), with the share of each the step reaches
  (``--smol``; it loads SmolLM2).

Rows are appended to ``--out`` with ``--label`` (before or after a change) and
``--round``, so one CSV holds both sides of a comparison measured in
interleaved rounds (docs/results.md gives the loop that ran them).
"""

from __future__ import annotations

import argparse
import csv
import statistics
import time
from collections import Counter
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from engine.models.pair import ModelPair, load_model_pair
from engine.runner import ModelRunner

CONTEXT = 128  # cached tokens per row, as the cost profile uses
ROWS = (1, 8, 32)
TOKENS = (1, 5)
REPEATS = 15
FIELDS = ("label", "round", "preset", "rows", "tokens", "metric", "value")


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


def tiny_rows(label: str, round_: int) -> list[dict]:
    pair = load_model_pair("tiny", device="cpu")
    out = []
    for rows in ROWS:
        for tokens in TOKENS:
            ops = operators_per_layer(pair.verifier, rows, tokens)
            ms = forward_ms(pair.verifier, rows, tokens)
            common = {"label": label, "round": round_, "preset": "tiny", "rows": rows, "tokens": tokens}
            out.append({**common, "metric": "operators_per_layer", "value": round(ops, 1)})
            out.append({**common, "metric": "forward_ms", "value": round(ms, 3)})
    return out


def smol_rows(label: str, round_: int) -> list[dict]:
    """The smol verifier step at C = 1 and 32 beside the machine's matmul and read rates, measured together."""
    from workloads.bench.hardware import kv_bytes, matmul_flops, read_bandwidth

    pair: ModelPair = load_model_pair("smol", device="cpu")
    verifier = pair.verifier
    params = sum(p.numel() for p in verifier.model.parameters())
    weights = sum(p.numel() * p.element_size() for p in verifier.model.parameters())
    element = torch.empty((), dtype=verifier.dtype).element_size()
    peak, bandwidth = matmul_flops(), read_bandwidth()
    common = {"label": label, "round": round_, "preset": "smol", "tokens": 1}
    out = [
        {**common, "rows": 0, "metric": "matmul_gflop_s", "value": round(peak / 1e9, 2)},
        {**common, "rows": 0, "metric": "read_gb_s", "value": round(bandwidth / 1e9, 2)},
    ]
    for rows in (1, 32):
        ms = forward_ms(verifier, rows, 1, repeats=5)
        flop_s = 2 * params * rows / (ms / 1000)
        bytes_s = (weights + kv_bytes(verifier.model, rows, CONTEXT, element)) / (ms / 1000)
        row = {**common, "rows": rows}
        out.append({**row, "metric": "step_ms", "value": round(ms, 2)})
        out.append({**row, "metric": "matmul_share", "value": round(flop_s / peak, 3)})
        out.append({**row, "metric": "read_share", "value": round(bytes_s / bandwidth, 3)})
    return out


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


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(prog="python -m workloads.bench.forward_cost", description=__doc__.split("\n\n")[0])
    p.add_argument("--render", type=Path, help="print the markdown table of this CSV and measure nothing")
    p.add_argument("--label", help="what this measures, e.g. before or after (a CSV column)")
    p.add_argument("--out", type=Path, help="CSV to append the rows to")
    p.add_argument("--tiny", action="store_true", help="operators per layer and forward time, tiny preset")
    p.add_argument("--smol", action="store_true", help="the smol verifier step against matmul and read rates")
    p.add_argument("--round", type=int, default=0, help="the round this call is (a CSV column; rounds interleave)")
    args = p.parse_args(argv)
    if args.render:
        print(render(args.render))
        return
    if not (args.label and args.out):
        p.error("--label and --out are needed to measure")
    if not (args.tiny or args.smol):
        p.error("choose --tiny, --smol or both")
    rows = tiny_rows(args.label, args.round) if args.tiny else []
    rows += smol_rows(args.label, args.round) if args.smol else []
    append_csv(args.out, rows)
    for row in rows:
        print(f"{row['label']:8} r{row['round']} {row['preset']:5} rows={row['rows']:<3} tokens={row['tokens']} "
              f"{row['metric']:22} {row['value']}")


if __name__ == "__main__":
    main()
