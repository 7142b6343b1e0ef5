"""The sampler's temperature, top-k and top-p rule against transformers' own logits processors, not against a copy
of itself: the same support and the same renormalised probabilities, for each alone and all together."""

from __future__ import annotations

import pytest
import torch
from transformers import LogitsProcessorList, TemperatureLogitsWarper, TopKLogitsWarper, TopPLogitsWarper

from engine.config import SamplingParams
from engine.sampling import SamplingRows, probabilities

VOCAB = 64
CASES = [
    {"temperature": 1.0},
    {"temperature": 0.6},
    {"temperature": 1.7, "top_k": 1},
    {"temperature": 1.0, "top_k": 5},
    {"temperature": 0.8, "top_p": 0.5},
    {"temperature": 1.3, "top_p": 0.93},
    {"temperature": 0.7, "top_k": 10, "top_p": 0.8},
    {"temperature": 1.0, "top_k": 40, "top_p": 0.3},
    {"temperature": 2.0, "top_k": VOCAB - 1, "top_p": 0.99},
]


def transformers_probabilities(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """What ``generate(do_sample=True)`` samples from: temperature, then top-k, then top-p, then softmax."""
    warpers = LogitsProcessorList([TemperatureLogitsWarper(params.temperature)])
    if params.top_k is not None:
        warpers.append(TopKLogitsWarper(params.top_k))
    if params.top_p < 1:
        warpers.append(TopPLogitsWarper(params.top_p))
    return warpers(None, logits.clone()).softmax(-1)


@pytest.mark.parametrize("seed", range(5))
def test_every_row_of_a_mixed_batch_samples_from_what_transformers_samples_from(seed):
    generator = torch.Generator().manual_seed(seed)
    # logits spread enough that no cut falls on a near-tie, not so far that a probability underflows to 0
    logits = torch.randn(len(CASES), VOCAB, generator=generator, dtype=torch.float64).mul(2).float()
    params = [SamplingParams(**case) for case in CASES]
    ours = probabilities(logits, SamplingRows.build(params, [None] * len(params), torch.device("cpu")))
    for row, (case, p) in enumerate(zip(CASES, params, strict=True)):
        theirs = transformers_probabilities(logits[row : row + 1], p)[0]
        assert torch.equal(ours[row] > 0, theirs > 0), (case, int((ours[row] > 0).sum()), int((theirs > 0).sum()))
        torch.testing.assert_close(ours[row], theirs, rtol=1e-5, atol=1e-7, msg=str(case))
