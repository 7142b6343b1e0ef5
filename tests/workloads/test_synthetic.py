"""Synthetic prompts: asked token lengths round-trip through real tokenizers; seeded."""

from __future__ import annotations

import numpy as np
import pytest

from engine.models.tiny import tiny_tokenizer
from workloads.datasets.synthetic import LengthSpec, synthetic_requests, text_of_length


class WordTokenizer:
    """One token per word plus one per full stop: a tokenizer whose tokens span several characters."""

    def encode(self, text: str) -> list[int]:
        return [1] * (len(text.split()) + text.count("."))


@pytest.mark.parametrize("tokenizer", [tiny_tokenizer(), WordTokenizer()], ids=["bytes", "words"])
@pytest.mark.parametrize("n", [1, 7, 64, 500])
def test_text_encodes_to_about_the_asked_length(tokenizer, n):
    text, count = text_of_length(tokenizer, n, np.random.default_rng(0))
    assert count == len(tokenizer.encode(text))
    assert n - 2 <= count <= n
    assert text.strip()


def test_requests_are_seeded_and_lengths_stay_in_range():
    tok = tiny_tokenizer()
    spec_in, spec_out = LengthSpec(100, 0.5), LengthSpec(40, 0.25)
    a = synthetic_requests(tok, 30, spec_in, spec_out, seed=5)
    assert a == synthetic_requests(tok, 30, spec_in, spec_out, seed=5)
    assert a != synthetic_requests(tok, 30, spec_in, spec_out, seed=6)
    assert all(50 - 2 <= r.prompt_len <= 150 for r in a)
    assert all(30 <= r.output_len <= 50 for r in a)
    assert len({r.prompt_len for r in a}) > 5
    assert len({r.request_id for r in a}) == 30


def test_fixed_lengths_without_a_range_ratio():
    reqs = synthetic_requests(tiny_tokenizer(), 20, LengthSpec(32), LengthSpec(8), seed=0)
    # a prompt cannot end inside the gap a space leaves, so it may be one token short
    assert {r.prompt_len for r in reqs} <= {31, 32} and {r.output_len for r in reqs} == {8}


@pytest.mark.parametrize("kwargs", [{"mean": 0}, {"mean": 10, "range_ratio": 1.0}, {"mean": 10, "range_ratio": -0.1}])
def test_invalid_lengths_are_refused(kwargs):
    with pytest.raises(ValueError):
        LengthSpec(**kwargs)
