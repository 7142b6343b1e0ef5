"""Every sampling parameter at its edges: refused with one message at construction, or run to the end in a batch
beside others, never raising inside a step; greedy rows stay greedy wherever they sit in a sampled batch."""

from __future__ import annotations

import pytest
import torch

from engine.config import FLOAT32_MAX, MAX_SEED, ControllerConfig, EngineConfig, SamplingParams
from engine.request import Request, RequestStatus
from engine.sampling import SamplingRows, probabilities
from engine.schedulers.admission import normalised
from engine.schedulers.registry import make_engine
from tests.support.greedy import hf_greedy

NEW_TOKENS = 8
SMALLEST_DOUBLE = 5e-324  # the smallest positive float64: 0 in float32
FIXED = ControllerConfig(kind="fixed", draft_len=3)  # speculation every step, whatever this machine measures

ACCEPTED = [
    {"temperature": 0.0},
    {"temperature": SMALLEST_DOUBLE},
    {"temperature": FLOAT32_MAX},
    {"top_p": SMALLEST_DOUBLE},
    {"top_p": 1.0},
    {"top_k": 1},
    {"top_k": 2**63},
    {"top_k": 2**200},
    {"seed": 0},
    {"seed": MAX_SEED},
    {"max_new_tokens": 1},
    {"stop_token_ids": ()},
]
REFUSED = [
    ({"temperature": -SMALLEST_DOUBLE}, "temperature must be"),
    ({"temperature": FLOAT32_MAX * 1.0001}, "temperature must be"),
    ({"temperature": float("inf")}, "temperature must be"),
    ({"temperature": float("nan")}, "temperature must be"),
    ({"temperature": True}, "temperature must be a number"),
    ({"temperature": "1"}, "temperature must be a number"),
    ({"top_p": 0.0}, "top_p must be in (0, 1]"),
    ({"top_p": 1.0000001}, "top_p must be in (0, 1]"),
    ({"top_p": float("nan")}, "top_p must be in (0, 1]"),
    ({"top_k": 0}, "top_k must be >= 1"),
    ({"top_k": -1}, "top_k must be >= 1"),
    ({"top_k": 2.5}, "top_k must be an integer"),
    ({"max_new_tokens": 0}, "max_new_tokens must be >= 1"),
    ({"max_new_tokens": 1.0}, "max_new_tokens must be an integer"),
    ({"seed": -1}, "seed must be >= 0"),
    ({"seed": MAX_SEED + 1}, "seed must be < 2**64"),
    ({"seed": 2**70}, "seed must be < 2**64"),
    ({"seed": False}, "seed must be an integer"),
    ({"stop_token_ids": (-1,)}, "stop_token_ids must be"),
]


@pytest.mark.parametrize("values", ACCEPTED, ids=lambda v: ",".join(f"{k}={v[k]!r}" for k in v))
def test_the_largest_and_smallest_accepted_values_are_accepted(values):
    assert SamplingParams(**values)


@pytest.mark.parametrize(("values", "says"), REFUSED, ids=[
    ",".join(f"{k}={v!r}" for k, v in c.items()) for c, _ in REFUSED]
)
def test_every_value_past_an_edge_is_refused_with_its_reason(values, says):
    with pytest.raises(ValueError) as refused:
        SamplingParams(**values)
    assert str(refused.value).startswith(says)


def test_a_top_k_at_or_past_the_vocabulary_is_off_and_one_below_it_stays():
    vocab = 257
    assert normalised(SamplingParams(top_k=2**63), vocab).top_k is None
    assert normalised(SamplingParams(top_k=vocab), vocab).top_k is None
    assert normalised(SamplingParams(top_k=vocab - 1), vocab).top_k == vocab - 1


@pytest.mark.parametrize("top_p", [SMALLEST_DOUBLE, 1e-320, 1e-45])
def test_a_top_p_that_is_zero_in_float32_keeps_the_top_token_alone(top_p):
    logits = torch.tensor([[0.5, 2.0, 1.0, -1.0], [3.0, 0.0, 0.0, 0.0]])
    params = [SamplingParams(temperature=1.0, top_p=top_p), SamplingParams(temperature=0.7)]
    probs = probabilities(logits, SamplingRows.build(params, [None, None], torch.device("cpu")))
    assert probs[0].tolist() == [0.0, 1.0, 0.0, 0.0]  # one-hot on the argmax: what greedy decoding picks
    assert torch.allclose(probs[1], torch.softmax(logits[1] / 0.7, -1))  # its batchmate untouched


def _run(pair, engine: str, requests: list[Request]) -> list[Request]:
    config = EngineConfig(controller=FIXED, drafter="model", hybrid_threshold=None)
    eng = make_engine(engine, pair, config)
    for request in requests:  # queued before the engine starts, so they share their batches
        eng.submit(request)
    try:
        eng.start()
        assert all(r.done.wait(120) for r in requests)
        stats = eng.stats()
    finally:
        eng.stop()
    assert stats.accounting_problem() is None and eng.fatal_error is None
    return requests


@pytest.mark.parametrize("engine", ["ar", "baseline", "pd", "pdv"])
def test_edge_values_run_in_one_batch_and_the_greedy_equivalent_ones_match_the_verifier(tiny_pair, engine):
    edges = [
        {"temperature": 1.0, "top_k": 2**63},
        {"temperature": 1.0, "top_k": tiny_pair.verifier.vocab_size},
        {"temperature": 1.0, "top_p": 1e-320, "seed": 2**64 - 1},  # greedy-equivalent
        {"temperature": 1.0, "top_k": 1, "seed": 0},  # greedy-equivalent
        {"temperature": FLOAT32_MAX, "top_p": 1.0},
        {"temperature": SMALLEST_DOUBLE},
        {"temperature": 0.0},
    ]
    prompts = [[3 + i, 7, 11, 5 + i, 9] for i in range(len(edges))]
    requests = [
        Request(f"edge-{i}", prompt, SamplingParams(max_new_tokens=NEW_TOKENS, stop_token_ids=(), **values))
        for i, (prompt, values) in enumerate(zip(prompts, edges, strict=True))
    ]
    _run(tiny_pair, engine, requests)
    for r, values in zip(requests, edges, strict=True):
        assert r.status == RequestStatus.OK, (values, r.error)
        assert len(r.output_token_ids) == NEW_TOKENS
    assert requests[0].params.top_k is None and requests[1].params.top_k is None  # off, as at the vocabulary
    for r in requests[2:4] + requests[6:]:
        assert r.output_token_ids == hf_greedy(tiny_pair.verifier.model, r.prompt_token_ids, NEW_TOKENS), r.params


@pytest.mark.parametrize("engine", ["baseline", "pdv"])
@pytest.mark.parametrize("position", [0, 1, 2, 3])
def test_a_greedy_row_anywhere_in_a_sampled_batch_matches_the_verifier(tiny_pair, engine, position):
    sampled = SamplingParams(temperature=1.0, top_p=0.95, top_k=40, max_new_tokens=NEW_TOKENS, stop_token_ids=())
    greedy = SamplingParams(max_new_tokens=NEW_TOKENS, stop_token_ids=())
    requests = [
        Request(f"r{i}", [4 + i, 9, 12, 6 + i], greedy if i == position else sampled) for i in range(4)
    ]
    _run(tiny_pair, engine, requests)
    assert all(r.status == RequestStatus.OK for r in requests)
    row = requests[position]
    assert row.output_token_ids == hf_greedy(tiny_pair.verifier.model, row.prompt_token_ids, NEW_TOKENS)
