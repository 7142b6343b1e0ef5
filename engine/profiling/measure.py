"""Timing real forwards over real KV stores holding ``CONTEXT`` tokens, on a grid of batch sizes and tokens per row.

Progress goes to a ``ProgressFn`` after every grid point, with the time left
estimated from the points done so far (a forward's cost grows with the tokens
it computes, ``batch x tokens``, on top of a fixed per-forward part).
``measure_interference`` times, at a few of those shapes, how much two lanes
running at once slow each other (``interference.Interference``).
"""

from __future__ import annotations

import os
import time

import torch

from engine.devices import cpu_name
from engine.models.pair import ModelPair
from engine.profiling.concurrency import CONTEXT, Lane, lane_runner, prepare_forward, run_lanes
from engine.profiling.cost_profile import CostProfile, ProfileShape
from engine.profiling.interference import Interference
from engine.profiling.lane_threads import lane_budget
from engine.progress import ProgressFn, no_progress
from engine.runner import ModelRunner

REPEATS = 3  # timings per point; the median is kept
BATCH_SIZES = (1, 2, 4, 8, 16, 32, 64)
TOKENS = (1, 2, 3, 5, 9, 17)  # tokens per row in one verifier forward (L + 1)
FIXED_WEIGHT = 8  # a forward's fixed part, in tokens' worth of work: only weights the progress estimate
MEASURING = "Measuring this machine's step costs, once"
# the few shapes two lanes at once are timed at (below the grid's bounds, and the bounds): one and a few rows,
# one token per row as a decode or draft step, the most a verify step feeds
INTERFERENCE_ROWS = (1, 8)
INTERFERENCE_SECONDS = 0.2  # per shape and setting (longer until each lane did INTERFERENCE_FORWARDS)
INTERFERENCE_FORWARDS = 3


class _Progress:
    """Turns finished grid points into a fraction and an estimate of the seconds left."""

    def __init__(self, points: list[tuple[int, int]], report: ProgressFn) -> None:
        self.total = sum(_weight(b, t) for b, t in points)
        self.done = 0.0
        self.report = report
        self.start = time.perf_counter()
        report(MEASURING, 0.0)

    def point(self, batch: int, tokens: int) -> None:
        self.done += _weight(batch, tokens)
        fraction = self.done / self.total
        left = (time.perf_counter() - self.start) * (1 - fraction) / fraction
        self.report(f"{MEASURING} (about {left:.0f} s left)", min(fraction, 1.0))


def _weight(batch: int, tokens: int) -> float:
    return REPEATS * (FIXED_WEIGHT + batch * tokens)


def _time_forwards(
    runner: ModelRunner, batch: int, tokens: tuple[int, ...], progress: _Progress | None
) -> tuple[float, ...]:
    """Median milliseconds of one forward of t new tokens on each of ``batch`` rows, for each t in ``tokens``."""
    stores = [runner.new_store(CONTEXT + max(tokens)) for _ in range(batch)]
    gen = torch.Generator().manual_seed(0)
    context = torch.randint(0, runner.vocab_size, (batch * CONTEXT,), generator=gen).to(runner.device)
    runner.forward(stores, context, [CONTEXT] * batch, torch.tensor([CONTEXT - 1], device=runner.device))
    medians = []
    for t in tokens:
        times = []
        for _ in range(REPEATS):
            ids = torch.randint(0, runner.vocab_size, (batch * t,), generator=gen).to(runner.device)
            start = time.perf_counter()
            runner.forward(stores, ids, [t] * batch, torch.arange(batch * t, device=runner.device))
            if runner.device.type == "cuda":
                torch.cuda.synchronize(runner.device)
            times.append(time.perf_counter() - start)
            for store in stores:
                store.truncate(CONTEXT)
        medians.append(sorted(times)[len(times) // 2] * 1000)
        if progress is not None:
            progress.point(batch, t)
    return tuple(medians)


def grid(shape: ProfileShape) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(batch sizes, tokens per row) measured for ``shape``: the standard points below its bounds, and the bounds."""
    batches = tuple(b for b in BATCH_SIZES if b < shape.max_batch) + (shape.max_batch,)
    tokens = tuple(t for t in TOKENS if t < shape.max_tokens) + (shape.max_tokens,)
    return batches, tokens


def measure(pair: ModelPair, shape: ProfileShape, progress: ProgressFn = no_progress) -> CostProfile:
    """Time the verifier (and the draft, if ``shape.with_draft``) on ``shape``'s grid."""
    batches, tokens = grid(shape)
    points = [(b, t) for b in batches for t in tokens] + ([(b, 1) for b in batches] if shape.with_draft else [])
    tracker = _Progress(points, progress)
    verify = tuple(_time_forwards(pair.verifier, b, tokens, tracker) for b in batches)
    draft = tuple(_time_forwards(pair.draft, b, (1,), tracker)[0] for b in batches) if shape.with_draft else ()
    return CostProfile(batches, tokens, verify, draft, machine_key(pair))


def measure_interference(pair: ModelPair, shape: ProfileShape, progress: ProgressFn = no_progress) -> Interference:
    """Time verifier forwards alone with every thread, alone on one lane's budget, and with a second lane running
    the same shape at once (``interference.Interference``), at a few shapes within ``shape``'s bounds."""
    rows = tuple(r for r in INTERFERENCE_ROWS if r < shape.max_batch) + (shape.max_batch,)
    tokens = (1, shape.max_tokens) if shape.max_tokens > 1 else (1,)
    threads = torch.get_num_threads()
    budget = lane_budget(threads, 2)
    first, second = pair.verifier, lane_runner(pair.verifier, f"{pair.verifier.name} (second lane)")
    alone, lane_alone, together = [], [], []
    progress(f"{MEASURING}: two lanes at once", 0.0)
    began = time.perf_counter()
    for i, r in enumerate(rows):
        cells = ([], [], [])
        for t in tokens:
            a, b = prepare_forward(first, r, t, seed=0), prepare_forward(second, r, t, seed=1)
            cells[0].append(_median_ms([Lane(first, a, threads)]))
            cells[1].append(_median_ms([Lane(first, a, budget)]))
            cells[2].append(_median_ms([Lane(first, a, budget), Lane(second, b, budget)]))
        for table, row in zip((alone, lane_alone, together), cells, strict=True):
            table.append(tuple(row))
        done = (i + 1) / len(rows)
        left = (time.perf_counter() - began) * (1 - done) / done
        progress(f"{MEASURING}: two lanes at once (about {left:.0f} s left)", done)
    return Interference(rows, tokens, budget, tuple(alone), tuple(lane_alone), tuple(together))


def _median_ms(lanes: list[Lane]) -> float:
    """The median milliseconds of one forward over every lane's forwards that ran while all lanes ran."""
    times = [d for lane in run_lanes(lanes, INTERFERENCE_SECONDS, INTERFERENCE_FORWARDS) for d in lane.durations]
    return sorted(times)[len(times) // 2] * 1000


def machine_key(pair: ModelPair) -> dict[str, str]:
    """What a profile's times depend on besides its grid: a cached profile is reused only where all of it matches."""
    return {
        "cpu": cpu_name(),
        "device": str(pair.device),
        "torch": torch.__version__,
        "threads": str(torch.get_num_threads()),
        "verifier": str(pair.source.get("verifier", "")),
        "draft": str(pair.source.get("draft", "")),
        "preset": str(pair.source.get("preset", "")),
        "dtype": f"{pair.verifier.dtype}/{pair.draft.dtype}",
        "openmp_wait": "/".join(os.environ.get(name, "") for name in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")),
    }
