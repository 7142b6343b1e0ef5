"""Greedy outputs of every engine equal the verifier's own greedy decoding."""

from dataclasses import replace

import pytest
import torch
from transformers import LlamaForCausalLM

from engine.config import ControllerConfig, EngineConfig, LaneCompute, SamplingParams, StepChoice
from engine.draft_source import SourceKind
from engine.request import Request
from engine.runner import ModelRunner
from engine.schedulers.registry import make_engine
from tests.support.greedy import hf_greedy
from tests.support.pdv_modes import count_modes
from tests.support.runners import counting
from tests.support.serve import wait_until

PROMPTS = [
    "hello world",
    "a",
    "the quick brown fox jumps over",
    "xyz" * 12,
    "lorem ipsum dolor sit amet",
    "q",
    "speculative decoding is",
    "abc def",
    "0123456789",
    "tiny models, big claims",
    "disaggregate the verify stage",
    "!",
    "mixed lengths matter here",
    "PD-Verify",
    "zz",
    "one more prompt",
]


GATE = 0.3  # the tiny draft is often less sure than this, so the gate fires on many positions but not all


def make_requests(pair, max_new=lambda i: 4 + 3 * (i % 7), stop=()):
    return [
        Request(f"r{i}", pair.encode_prompt(text), SamplingParams(max_new_tokens=max_new(i), stop_token_ids=stop))
        for i, text in enumerate(PROMPTS)
    ]


@pytest.fixture(scope="module")
def references(tiny_pair):
    return {
        r.request_id: hf_greedy(tiny_pair.verifier.model, r.prompt_token_ids, r.params.max_new_tokens)
        for r in make_requests(tiny_pair)
    }


def run(pair, engine, config=None, requests=None):
    config = config or EngineConfig(drafter="model", controller=ControllerConfig(kind="fixed"))
    requests = requests or make_requests(pair)
    eng = make_engine(engine, pair, config)
    try:
        eng.generate(requests, timeout=120)
    finally:
        eng.stop()
    return requests, eng


@pytest.mark.parametrize("engine", ["ar", "baseline", "pd", "pdv"])
@pytest.mark.parametrize("controller", ["fixed", "feedback", "goodput", "cost"])
def test_greedy_output_matches_verifier_alone(tiny_pair, references, engine, controller):
    config = EngineConfig(drafter="model", controller=ControllerConfig(kind=controller))
    requests, _ = run(tiny_pair, engine, config)
    assert len(requests) >= 16
    for r in requests:
        assert r.status == "ok", r.error
        assert r.output_token_ids == references[r.request_id], r.request_id


LANE_MODES = {  # every way an engine may run its lanes: (engine, lane compute, pdv's hybrid threshold, step choice)
    "pd-turns": ("pd", LaneCompute.TURNS, 3, StepChoice.COST),
    "pd-at-once": ("pd", LaneCompute.AT_ONCE, 3, StepChoice.COST),
    "baseline-at-once": ("baseline", LaneCompute.AT_ONCE, 3, StepChoice.COST),
    "pdv-turns-cost": ("pdv", LaneCompute.TURNS, 3, StepChoice.COST),
    "pdv-at-once-cost": ("pdv", LaneCompute.AT_ONCE, 3, StepChoice.COST),
    "pdv-at-once-pipelined": ("pdv", LaneCompute.AT_ONCE, None, StepChoice.COST),
    "pdv-at-once-atomic": ("pdv", LaneCompute.AT_ONCE, 100, StepChoice.COST),
    "pdv-turns-count": ("pdv", LaneCompute.TURNS, 3, StepChoice.COUNT),
    "pd-elastic": ("pd", LaneCompute.ELASTIC, 3, StepChoice.COST),
    "pdv-elastic-pipelined": ("pdv", LaneCompute.ELASTIC, None, StepChoice.COST),
}


