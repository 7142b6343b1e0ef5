"""Sampled outputs of every engine follow the verifier's distribution (Leviathan et al.), at every drafted position.

Each run samples 3,200 seeded requests for one prompt in one engine run and
compares the counts of output tokens 1..4 with the exact marginals of the
verifier (``tests/support/sampling_reference.py``: every prefix the verifier can emit,
walked with the models' own logits). The draft length is fixed at 4 and
max_new_tokens at 6, so tokens 1..4 are each drafted or corrected, at block
positions 1 to 4. Each test also computes, from the same models, the power of
its chi-square tests (level ``ALPHA`` = 1e-4, pooled bins, noncentral chi-square)
against a named wrong behaviour and asserts it is at least 0.99.
"""

from dataclasses import replace
from typing import NamedTuple

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from engine.config import ControllerConfig, EngineConfig, LaneCompute, SamplingParams, StepChoice
from engine.request import Request
from engine.schedulers.registry import make_engine
from tests.engine.test_lossless import GATE
from tests.support.sampling_reference import ALPHA, chisquare_pvalue, marginals, power

TRIALS = 3200
DRAFT_LEN = 4
POSITIONS = range(1, DRAFT_LEN + 1)  # output tokens 1..4 (token 0 comes from prefill)
TOP_K = 4  # keeps the exact marginals cheap (4^4 prefixes) and the draft's and verifier's supports overlapping


class LanesMode(NamedTuple):
    lane_compute: LaneCompute
    hybrid_threshold: int | None  # pdv: below this many running requests atomic, None: never
    step_choice: StepChoice  # pdv at or above the threshold: COUNT always pipelines (no step-cost profile read)


TURNS_COUNT = LanesMode(LaneCompute.TURNS, 3, StepChoice.COUNT)


def sampled_counts(
    pair, engine: str, prompt: list[int], params: SamplingParams, confidence=None, lanes: LanesMode = TURNS_COUNT
) -> np.ndarray:
    """Counts [DRAFT_LEN + 1, V] of output tokens 0..4 over TRIALS requests (seeds 0..) in one engine run."""
    config = EngineConfig(
        drafter="model",
        max_batch_size=256,  # many rows per step: the run takes seconds, not minutes
        controller=ControllerConfig(kind="fixed", draft_len=DRAFT_LEN, draft_confidence=confidence),
        **lanes._asdict(),
    )
    requests = [Request(f"s{i}", prompt, SamplingParams(**{**params.__dict__, "seed": i})) for i in range(TRIALS)]
    eng = make_engine(engine, pair, config)
    try:
        eng.generate(requests, timeout=600)
    finally:
        eng.stop()
    assert all(r.status == "ok" for r in requests)
    if engine == "ar":
        assert not any(step.draft_len for r in requests for step in r.steps)
        return token_counts(requests, pair.verifier.vocab_size)
    first_blocks = [r.steps[0].draft_len for r in requests]
    if confidence:
        proposed = sum(n > 0 for n in first_blocks)
        assert TRIALS / 10 < proposed < TRIALS * 9 / 10, proposed  # the gate chose both ways often
    else:
        assert all(n == DRAFT_LEN for n in first_blocks)  # speculation really ran, at full length
    return token_counts(requests, pair.verifier.vocab_size)


def token_counts(requests: list[Request], vocab: int) -> np.ndarray:
    tokens = np.array([r.output_token_ids[: DRAFT_LEN + 1] for r in requests])
    return np.stack([np.bincount(tokens[:, i], minlength=vocab) for i in range(DRAFT_LEN + 1)])


def top_k_params() -> SamplingParams:
    return SamplingParams(temperature=1.0, top_k=TOP_K, max_new_tokens=DRAFT_LEN + 2, stop_token_ids=())


