"""Part 5, against the hardware: the verifier's decode step against this machine's measured peaks.

In the same run it measures (torch, the engine's thread count):

* matmul throughput – a float32 n x n matmul, FLOP/s = 2 n^3 / time;
* memory bandwidth – summing a tensor far larger than the caches, bytes/s =
  size / time: a read stream, as a decode step reads its weights;
* the verifier's decode step – one forward of one new token per row over KV
  stores of ``CONTEXT`` tokens, at C = 1 and C = 32, timed by the cost profile's
  own measurement (``engine.profiling.measure.measure``).

Achieved FLOP/s of a step ≈ 2 · parameters · tokens / time (attention's own
FLOPs, small at this context, are left out); bytes/s ≈ (weights + the KV read)
/ time, with the KV read = rows · context · layers · 2 · kv heads · head dim ·
bytes per value. Each figure is a median over rounds.
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass
from typing import NamedTuple

import torch

from engine.profiling.cost_profile import ProfileShape
from engine.profiling.measure import CONTEXT, measure
from workloads.bench.common import BenchContext, PartResult
from workloads.bench.rows import Row, Summary

NAME = "5-hardware"
BATCHES = (1, 32)


class ProbeSizes(NamedTuple):
    """How big the machine's probes are: large enough to reach its peaks, or (--quick) just to run."""

    matmul_n: int
    read_bytes: int  # far larger than the caches, so the sum streams from memory
    repeats: int


@dataclass(frozen=True, kw_only=True)
class HardwareRow(Row):
    """A machine probe (``flop_s`` or ``bytes_s`` alone) or the verifier's step at one batch (every field)."""

    step_ms: float | None = None
    flop_s: float | None = None
    bytes_s: float | None = None
    flop_share: float | None = None  # of the matmul probe's FLOP/s, in the same round
    bytes_share: float | None = None  # of the read probe's bytes/s


FULL = ProbeSizes(2048, 1024 * 2**20, 5)
QUICK = ProbeSizes(256, 16 * 2**20, 2)


def _median_time(fn, repeats: int) -> float:
    fn()  # warm-up
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def matmul_flops(sizes: ProbeSizes = FULL) -> float:
    n = sizes.matmul_n
    a, b = torch.randn(n, n), torch.randn(n, n)
    return 2 * n**3 / _median_time(lambda: torch.mm(a, b), sizes.repeats)


def read_bandwidth(sizes: ProbeSizes = FULL) -> float:
    src = torch.ones(sizes.read_bytes // 4)
    return sizes.read_bytes / _median_time(lambda: src.sum(), sizes.repeats)


def kv_bytes(model, rows: int, context: int, element_size: int) -> int:
    c = model.config
    heads = getattr(c, "num_key_value_heads", None) or c.num_attention_heads
    head_dim = getattr(c, "head_dim", None) or c.hidden_size // c.num_attention_heads
    return rows * context * c.num_hidden_layers * 2 * heads * head_dim * element_size


def run(ctx: BenchContext) -> PartResult:
    verifier = ctx.pair.verifier
    params = sum(p.numel() for p in verifier.model.parameters())
    weights = sum(p.numel() * p.element_size() for p in verifier.model.parameters())
    element = torch.empty((), dtype=verifier.dtype).element_size()
    rows: list[HardwareRow] = []
    sizes = QUICK if ctx.settings.quick else FULL
    for round_ in range(ctx.settings.rounds):
        peak_flops, bandwidth = matmul_flops(sizes), read_bandwidth(sizes)
        profile = measure(ctx.pair, ProfileShape(max(BATCHES), 1, with_draft=False))
        rows.append(HardwareRow(group="machine", round=round_, label="matmul", flop_s=peak_flops))
        rows.append(HardwareRow(group="machine", round=round_, label="memory read", bytes_s=bandwidth))
        for batch in BATCHES:
            step_s = profile.verify_s(batch, 1)
            flop_s = 2 * params * batch / step_s
            bytes_s = (weights + kv_bytes(verifier.model, batch, CONTEXT, element)) / step_s
            rows.append(
                HardwareRow(group=f"C={batch}", round=round_, label="verifier step", step_ms=step_s * 1000,
                            flop_s=flop_s, bytes_s=bytes_s, flop_share=flop_s / peak_flops,
                            bytes_share=bytes_s / bandwidth)
            )  # fmt: skip
    summary = []
    for key in ("step_ms", "flop_s", "bytes_s", "flop_share", "bytes_share"):
        for group in dict.fromkeys(r.group for r in rows):
            measured = [r for r in rows if r.group == group and getattr(r, key) is not None]
            if measured:
                values = [getattr(r, key) for r in measured]
                summary.append(
                    Summary(part=NAME, group=group, label=measured[0].label, metric=key, reference="",
                            median=statistics.median(values), min=min(values), max=max(values), ratio=None,
                            rounds=len(values))
                )  # fmt: skip
    notes = []
    for batch in BATCHES:
        f = next(s for s in summary if s.group == f"C={batch}" and s.metric == "flop_share")
        b = next(s for s in summary if s.group == f"C={batch}" and s.metric == "bytes_share")
        bound = "memory" if b.median > f.median else "compute"
        notes.append(
            f"C = {batch}: the verifier step reaches {f.median:.0%} of the measured matmul FLOP/s and "
            f"{b.median:.0%} of the measured read bandwidth: closer to the {bound} limit."
        )
    notes.append(
        f"Verifier: {params / 1e6:.1f} M parameters, {weights / 2**20:.0f} MiB of weights; KV context {CONTEXT} tokens."
    )
    return PartResult(NAME, "Against the hardware: the verifier step at C = 1 and C = 32", rows, summary, [], notes)
