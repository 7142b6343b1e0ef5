"""Sampled outputs follow the verifier's distribution (Leviathan et al.)."""

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from engine.config import ControllerConfig, EngineConfig, SamplingParams
from engine.request import Request
from engine.schedulers.registry import make_engine
from tests.test_engine_lossless import GATE


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


def seeded_samples(pair, config: EngineConfig, prompt: list[int], trials: int) -> list[Request]:
    """``trials`` requests for ``prompt`` sampled at T = 1 with seeds 0.., 4 tokens each, through ``config``."""
    eng = make_engine(config.engine, pair, config)
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
        engine=engine,
        controller=ControllerConfig(kind="fixed", draft_len=3, draft_confidence=confidence),
    )
    requests = seeded_samples(pair, config, prompt, trials)
    # the second token went through speculation: proposed by the draft, or (gated) left to the verifier
    proposed = sum(r.steps[0].draft_len > 0 for r in requests)
    if confidence:
        assert trials / 10 < proposed < trials * 9 / 10, proposed  # the gate chose both ways often
    else:
        assert proposed == trials
    return np.bincount([r.output_token_ids[1] for r in requests], minlength=pair.verifier.vocab_size)


@pytest.mark.parametrize("engine", ["baseline", "pdv"])
def test_sampled_second_token_follows_verifier_distribution(tiny_pair, engine):
    prompt = tiny_pair.encode_prompt("hi")
    second = sampled_second_tokens(tiny_pair, engine, prompt)
    exact = second_token_marginal(tiny_pair.verifier.model, prompt)
    assert merged_chisquare(second, exact) > 1e-3
    # power check: the draft's own marginal is told apart by the same test
    draft_marginal = second_token_marginal(tiny_pair.draft.model, prompt)
    assert merged_chisquare(second, draft_marginal) < 1e-3


def test_sampled_second_token_follows_verifier_distribution_with_the_confidence_gate(tiny_pair):
    # the gate decides from the draft's distribution, never from the token it sampled, so nothing is biased
    prompt = tiny_pair.encode_prompt("hi")
    second = sampled_second_tokens(tiny_pair, "baseline", prompt, confidence=GATE)
    exact = second_token_marginal(tiny_pair.verifier.model, prompt)
    assert merged_chisquare(second, exact) > 1e-3


def test_seeded_request_samples_the_same_tokens_whatever_its_batch(tiny_pair):
    prompt = tiny_pair.encode_prompt("reproducible")
    params = SamplingParams(temperature=0.8, top_p=0.9, max_new_tokens=12, seed=7, stop_token_ids=())

    def sample_with(neighbours: int) -> list[int]:
        eng = make_engine("baseline", tiny_pair, EngineConfig(drafter="model"))
        target = Request("target", prompt, params)
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

    assert sample_with(0) == sample_with(5)