@pytest.mark.parametrize("engine", ["ar", "baseline", "pd", "pdv"])
def test_sampled_tokens_follow_the_verifier_at_every_drafted_position(tiny_pair, engine):
    """T = 1, top-k = 4, 3,200 samples, output tokens 1..4.

    Power of each token's chi-square test at alpha = 1e-4, computed below from the tiny pair's exact
    marginals (noncentral chi-square over the pooled bins): above 0.99999 at each of tokens 1..4 against
    "after a rejection, sample from p" (the speculative engines), and above 0.99999 against the draft
    model's own distribution (every engine, AR included). For comparison, the 800-trial test on token 1
    alone, untruncated, at alpha = 1e-3, had 0.20 against the first.
    """
    prompt = tiny_pair.encode_prompt("hi")
    exact = marginals(tiny_pair, prompt, DRAFT_LEN + 1, 1.0, TOP_K, 1.0, gate=None)
    for i in POSITIONS:
        assert power(exact.exact[i], exact.resampled[i], TRIALS) >= 0.99, i
        assert power(exact.exact[i], exact.draft[i], TRIALS) >= 0.99, i
    counts = sampled_counts(tiny_pair, engine, prompt, top_k_params())
    for i in range(DRAFT_LEN + 1):
        assert chisquare_pvalue(counts[i], exact.exact[i]) > ALPHA, i
    for i in POSITIONS:  # the same test tells the wrong marginals apart
        assert chisquare_pvalue(counts[i], exact.draft[i]) < ALPHA, i
        if engine != "ar":
            assert chisquare_pvalue(counts[i], exact.resampled[i]) < ALPHA, i


@pytest.mark.parametrize(
    ("engine", "lanes"),
    [
        ("pd", LanesMode(LaneCompute.AT_ONCE, 3, StepChoice.COUNT)),
        ("pdv", LanesMode(LaneCompute.AT_ONCE, None, StepChoice.COUNT)),  # pipelined, draft and verify at once
        ("pdv", LanesMode(LaneCompute.AT_ONCE, 10_000, StepChoice.COUNT)),  # atomic on the decode lane
        ("pdv", LanesMode(LaneCompute.ELASTIC, None, StepChoice.COUNT)),  # threads per turn, by who has work
    ],
    ids=["pd-at-once", "pdv-at-once-pipelined", "pdv-at-once-atomic", "pdv-elastic-pipelined"],
)
def test_sampled_tokens_follow_the_verifier_with_lanes_at_once(tiny_pair, engine, lanes):
    """As above, with each lane on its own share of the cores: the lanes' threads change no distribution."""
    prompt = tiny_pair.encode_prompt("hi")
    exact = marginals(tiny_pair, prompt, DRAFT_LEN + 1, 1.0, TOP_K, 1.0, gate=None)
    counts = sampled_counts(tiny_pair, engine, prompt, top_k_params(), lanes=lanes)
    for i in range(DRAFT_LEN + 1):
        assert chisquare_pvalue(counts[i], exact.exact[i]) > ALPHA, i
    for i in POSITIONS:  # the same power as above against sampling from p after a rejection
        assert chisquare_pvalue(counts[i], exact.resampled[i]) < ALPHA, i


def test_sampled_tokens_follow_the_verifier_with_the_confidence_gate(tiny_pair):
    """Baseline with the gate, T = 1, top-k = 4, 3,200 samples, tokens 1..4.

    The gate decides from the draft's distribution, never from the token it sampled, so nothing is
    biased. Power against "sample from p after a rejection" (where the gate lets the draft propose),
    computed below from the exact marginals at alpha = 1e-4: 0.9928 at token 1, above 0.99999 at
    tokens 2..4. A gate that reads the sampled token's probability is caught exactly, by
    ``tests/engine/test_speculative_blocks.py``.
    """
    prompt = tiny_pair.encode_prompt("hi")
    exact = marginals(tiny_pair, prompt, DRAFT_LEN + 1, 1.0, TOP_K, 1.0, gate=GATE)
    for i in POSITIONS:
        assert power(exact.exact[i], exact.resampled[i], TRIALS) >= 0.99, i
    counts = sampled_counts(tiny_pair, "baseline", prompt, top_k_params(), confidence=GATE)
    for i in range(DRAFT_LEN + 1):
        assert chisquare_pvalue(counts[i], exact.exact[i]) > ALPHA, i


def test_temperature_and_top_p_shape_the_sampled_distribution(tiny_pair):
    """PDV at T = 0.7, top-p = 0.9, 3,200 samples, token 1 (the first drafted one).

    Power against temperature and top-p being ignored (the untruncated T = 1 marginal), computed below
    from the tiny pair's exact marginals at alpha = 1e-4: above 0.99999.
    """
    prompt = tiny_pair.encode_prompt("hi")
    tempered = marginals(tiny_pair, prompt, 2, 0.7, None, 0.9, gate=None).exact[1]
    plain = marginals(tiny_pair, prompt, 2, 1.0, None, 1.0, gate=None).exact[1]
    assert power(tempered, plain, TRIALS) >= 0.99
    params = SamplingParams(temperature=0.7, top_p=0.9, max_new_tokens=DRAFT_LEN + 2, stop_token_ids=())
    counts = sampled_counts(tiny_pair, "pdv", prompt, params)[1]
    assert chisquare_pvalue(counts, tempered) > ALPHA
    assert chisquare_pvalue(counts, plain) < ALPHA


