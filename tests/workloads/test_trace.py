"""Trace building: one tokenisation for every engine, capped outputs, unique request ids."""

from __future__ import annotations

import pytest

from engine.models.tiny import tiny_tokenizer
from workloads.datasets.sharegpt import SampledRequest
from workloads.datasets.synthetic import LengthSpec
from workloads.drivers.trace import DatasetSpec, build_trace, load_trace


class TinyPair:
    tokenizer = tiny_tokenizer()
    max_context = 2048

    def encode_prompt(self, text: str, raw: bool = False) -> list[int]:
        ids = self.tokenizer.encode(text)
        return ids if raw else [0, *ids]  # a one-token "chat template"


def test_outputs_are_capped_and_repeated_ids_made_unique():
    sampled = [
        SampledRequest("x", "hello", 300),
        SampledRequest("x", "hi", 5),
        SampledRequest("y", "hey", 50),
    ]
    trace = build_trace(sampled, lambda t: [1] * len(t), max_new_tokens=64, source="test", seed=0)
    assert [i.request_id for i in trace.items] == ["x", "x#1", "y"]
    assert [i.max_new_tokens for i in trace.items] == [64, 5, 50]
    assert trace.items[0].prompt_token_ids == (1,) * 5
    assert trace.describe()["num_requests"] == 3


def test_synthetic_prompts_skip_the_chat_template_so_lengths_match():
    spec = DatasetSpec("synthetic", LengthSpec(40), LengthSpec(12))
    trace = load_trace(spec, TinyPair(), num_requests=4, seed=1, max_new_tokens=10)
    assert [len(i.prompt_token_ids) for i in trace.items] == [40] * 4
    assert {i.max_new_tokens for i in trace.items} == {10}
    assert "synthetic" in trace.source


def test_missing_dataset_file_is_reported():
    with pytest.raises(FileNotFoundError, match="nope.json"):
        load_trace(DatasetSpec("/nope.json"), TinyPair(), 4, 0)
