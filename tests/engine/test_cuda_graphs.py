"""Decode and verify forwards as CUDA graphs: the bucketing, replay on fixed buffers, and every fall-through to eager.

The CUDA calls are faked (``tests/support/fake_graphs.py``): a capture runs the
forward once refusing host reads, a replay runs it again on the same buffers.
"""

from dataclasses import replace

import pytest
import torch

from engine.config import ControllerConfig, EngineConfig, SamplingParams, StepChoice
from engine.gpu.graph_plan import MAX_SPAN, Eager, GraphKey, graph_plan
from engine.gpu.graph_runner import CAPTURED, RECAPTURE, REPLAYED, GraphRunner, graph_stats, with_cuda_graphs
from engine.kv import BLOCK_TOKENS
from engine.request import Request
from engine.runner import Stage
from engine.schedulers.registry import make_engine
from tests.support.fake_cuda import fake_cuda, on_fake  # noqa: F401 - fake_cuda is a fixture
from tests.support.fake_graphs import FakeGraphs, HostReadDuringCapture

PROMPTS = ["hello world", "a", "the quick brown fox", "abc abc abc abc", "0123456789", "q"]
CONFIG = EngineConfig(
    drafter="model", controller=ControllerConfig(kind="fixed", draft_len=3), step_choice=StepChoice.COUNT
)


def outputs(pair, engine: str, max_new: int = 10, config: EngineConfig = CONFIG) -> list[list[int]]:
    requests = [
        Request(f"g{i}", pair.encode_prompt(p), SamplingParams(max_new_tokens=max_new, stop_token_ids=()))
        for i, p in enumerate(PROMPTS)
    ]
    eng = make_engine(engine, pair, config)
    try:
        eng.generate(requests, timeout=60)
    finally:
        eng.stop()
    return [r.output_token_ids for r in requests]


@pytest.fixture(scope="module")
def reference(tiny_pair):
    return outputs(tiny_pair, "ar")


def test_decode_and_verify_steps_get_a_bucket_of_padded_rows_and_span():
    assert graph_plan([1, 1, 1], [40, 41, 300], Stage.DRAFT, True) == GraphKey(rows=4, tokens=1, span=512)
    assert graph_plan([4] * 8, [100] * 8, Stage.VERIFY, True) == GraphKey(rows=8, tokens=4, span=256)
    assert graph_plan([2] * 33, [10] * 33, Stage.VERIFY, True) == GraphKey(rows=64, tokens=2, span=256)


@pytest.mark.parametrize(
    ("tokens", "ends", "stage", "cuda", "reason"),
    [
        ([1, 1], [5, 5], Stage.DRAFT, False, Eager.NO_CUDA),
        ([7, 3], [7, 3], Stage.PREFILL, True, Eager.PREFILL),
        ([1], [5], None, True, Eager.PREFILL),
        ([1, 2], [5, 6], Stage.DRAFT, True, Eager.RAGGED),
        ([1] * 65, [5] * 65, Stage.VERIFY, True, Eager.TOO_MANY_ROWS),
        ([18], [50], Stage.VERIFY, True, Eager.TOO_MANY_TOKENS),
        ([1], [MAX_SPAN + 1], Stage.DRAFT, True, Eager.TOO_LONG),
    ],
)
def test_other_forwards_run_eagerly_with_their_reason(tokens, ends, stage, cuda, reason):
    assert graph_plan(tokens, ends, stage, cuda) is reason


@pytest.mark.parametrize("engine", ["ar", "baseline", "pd", "pdv"])
def test_replayed_graphs_give_every_engine_the_outputs_of_eager_ar(tiny_pair, reference, engine):
    graphs = FakeGraphs()
    pair = with_cuda_graphs(tiny_pair, graphs)
    assert outputs(pair, engine) == reference
    stats = graph_stats(pair)
    verifier = stats["verifier"].choices
    assert verifier.get(REPLAYED, 0) > 0 and verifier.get(CAPTURED, 0) == len(stats["verifier"].buckets) > 0
    assert verifier.get(Eager.PREFILL.value, 0) > 0  # prefill chunks never replay
    assert sum(g.replays for g in graphs.captured) == verifier[REPLAYED] + stats["draft"].choices.get(REPLAYED, 0)
    if engine != "ar":
        assert stats["draft"].choices.get(REPLAYED, 0) > 0


