"""Shaped pairs: real architectures' parameter counts from the configs in code, seeded weights, shared self-drafts."""

import pytest
import torch
from transformers import AutoModelForCausalLM

from engine.attention import ATTN_IMPLEMENTATION
from engine.models.pair import own_parameters
from engine.models.shapes import ShapedPair, load_shaped, load_shaped_pair, shape_config

# the published parameter counts of each architecture (embedding counted once where it is tied)
PUBLISHED = {
    "llama-3.1-8b": 8_030_261_248,
    "llama-3.2-1b": 1_235_814_400,
    "smollm2-135m": 134_515_008,
    "smollm2-360m": 361_821_120,
}


@pytest.mark.parametrize(("shape", "count"), PUBLISHED.items())
def test_each_shape_has_its_architectures_parameter_count(shape, count):
    with torch.device("meta"):  # shapes only: nothing is allocated
        model = AutoModelForCausalLM.from_config(shape_config(shape))
    assert sum(p.numel() for p in model.parameters()) == count


def test_a_self_draft_is_the_verifiers_first_layers_sharing_every_tensor():
    pair = load_shaped_pair("tiny-self2", "cpu", "float32")
    draft, verifier = pair.draft.model, pair.verifier.model
    assert own_parameters(draft, verifier) == 0 and pair.draft.num_layers == 2 and pair.verifier.num_layers == 3
    assert draft.model.layers[1] is verifier.model.layers[1] and draft.lm_head is verifier.lm_head
    ids = torch.tensor([[1, 2, 3]])
    for model in (verifier, draft):
        model.set_attn_implementation("sdpa")
    try:
        with torch.inference_mode():
            after_two = verifier(ids, output_hidden_states=True).hidden_states[2]  # the verifier after 2 of 3 layers
            want = verifier.lm_head(verifier.model.norm(after_two))
            got = draft(ids).logits
    finally:
        for model in (verifier, draft):
            model.set_attn_implementation(ATTN_IMPLEMENTATION)
    torch.testing.assert_close(got, want)


def test_an_independent_draft_shape_has_weights_of_its_own_and_the_seed_fixes_them():
    spec = ShapedPair("tiny", "tiny", "chance")
    first, again = (load_shaped(spec, "tiny-tiny", "cpu", "float32") for _ in range(2))
    assert own_parameters(first.draft.model, first.verifier.model) == 127488
    for a, b in zip(first.verifier.model.parameters(), again.verifier.model.parameters(), strict=True):
        assert torch.equal(a, b)
    assert not torch.equal(first.draft.model.lm_head.weight, first.verifier.model.lm_head.weight)


@pytest.mark.parametrize(
    ("verifier", "draft", "message"),
    [
        ("llama-4", "self:2", "unknown model shape"),
        ("tiny", "self:3", "self:N needs 1 <= N < 3"),
        ("tiny", "self:x", "self:N needs"),
        ("tiny", "gpt-2", "unknown draft shape"),
        ("llama-3.1-8b", "smollm2-135m", "different vocabularies"),
    ],
)
def test_a_pair_that_cannot_work_is_refused_with_the_reason(verifier, draft, message):
    with pytest.raises(ValueError, match=message):
        ShapedPair(verifier, draft, "")
