"""The batched greedy generator that writes the distillation targets."""

import pytest
import torch

from engine.teacher import ATTN_IMPLEMENTATION, batched_attention, greedy_topk
from tests.conftest import hf_greedy

PROMPTS = [[5, 9, 14, 3, 77, 21, 8], [40, 2], [100, 101, 102, 103], [7] * 13]


@pytest.fixture(scope="module")
def verifier(tiny_pair):
    return tiny_pair.verifier.model


def test_left_padded_batch_gives_each_prompt_its_own_greedy_answer(verifier):
    answers = greedy_topk(verifier, PROMPTS, max_new_tokens=12, stop_id=-1, top_k=4)
    for prompt, answer in zip(PROMPTS, answers, strict=True):
        assert answer.tokens.tolist() == hf_greedy(verifier, prompt, 12)


def test_answer_stops_after_its_first_stop_token_and_other_rows_go_on(verifier):
    free = greedy_topk(verifier, PROMPTS, max_new_tokens=12, stop_id=-1, top_k=4)
    stop = int(free[0].tokens[3])
    first = free[0].tokens.tolist().index(stop)
    answers = greedy_topk(verifier, PROMPTS, max_new_tokens=12, stop_id=stop, top_k=4)
    assert answers[0].tokens.tolist() == free[0].tokens.tolist()[: first + 1]
    for free_answer, answer in zip(free, answers, strict=True):
        tokens = free_answer.tokens.tolist()
        expected = tokens[: tokens.index(stop) + 1] if stop in tokens else tokens
        assert answer.tokens.tolist() == expected


def test_topk_are_the_verifier_log_probabilities_at_each_answer_position(verifier):
    (answer,) = greedy_topk(verifier, PROMPTS[:1], max_new_tokens=8, stop_id=-1, top_k=5)
    assert torch.equal(answer.topk_ids[:, 0], answer.tokens)
    seq = torch.tensor([PROMPTS[0] + answer.tokens.tolist()])
    with torch.inference_mode():
        previous = verifier.config._attn_implementation
        verifier.set_attn_implementation("sdpa")
        try:
            logits = verifier(input_ids=seq).logits[0].float()
        finally:
            verifier.set_attn_implementation(previous)
    p = len(PROMPTS[0])
    expected_logp, expected_ids = logits[p - 1 : p - 1 + 8].log_softmax(-1).topk(5, dim=-1)
    assert torch.equal(answer.topk_ids, expected_ids)
    torch.testing.assert_close(answer.topk_logp, expected_logp, atol=1e-4, rtol=1e-4)


def test_the_model_gets_its_attention_back_and_the_function_refuses_calls_without_a_cache(verifier):
    before = verifier.config._attn_implementation
    greedy_topk(verifier, PROMPTS[:2], max_new_tokens=2, stop_id=-1, top_k=2)
    assert verifier.config._attn_implementation == before != ATTN_IMPLEMENTATION
    q = torch.zeros(1, 4, 1, 8)
    with pytest.raises(RuntimeError, match="batch_cache"):
        batched_attention(verifier.model.layers[0].self_attn, q, q[:, :2], q[:, :2], None)