def test_on_the_cpu_the_same_runner_runs_every_forward_eagerly(tiny_pair, reference):
    pair = with_cuda_graphs(tiny_pair)  # no backend given: the device's, which is none on the CPU
    assert outputs(pair, "baseline") == reference
    for stats in graph_stats(pair).values():
        assert set(stats.choices) == {Eager.NO_CUDA.value} and stats.buckets == ()


def test_a_bucket_whose_capture_fails_runs_eagerly_and_says_why(tiny_pair, reference):
    pair = with_cuda_graphs(tiny_pair, FakeGraphs(fail=True))
    assert outputs(pair, "baseline") == reference
    verifier = graph_stats(pair)["verifier"]
    assert REPLAYED not in verifier.choices and verifier.choices[Eager.CAPTURE_FAILED.value] > 0
    assert verifier.failed and all("capture refused" in why for why in verifier.failed.values())


def test_a_replay_matches_the_eager_forward_on_padded_rows(tiny_pair):
    runner = GraphRunner(tiny_pair.verifier, FakeGraphs())
    gen = torch.Generator().manual_seed(0)
    for rows in (3, 5):  # 3 and 5 rows: buckets of 4 and 8, one padding row and three
        plain = [tiny_pair.verifier.new_store(64) for _ in range(rows)]
        graphed = [runner.new_store(64) for _ in range(rows)]
        context = torch.randint(0, 256, (rows * 9,), generator=gen)
        keep = torch.arange(rows)
        for stores, model in ((plain, tiny_pair.verifier), (graphed, runner)):
            model.forward(stores, context, [9] * rows, keep, Stage.PREFILL)
        for _ in range(3):  # a capture, then replays
            ids = torch.randint(0, 256, (rows * 2,), generator=gen)
            want = tiny_pair.verifier.forward(plain, ids, [2] * rows, torch.arange(2 * rows), Stage.VERIFY)
            got = runner.forward(graphed, ids, [2] * rows, torch.arange(2 * rows), Stage.VERIFY)
            torch.testing.assert_close(got, want, atol=1e-4, rtol=1e-4)
    assert runner.graph_stats().choices[REPLAYED] == 4


def test_graphs_are_captured_again_once_the_kv_pool_grows(tiny_pair):
    runner = GraphRunner(tiny_pair.verifier, FakeGraphs())
    keep = torch.arange(1)
    store = runner.new_store(32)
    runner.forward([store], torch.tensor([1, 2]), [2], keep, Stage.PREFILL)
    for token in (3, 4):
        runner.forward([store], torch.tensor([token]), [1], keep, Stage.DRAFT)
    big = runner.new_store((runner.pool.free_blocks + 1) * BLOCK_TOKENS)  # more blocks than are free: it grows
    runner.forward([store], torch.tensor([5]), [1], keep, Stage.DRAFT)
    choices = runner.graph_stats().choices
    assert choices[RECAPTURE] == 1 and choices[CAPTURED] == 2 and choices[REPLAYED] == 1
    del big


@pytest.mark.parametrize("engine", ["pd", "pdv"])
def test_replays_on_lanes_at_once_are_ordered(tiny_pair, reference, fake_cuda, monkeypatch, engine):  # noqa: F811
    on_fake(tiny_pair, fake_cuda, monkeypatch)
    pair = with_cuda_graphs(tiny_pair, FakeGraphs())
    at_once = replace(CONFIG, hybrid_threshold=None, concurrent_lanes=3)  # every lane on the device at once
    assert outputs(pair, engine, config=at_once) == reference
    assert graph_stats(pair)["verifier"].choices.get(REPLAYED, 0) > 0
    assert fake_cuda.findings == []


X = torch.arange(5)


@pytest.mark.parametrize(
    "capture",
    [
        lambda: X.sum().item(),
        lambda: bool(X.sum()),
        lambda: X.nonzero(),
        lambda: X[X > 2],
        lambda: X.repeat_interleave(X),
    ],
)
def test_the_fake_capture_refuses_what_a_cuda_capture_cannot_record(capture):
    with pytest.raises(HostReadDuringCapture):
        FakeGraphs().capture(capture, None)


def test_the_fake_capture_records_what_a_cuda_capture_can():
    graph = FakeGraphs().capture(lambda: (X[torch.tensor([1, 2])], X.repeat_interleave(X, output_size=10)), None)
    graph.replay()
    assert graph.replays == 1