@pytest.mark.parametrize("mode", LANE_MODES)
@pytest.mark.parametrize("drafter", ["model", "suffix"])
def test_greedy_output_matches_verifier_alone_in_every_lane_mode(tiny_pair, references, mode, drafter):
    engine, compute, threshold, choice = LANE_MODES[mode]
    config = EngineConfig(
        drafter=drafter,
        controller=ControllerConfig(kind="cost"),
        lane_compute=compute,
        hybrid_threshold=threshold,
        step_choice=choice,
    )
    requests, _ = run(tiny_pair, engine, config)
    for r in requests:
        assert r.status == "ok", r.error
        assert r.output_token_ids == references[r.request_id], r.request_id


@pytest.mark.parametrize("hybrid_threshold", [None, 3, 100])
def test_pdv_lossless_with_hybrid_mode_on_and_off(tiny_pair, references, hybrid_threshold):
    config = EngineConfig(
        drafter="model", controller=ControllerConfig(kind="fixed"), hybrid_threshold=hybrid_threshold
    )
    eng = make_engine("pdv", tiny_pair, config)
    modes = count_modes(eng)
    requests = make_requests(tiny_pair)
    try:
        eng.generate(requests, timeout=120)
    finally:
        eng.stop()
    for r in requests:
        assert r.output_token_ids == references[r.request_id]
    if hybrid_threshold is None:
        assert modes.hybrid_steps == 0 and modes.pipelined_blocks > 0
    if hybrid_threshold == 100:
        assert modes.pipelined_blocks == 0 and modes.hybrid_steps > 0


@pytest.mark.parametrize("engine", ["baseline", "pd", "pdv"])
@pytest.mark.parametrize("confidence", [None, GATE])
def test_draft_equal_to_verifier_accepts_everything(tiny_pair, references, engine, confidence):
    # every proposal matches only if the draft cache is exactly the verifier's after each step, gated or not
    pair = replace(tiny_pair, draft=ModelRunner(tiny_pair.verifier.model, "draft"))
    config = EngineConfig(
        drafter="model", controller=ControllerConfig(kind="fixed", draft_confidence=confidence)
    )
    requests, _ = run(pair, engine, config)
    assert sum(r.drafted for r in requests) > 0
    assert sum(r.accepted for r in requests) == sum(r.drafted for r in requests)
    for r in requests:
        assert r.output_token_ids == references[r.request_id]
    if confidence:
        # the gate cut blocks short: some steps proposed fewer than L tokens with more than L left to emit
        steps = [(s, left) for r in requests for s, left in zip(r.steps, remaining_before_steps(r), strict=True)]
        assert any(s.draft_len < min(4, left - 1) for s, left in steps)


def remaining_before_steps(request) -> list[int]:
    """Tokens each verify step of ``request`` was still allowed to emit."""
    left, out = request.params.max_new_tokens - 1, []  # the first token comes from prefill
    for step in request.steps:
        out.append(left)
        left -= step.accepted + 1
    return out


@pytest.mark.parametrize("engine", ["baseline", "pd", "pdv"])
def test_the_confidence_gate_proposes_fewer_tokens_and_keeps_the_output(tiny_pair, references, engine):
    full, _ = run(tiny_pair, engine)
    gated, _ = run(
        tiny_pair,
        engine,
        EngineConfig(drafter="model", controller=ControllerConfig(kind="fixed", draft_confidence=GATE)),
    )
    for r in gated:
        assert r.status == "ok", r.error
        assert r.output_token_ids == references[r.request_id], r.request_id
    assert 0 < sum(r.drafted for r in gated) < sum(r.drafted for r in full)
    rate = sum(r.accepted for r in gated) / sum(r.drafted for r in gated)
    assert rate > sum(r.accepted for r in full) / sum(r.drafted for r in full)


