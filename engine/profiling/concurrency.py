"""Timing forwards of lanes that run at once: each lane a Python thread with its own intra-op budget.

A *lane* here is one runner repeating one forward shape (``rows`` requests
with ``tokens`` new tokens each over ``CONTEXT`` cached tokens) on its own
thread. ``run_lanes`` starts every lane's thread, releases them together,
stops them after a time (each lane does at least ``min_forwards``), and
keeps only the forwards that ran entirely while every lane was still
running: a lane that goes on alone at the end would flatter the figures.

Each lane needs its own runner (``lane_runner``): ``ModelRunner.forward``
holds its KV pool's lock for the whole forward, so two lanes on one runner
take turns whatever their thread budgets. A lane runner shares the model's
weights and has its own pool.

On CUDA each lane runs on its own stream and waits for it after every
forward (not run on a GPU yet).
"""

from __future__ import annotations

import statistics
import threading
import time
from contextlib import nullcontext
from typing import NamedTuple

import torch

from engine.kv import KVStore
from engine.profiling.lane_threads import restore_process_threads, use_intra_op_threads
from engine.runner import ModelRunner

CONTEXT = 128  # tokens already in each row's cache while timing: a short chat prompt


class PreparedForward(NamedTuple):
    """One forward shape, ready to repeat: stores holding ``CONTEXT`` tokens and the new tokens to feed them."""

    stores: list[KVStore]  # one per row
    input_ids: torch.Tensor  # [rows * tokens] long, on the runner's device
    keep: torch.Tensor  # [rows * tokens] long: every position's logits, as a verify step keeps
    rows: int
    tokens: int  # new tokens per row


class Lane(NamedTuple):
    runner: ModelRunner
    forward: PreparedForward
    threads: int  # the lane thread's intra-op budget


class LaneTimes(NamedTuple):
    """Seconds of each forward one lane ran while every lane was running."""

    durations: list[float]

    @property
    def rate(self) -> float:
        """Forwards per second: the forwards' count over their summed time (they run back to back)."""
        return len(self.durations) / sum(self.durations)

    @property
    def median_s(self) -> float:
        return statistics.median(self.durations)


def lane_runner(runner: ModelRunner, name: str) -> ModelRunner:
    """A runner over ``runner``'s weights with its own KV pool, so its forwards need not wait for ``runner``'s."""
    return ModelRunner(runner.model, name)


def prepare_forward(runner: ModelRunner, rows: int, tokens: int, seed: int = 0) -> PreparedForward:
    """Stores of ``rows`` requests prefilled with ``CONTEXT`` random tokens each, and ``tokens`` more per row."""
    gen = torch.Generator().manual_seed(seed)
    stores = [runner.new_store(CONTEXT + tokens) for _ in range(rows)]
    context = torch.randint(0, runner.vocab_size, (rows * CONTEXT,), generator=gen).to(runner.device)
    runner.forward(stores, context, [CONTEXT] * rows, torch.tensor([CONTEXT - 1], device=runner.device))
    ids = torch.randint(0, runner.vocab_size, (rows * tokens,), generator=gen).to(runner.device)
    return PreparedForward(stores, ids, torch.arange(rows * tokens, device=runner.device), rows, tokens)


def run_forward(runner: ModelRunner, prepared: PreparedForward) -> None:
    """One forward of ``prepared``'s shape; the stores are truncated back to ``CONTEXT`` after it."""
    runner.forward(prepared.stores, prepared.input_ids, [prepared.tokens] * prepared.rows, prepared.keep)
    if runner.device.type == "cuda":
        torch.cuda.current_stream(runner.device).synchronize()
    for store in prepared.stores:
        store.truncate(CONTEXT)


def run_lanes(lanes: list[Lane], seconds: float, min_forwards: int = 3) -> list[LaneTimes]:
    """Run every lane's forward over and over at once for about ``seconds`` (longer until every lane has done
    ``min_forwards``); each lane's forwards that ran while all lanes were running.

    Each lane warms up with one forward on its own thread (a new thread count builds new kernels) before the
    common start. Torch's process-wide thread count is put back afterwards. An error in a lane is raised here.
    """
    if not lanes:
        raise ValueError("no lane to run")
    if min_forwards < 2:  # with one, a lane's only forward may end after the window closed and leave it no time
        raise ValueError(f"each lane needs at least 2 forwards to be timed, got {min_forwards}")
    total = torch.get_num_threads()
    start = threading.Barrier(len(lanes) + 1)
    stop = threading.Event()
    spans: list[list[tuple[float, float]]] = [[] for _ in lanes]
    errors: list[BaseException] = []

    def finished() -> bool:
        # every lane goes on until all have done min_forwards, so each has forwards inside the common window
        return stop.is_set() and (bool(errors) or all(len(done) >= min_forwards for done in spans))

    def work(lane: Lane, out: list[tuple[float, float]]) -> None:
        try:
            use_intra_op_threads(lane.threads)
            cuda = lane.runner.device.type == "cuda"
            with torch.cuda.stream(torch.cuda.Stream(lane.runner.device)) if cuda else nullcontext():
                run_forward(lane.runner, lane.forward)
                start.wait()
                while not finished():
                    began = time.perf_counter()
                    run_forward(lane.runner, lane.forward)
                    out.append((began, time.perf_counter()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread, which raises it
            errors.append(exc)
            start.abort()

    workers = [
        threading.Thread(target=work, args=(lane, out), daemon=True) for lane, out in zip(lanes, spans, strict=True)
    ]
    try:
        for t in workers:
            t.start()
        try:
            start.wait()
        except threading.BrokenBarrierError:
            pass  # a lane failed before the start; its error is raised below
        stop.wait(seconds)
        stop.set()
        for t in workers:
            t.join()
    finally:
        stop.set()
        restore_process_threads(total)
    if errors:
        raise errors[0]
    return overlapping(spans)


def overlapping(spans: list[list[tuple[float, float]]]) -> list[LaneTimes]:
    """Each lane's forward durations that ended before the first lane's last forward ended (while all ran)."""
    end = min(lane[-1][1] for lane in spans)
    return [LaneTimes([e - b for b, e in lane if e <= end]) for lane in spans]