def test_a_seeded_request_samples_the_same_tokens_again_in_the_same_batch(tiny_pair):
    # the same batch, not any batch: a forward over other rows rounds the probabilities differently, so tokens
    # may differ across batches (SamplingParams.seed says so)
    prompt = tiny_pair.encode_prompt("reproducible")
    params = SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=12, seed=7, stop_token_ids=())
    # a fixed draft length: the cost controller's choice depends on the batch, and with it how many random
    # numbers a row draws
    config = EngineConfig(drafter="model", controller=ControllerConfig(kind="fixed"))

    def sample_with(neighbours: int, seed: int = 7) -> list[int]:
        eng = make_engine("baseline", tiny_pair, config)
        target = Request("target", prompt, replace(params, seed=seed))
        others = [
            Request(
                f"o{i}",
                tiny_pair.encode_prompt("x" * (i + 1)),
                SamplingParams(temperature=1.0, max_new_tokens=9, seed=100 + i),
            )
            for i in range(neighbours)
        ]
        try:
            eng.generate([target, *others], timeout=60)
        finally:
            eng.stop()
        return target.output_token_ids

    assert sample_with(5) == sample_with(5) and sample_with(0) == sample_with(0)
    assert sample_with(5, seed=8) != sample_with(5)  # the seed, not the batch, decides


# --- helpers the drafter and shared-draft tests use: token 1 at T = 1, 800 samples ---------------------


def second_token_marginal(model, prompt: list[int]) -> np.ndarray:
    """Exact P(token 2 = x) = sum_t1 p(t1 | prompt) p(x | prompt, t1) under the verifier."""
    previous = model.config._attn_implementation
    model.set_attn_implementation("sdpa")
    try:
        with torch.inference_mode():
            p1 = model(torch.tensor([prompt])).logits[0, -1].double().softmax(-1)
            vocab = p1.shape[0]
            batch = torch.tensor([prompt + [t] for t in range(vocab)])
            p2 = model(batch).logits[:, -1].double().softmax(-1)
    finally:
        model.set_attn_implementation(previous)
    return (p1.unsqueeze(1) * p2).sum(0).numpy()


def merged_chisquare(counts: np.ndarray, probs: np.ndarray, min_expected: float = 5.0) -> float:
    """Chi-square p-value after pooling bins whose expected count is small."""
    expected = probs / probs.sum() * counts.sum()
    big = expected >= min_expected
    obs = np.append(counts[big], counts[~big].sum())
    exp = np.append(expected[big], expected[~big].sum())
    return chisquare(obs, exp).pvalue


def seeded_samples(pair, engine: str, config: EngineConfig, prompt: list[int], trials: int) -> list[Request]:
    """``trials`` requests for ``prompt`` sampled at T = 1 with seeds 0.., 4 tokens each, through ``engine``."""
    eng = make_engine(engine, pair, config)
    requests = [
        Request(f"s{i}", prompt, SamplingParams(temperature=1.0, max_new_tokens=4, seed=i, stop_token_ids=()))
        for i in range(trials)
    ]
    try:
        eng.generate(requests, timeout=300)
    finally:
        eng.stop()
    return requests


def sampled_second_tokens(
    pair, engine: str, prompt: list[int], trials: int = 800, confidence: float | None = None
) -> np.ndarray:
    """Counts of the second output token over ``trials`` seeded samples (T = 1, L = 3) through ``engine``."""
    config = EngineConfig(
        drafter="model",
        controller=ControllerConfig(kind="fixed", draft_len=3, draft_confidence=confidence),
    )
    requests = seeded_samples(pair, engine, config, prompt, trials)
    # the second token went through speculation: proposed by the draft, or (gated) left to the verifier
    proposed = sum(r.steps[0].draft_len > 0 for r in requests)
    if confidence:
        assert trials / 10 < proposed < trials * 9 / 10, proposed  # the gate chose both ways often
    else:
        assert proposed == trials
    return np.bincount([r.output_token_ids[1] for r in requests], minlength=pair.verifier.vocab_size)