def test_bad_draft_is_rejected_but_output_is_unchanged(tiny_pair, references):
    torch.manual_seed(99)
    bad = LlamaForCausalLM(tiny_pair.draft.model.config).eval()
    pair = replace(tiny_pair, draft=ModelRunner(bad, "draft"))
    requests, _ = run(pair, "baseline")
    drafted, accepted = sum(r.drafted for r in requests), sum(r.accepted for r in requests)
    assert drafted > 100
    assert accepted / drafted < 0.1
    for r in requests:
        assert r.output_token_ids == references[r.request_id]


@pytest.mark.parametrize("engine", ["baseline", "pdv"])
def test_stop_token_and_max_new_tokens_are_exact_inside_an_accepted_block(tiny_pair, engine):
    # draft == verifier: every step accepts L=4 tokens at once, so a stop can fall mid-block
    pair = replace(tiny_pair, draft=ModelRunner(tiny_pair.verifier.model, "draft"))
    prompt = pair.encode_prompt("stop me in the middle")
    free = hf_greedy(pair.verifier.model, prompt, 20)
    stop_at = next(i for i in range(2, 20) if free[i] not in free[:i] and i % 5 not in (0, 4))
    stop_req = Request("stop", prompt, SamplingParams(max_new_tokens=20, stop_token_ids=(free[stop_at],)))
    len_req = Request("len", prompt, SamplingParams(max_new_tokens=7, stop_token_ids=()))
    run(pair, engine, requests=[stop_req, len_req])
    assert stop_req.output_token_ids == free[: stop_at + 1]
    assert stop_req.finish_reason == "stop"
    assert len_req.output_token_ids == free[:7]
    assert len_req.finish_reason == "length"
    assert max(s.accepted for s in len_req.steps) >= 2  # several tokens did arrive in one step


def test_no_prefix_is_recomputed(tiny_pair):
    pair = counting(tiny_pair)
    verifier = pair.verifier
    requests = make_requests(pair)
    before = verifier.tokens_forwarded
    run(pair, "baseline", requests=requests)
    forwarded = verifier.tokens_forwarded - before
    expected = sum(len(r.prompt_token_ids) + sum(s.draft_len + 1 for s in r.steps) for r in requests)
    assert forwarded == expected


def test_ar_engine_forwards_each_token_once(tiny_pair):
    pair = counting(tiny_pair)
    requests = make_requests(pair)
    before = pair.verifier.tokens_forwarded
    run(pair, "ar", requests=requests)
    # prompt once, then one forward per emitted token except the first (from prefill) and the last
    expected = sum(len(r.prompt_token_ids) + r.num_output_tokens - 1 for r in requests)
    assert pair.verifier.tokens_forwarded - before == expected


@pytest.mark.parametrize("engine", ["baseline", "pd", "pdv"])
def test_suffix_drafting_learns_completed_outputs_and_stays_lossless(tiny_pair, references, engine):
    """A second pass over the same prompts drafts from the first pass's outputs, which the global tree learned."""
    config = EngineConfig(drafter="suffix", controller=ControllerConfig(kind="fixed"))
    eng = make_engine(engine, tiny_pair, config)
    first, second = make_requests(tiny_pair), make_requests(tiny_pair)
    try:
        eng.generate(first, timeout=120)
        # a lane teaches the tree as it retires a request, just after the request's last token reached its caller
        assert wait_until(lambda: eng.stats().suffix_tree.sequences == len(first))
        learned = eng.stats().suffix_tree
        eng.generate(second, timeout=120)
    finally:
        eng.stop()
    assert learned.sequences == len(first) and learned.tokens == sum(r.num_output_tokens for r in first)
    for r in first + second:
        assert r.status == "ok", r.error
        assert r.output_token_ids == references[r.request_id], r.request_id
    from_tree = [s for r in second for s in r.steps if s.source is not None and s.source.kind is SourceKind.GLOBAL]
    assert from_tree and sum(s.accepted for s in from_tree) > sum(s.draft_len for s in from_tree) / 2
