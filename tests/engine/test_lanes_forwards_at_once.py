"""Forwards of one model on two lanes run at once, and give what they give one after another.

The KV pool's tensors are held shared by forwards and exclusive by growth (``engine.shared_lock``): two lanes'
forwards on disjoint stores overlap, growth waits for running forwards, and the outputs never change.
"""

import threading
import time

import pytest
import torch
from torch import nn

from engine.kv import BLOCK_TOKENS, FIRST_POOL_BLOCKS
from engine.profiling.lane_threads import use_intra_op_threads
from engine.runner import ModelRunner
from engine.shared_lock import SharedExclusiveLock

WAIT_S = 30  # generous: only reached when something is wrong


def wait_until(condition, what: str) -> None:
    """Poll ``condition`` until it holds (an ordering is awaited, never slept for); fail after WAIT_S."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting until {what}")
        time.sleep(0.001)


def lane_script(seed: int, rows: int = 3, steps: int = 10) -> list[list[list[int]]]:
    """One lane's forwards: a prompt per row, then ``steps`` forwards of 1-3 new tokens per row."""
    gen = torch.Generator().manual_seed(seed)
    prompt = [torch.randint(0, 256, (int(torch.randint(4, 30, (1,), generator=gen)),), generator=gen).tolist()
              for _ in range(rows)]
    script = [prompt]
    for _ in range(steps):
        script.append([torch.randint(0, 256, (int(torch.randint(1, 4, (1,), generator=gen)),), generator=gen)
                       .tolist() for _ in range(rows)])
    return script


def run_script(runner: ModelRunner, script: list[list[list[int]]]) -> list[torch.Tensor]:
    """Every forward of ``script`` on fresh stores of ``runner``; the logits of each, in order."""
    stores = [runner.new_store(128) for _ in script[0]]
    out = []
    for tokens in script:
        ids = torch.tensor([t for row in tokens for t in row])
        out.append(runner.forward(stores, ids, [len(row) for row in tokens], torch.arange(ids.shape[0])))
    return out


def on_lane_threads(jobs: list) -> list:
    """Run each job on its own one-core thread at once; their results in order (re-raises a job's error)."""
    results: list = [None] * len(jobs)
    errors: list[BaseException] = []

    def run(i, job):
        use_intra_op_threads(1)  # one core per lane, as with --lane-compute at-once
        try:
            with torch.inference_mode():
                results[i] = job()
        except BaseException as error:  # noqa: BLE001 - handed to the test thread
            errors.append(error)

    threads = [threading.Thread(target=run, args=(i, job)) for i, job in enumerate(jobs)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(WAIT_S * 4)
    assert not any(t.is_alive() for t in threads), "a lane thread hung"
    if errors:
        raise errors[0]
    return results


class Gate(nn.Module):
    """Wraps a model: each forward calls ``before()`` first (a barrier or an event the test controls)."""

    def __init__(self, model: nn.Module, before) -> None:
        super().__init__()
        self.inner, self.before = model, before

    def forward(self, **kwargs):
        self.before()
        return self.inner(**kwargs)


@pytest.fixture
def runner(tiny_pair) -> ModelRunner:
    return ModelRunner(tiny_pair.verifier.model, "lanes")  # its own pool: growth here touches no other test


def test_two_lanes_forwards_at_once_equal_the_same_forwards_one_after_another(runner):
    scripts = [lane_script(1), lane_script(2)]
    # the reference on one-core threads too, one lane after the other: same kernels, same thread counts
    alone = [on_lane_threads([lambda s=s: run_script(runner, s)])[0] for s in scripts]
    for _ in range(20):
        together = on_lane_threads([lambda s=s: run_script(runner, s) for s in scripts])
        for got, want in zip(together, alone, strict=True):
            assert all(torch.equal(g, w) for g, w in zip(got, want, strict=True))


def test_forwards_on_two_lanes_overlap(runner):
    both_inside = threading.Barrier(2, timeout=WAIT_S)  # breaks unless both lanes are inside a forward at once
    model = runner.model
    runner.model = Gate(model, both_inside.wait)
    try:
        on_lane_threads([lambda s=s: run_script(runner, s[:1]) for s in (lane_script(3), lane_script(4))])
    finally:
        runner.model = model


def test_growth_waits_for_a_running_forward_and_loses_nothing(runner):
    script = lane_script(5)
    want = on_lane_threads([lambda: run_script(runner, script)])[0]
    inside, go = threading.Event(), threading.Event()

    def held_forward():
        inside.set()
        assert go.wait(WAIT_S)

    model = runner.model
    blocks = runner.pool.num_blocks
    grown = []
    runner.model = Gate(model, held_forward)
    try:
        lane = threading.Thread(target=lambda: on_lane_threads([lambda: run_script(runner, script[:1])]))
        lane.start()
        assert inside.wait(WAIT_S)
        admission = threading.Thread(target=lambda: grown.append(runner.new_store(FIRST_POOL_BLOCKS * BLOCK_TOKENS)))
        admission.start()
        wait_until(lambda: runner.pool.tensors._writers_waiting == 1, "growth waits for the forward")
        assert not grown and runner.pool.num_blocks == blocks  # growth has not swapped the tensors mid-forward
        go.set()
        lane.join(WAIT_S)
        admission.join(WAIT_S)
    finally:
        go.set()
        runner.model = model
    assert grown and runner.pool.num_blocks > blocks
    # growth between and during other lanes' forwards changes nothing they compute
    for _ in range(3):
        jobs = [lambda: run_script(runner, script), lambda: [runner.new_store(runner.pool.num_blocks * BLOCK_TOKENS)]]
        assert all(torch.equal(g, w) for g, w in zip(on_lane_threads(jobs)[0], want, strict=True))


def test_a_writer_waits_for_shared_holders_and_goes_before_later_ones():
    lock = SharedExclusiveLock()
    order: list[str] = []
    release = threading.Event()

    def writer():
        with lock.exclusive():
            order.append("writer")
            assert release.wait(WAIT_S)

    def reader():
        with lock.shared():
            order.append("reader")

    threads = [threading.Thread(target=writer, daemon=True), threading.Thread(target=reader, daemon=True)]
    with lock.shared():
        threads[0].start()
        wait_until(lambda: lock._writers_waiting == 1, "the writer waits")
        with lock.shared():  # a re-entry by a holder does not wait behind the writer (it would deadlock)
            pass
        threads[1].start()  # arrives while the writer waits: it goes after the writer
        assert order == []
    wait_until(lambda: order, "the writer holds the lock")
    assert order == ["writer"]
    release.set()
    for t in threads:
        t.join(WAIT_S)
    assert order == ["writer", "reader"]


def test_a_shared_holder_asking_for_exclusive_gets_an_error_not_a_deadlock():
    lock = SharedExclusiveLock()
    with lock.shared(), pytest.raises(RuntimeError, match="cannot take it exclusive"), lock.exclusive():
        pass
    with lock.exclusive():  # and the lock is left usable
        pass
