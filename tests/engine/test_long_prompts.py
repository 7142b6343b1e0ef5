"""Prompts of several prefill chunks against transformers' ``generate``, in every engine: the chunked prefill (at most
512 prompt tokens per forward by default) must give the verifier's own output, not only the AR engine's."""

from __future__ import annotations

import pytest

from engine.config import ControllerConfig, EngineConfig
from tests.support.greedy import greedy_run_matches_verifier

CHUNK = EngineConfig().prefill_chunk_tokens  # the default the engines run with
NEW_TOKENS = 12


def _long_prompt(i: int, tokens: int) -> str:
    """A text of ``tokens`` tiny-tokenizer tokens (one per character), different for every ``i``."""
    words = ["stone", "river", "light", "cloud", "seed", "wind", "salt", "iron", "moss", "glass"]
    text = " ".join(words[(i * 3 + k * 7) % len(words)] for k in range(tokens))
    return text[:tokens]


@pytest.mark.parametrize("engine", ["ar", "baseline", "pd", "pdv"])
def test_prompts_of_several_prefill_chunks_give_the_verifiers_own_output(tiny_pair, engine):
    # 2.6 and 3.2 chunks, prefilled side by side with a short one, so chunks of different prompts share forwards
    lengths = [int(2.6 * CHUNK), 40, int(3.2 * CHUNK)]
    prompts = [_long_prompt(i, n) for i, n in enumerate(lengths)]
    assert [len(tiny_pair.encode_prompt(p, raw=True)) for p in prompts] == lengths
    config = EngineConfig(controller=ControllerConfig(kind="fixed", draft_len=3), drafter="model", max_batch_size=4)
    greedy_run_matches_verifier(tiny_pair, engine, prompts, NEW_TOKENS, config=config)
