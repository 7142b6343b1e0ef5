"""``probabilities()`` against distributions computed by hand: temperature, top-k, top-p and their mixes."""

import math

import pytest
import torch

from engine.config import SamplingParams
from engine.sampling import SamplingRows, probabilities

BASE = [0.5, 0.3, 0.15, 0.05]  # softmax of LOGITS at T = 1
LOGITS = torch.tensor([math.log(x) for x in BASE])


def normalised(weights: list[float]) -> list[float]:
    return [w / sum(weights) for w in weights]


# at temperature T the distribution is proportional to BASE ** (1 / T)
CASES = {
    "T=1": (dict(temperature=1.0), BASE),
    "T=0.5": (dict(temperature=0.5), normalised([0.25, 0.09, 0.0225, 0.0025])),
    "T=2": (dict(temperature=2.0), normalised([math.sqrt(x) for x in BASE])),
    # top-k keeps the k most likely tokens
    "top-k=2": (dict(temperature=1.0, top_k=2), [0.625, 0.375, 0, 0]),
    # top-p drops a token once the mass before it reaches top_p: before = 0, .5, .8, .95
    "top-p=0.7": (dict(temperature=1.0, top_p=0.7), [0.625, 0.375, 0, 0]),
    "top-p=0.9": (dict(temperature=1.0, top_p=0.9), normalised([0.5, 0.3, 0.15, 0])),
    "top-p=0.4": (dict(temperature=1.0, top_p=0.4), [1, 0, 0, 0]),  # the top token always stays
    # T = 0.5 gives 0.685, 0.247, 0.062, 0.007: the mass before the third token (0.932) passes 0.9
    "T=0.5,top-p=0.9": (dict(temperature=0.5, top_p=0.9), normalised([0.25, 0.09, 0, 0])),
    # T = 0.7 gives 0.589, 0.284, 0.106, 0.022: only the mass before the fourth token (0.978) passes 0.9
    "T=0.7,top-p=0.9": (dict(temperature=0.7, top_p=0.9), normalised([x ** (1 / 0.7) for x in BASE[:3]] + [0])),
    # top-k first, then top-p on the renormalised rest: sqrt weights .707, .548, .387 -> .431, .334, .236
    "T=2,top-k=3,top-p=0.7": (
        dict(temperature=2.0, top_k=3, top_p=0.7),
        normalised([math.sqrt(0.5), math.sqrt(0.3), 0, 0]),
    ),
    "T=2,top-k=3": (dict(temperature=2.0, top_k=3), normalised([math.sqrt(x) for x in BASE[:3]] + [0])),
    "greedy": (dict(temperature=0.0), [1, 0, 0, 0]),
}


def rows_for(params: list[SamplingParams]) -> SamplingRows:
    return SamplingRows.build(params, [None] * len(params), torch.device("cpu"))


@pytest.mark.parametrize("case", CASES)
def test_probabilities_equal_the_hand_computed_distribution(case):
    kwargs, expected = CASES[case]
    got = probabilities(LOGITS.unsqueeze(0), rows_for([SamplingParams(**kwargs)]))
    torch.testing.assert_close(got[0], torch.tensor(expected, dtype=torch.float32), atol=1e-6, rtol=0)


def test_every_row_of_a_mixed_batch_gets_its_own_distribution():
    names = list(CASES)
    params = [SamplingParams(**CASES[n][0]) for n in names]
    got = probabilities(LOGITS.expand(len(names), -1).clone(), rows_for(params))
    for row, name in zip(got, names, strict=True):
        torch.testing.assert_close(row, torch.tensor(CASES[name][1], dtype=torch.float32), atol=1e-6, rtol=0)


def test_top_p_uses_the_tempered_distribution():
    """At T = 1 top-p = 0.9 keeps three tokens; at T = 0.5 the same top-p keeps two."""
    rows = rows_for([SamplingParams(temperature=1.0, top_p=0.9), SamplingParams(temperature=0.5, top_p=0.9)])
    kept = (probabilities(LOGITS.expand(2, -1).clone(), rows) > 0).sum(-1).tolist()
    assert kept == [3, 2]
