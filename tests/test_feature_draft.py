"""Drafts that read the verifier's hidden states: exactness, the training view, save and load."""

import json

import pytest
import torch

from engine.config import ControllerConfig, EngineConfig
from engine.feature_draft import FeatureDraft, unroll_mask, unrolled_hidden
from engine.kv import ATTN_IMPLEMENTATION
from engine.models.pair import _pair, load_model_pair
from engine.models.shared_draft import (
    SharedDraftError,
    feature_draft_from_verifier,
    load_shared_draft,
    save_shared_draft,
)
from engine.models.tiny import tiny_models, tiny_tokenizer
from engine.runner import ModelRunner
from tests.conftest import greedy_run_matches_verifier
from tests.test_engine_sampling import merged_chisquare, sampled_second_tokens, second_token_marginal

EVERY_TOKEN = torch.arange(257)


@pytest.fixture(scope="module")
def verifier():
    return tiny_models()[1].float().eval()


@pytest.fixture(scope="module")
def draft(verifier):
    torch.manual_seed(0)
    draft = feature_draft_from_verifier(verifier, EVERY_TOKEN, num_layers=1, mlp_size=32).eval()
    with torch.no_grad():  # a trained draft's MLP is not the identity; make sure the hidden state matters
        draft.fc.down.weight.normal_(std=0.3)
    return draft


@pytest.fixture(scope="module")
def pair(verifier, draft):
    return _pair(draft, verifier, tiny_tokenizer(), None, torch.device("cpu"), {"preset": "", "draft": "feature"})


def last_hidden(verifier, ids: torch.Tensor) -> torch.Tensor:
    """The verifier's final hidden states through transformers' own attention."""
    previous = verifier.config._attn_implementation
    verifier.set_attn_implementation("sdpa")
    try:
        with torch.inference_mode():
            return verifier.model(input_ids=ids).last_hidden_state
    finally:
        verifier.set_attn_implementation(previous)


def test_the_verifier_returns_the_same_logits_when_asked_for_hidden_states(verifier):
    runner = ModelRunner(verifier, "verifier")
    ids = torch.tensor([5, 9, 77, 100, 3, 8])
    keep = torch.tensor([1, 5])
    plain = runner.forward([runner.new_store(8), runner.new_store(8)], ids, [2, 4], keep)
    logits, hidden = runner.forward([runner.new_store(8), runner.new_store(8)], ids, [2, 4], keep, with_hidden=True)
    assert torch.equal(plain, logits)
    assert hidden.shape == (6, verifier.config.hidden_size)
    whole = last_hidden(verifier, ids[2:].unsqueeze(0))[0]
    torch.testing.assert_close(hidden[2:], whole, rtol=1e-4, atol=1e-4)


def test_a_feature_draft_refuses_to_run_without_features(draft):
    runner = ModelRunner(draft, "draft")
    with pytest.raises(ValueError, match="features must be given"):
        runner.forward([runner.new_store(4)], torch.tensor([1]), [1], torch.tensor([0]))


@pytest.mark.parametrize("engine", ["baseline", "pd", "pdv"])
@pytest.mark.parametrize("confidence", [0.0, 0.1])
def test_greedy_output_is_the_verifiers(pair, engine, confidence):
    # a 5-token prefill chunk splits every prompt, so the hidden state carried between chunks is exercised
    controller = ControllerConfig(draft_len=3, draft_confidence=confidence)
    config = EngineConfig(engine=engine, prefill_chunk_tokens=5, controller=controller)
    prompts = ["Hello, World! 123", "zzz", "a longer prompt that takes several chunks", "UPPER case"]
    requests = greedy_run_matches_verifier(pair, engine, prompts, 24, config)
    assert sum(r.drafted for r in requests) > 0


def test_sampled_second_token_follows_the_verifier(pair):
    prompt = pair.encode_prompt("hi")
    second = sampled_second_tokens(pair, "baseline", prompt)
    exact = second_token_marginal(pair.verifier.model, prompt)
    assert merged_chisquare(second, exact) > 1e-3


def test_unroll_mask_sees_the_verified_prefix_and_the_blocks_own_earlier_proposals():
    mask = unroll_mask(4, 3, torch.device("cpu")).int()
    # depth 3 at position 3: block started at 1 -> verified keys 0..1, depth-2 key at 2, own key at 3
    assert mask[3].tolist() == [1, 1, 0, 0] + [0, 0, 1, 0] + [0, 0, 0, 1]
    assert mask[2].tolist() == [1, 0, 0, 0] + [0, 1, 0, 0] + [0, 0, 1, 0]
    assert unroll_mask(3, 1, torch.device("cpu")).int().tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]


def test_the_training_view_is_what_the_engine_computes_when_it_drafts(verifier, draft):
    """Every depth of ``unrolled_hidden`` equals the hidden state of an actual draft block."""
    ids = torch.tensor([[7, 40, 41, 99, 12, 13, 200, 5, 6, 70]])
    features = last_hidden(verifier, ids)
    with torch.inference_mode():
        depths = unrolled_hidden(draft, ids, features, 3)
    runner = ModelRunner(draft, "draft")
    length = ids.shape[1]
    for start in range(1, length - 2):  # a block whose first proposal is computed at ``start``
        store = runner.new_store(length)
        read = torch.cat([torch.zeros(1, features.shape[-1]), features[0, :start]])  # positions 0..start
        _, hidden = runner.forward(
            [store], ids[0, : start + 1], [start + 1], torch.tensor([start]), features=read, with_hidden=True
        )
        own = hidden[start : start + 1]
        torch.testing.assert_close(own, depths[0][0, start : start + 1], rtol=1e-4, atol=1e-4)
        for depth in (2, 3):
            j = start + depth - 1
            _, hidden = runner.forward(
                [store], ids[0, j : j + 1], [1], torch.tensor([0]), features=own, with_hidden=True
            )
            own = hidden
            torch.testing.assert_close(own, depths[depth - 1][0, j : j + 1], rtol=1e-4, atol=1e-4)
    assert ATTN_IMPLEMENTATION == draft.config._attn_implementation  # the training view put it back


def test_save_and_load_round_trip(verifier, draft, tmp_path):
    save_shared_draft(draft, verifier, tmp_path / "d", {"compute_dtype": "float32"})
    meta = json.loads((tmp_path / "d" / "config.json").read_text())["pdv_draft"]
    assert meta["reads"] == "verifier_hidden"
    loaded = load_shared_draft(tmp_path / "d", verifier, torch.float32, torch.device("cpu"))
    assert isinstance(loaded, FeatureDraft)
    ids, read = torch.tensor([[3, 4, 5]]), torch.randn(1, 3, verifier.config.hidden_size)
    for model in (draft, loaded):
        model.set_attn_implementation("sdpa")
    with torch.inference_mode():
        a = draft(ids, read, logits_to_keep=1).hidden_states[0]
        b = loaded(ids, read, logits_to_keep=1).hidden_states[0]
    # saved in bfloat16: equal to that precision
    torch.testing.assert_close(a, b, rtol=0.05, atol=0.05)
    assert torch.equal(loaded.fc.up.weight, draft.fc.up.weight.to(torch.bfloat16).float())


def test_an_unknown_input_kind_is_one_clear_error(verifier, draft, tmp_path):
    save_shared_draft(draft, verifier, tmp_path / "d", {})
    config = json.loads((tmp_path / "d" / "config.json").read_text())
    config["pdv_draft"]["reads"] = "something_else"
    (tmp_path / "d" / "config.json").write_text(json.dumps(config))
    with pytest.raises(SharedDraftError, match="something_else"):
        load_shared_draft(tmp_path / "d", verifier, torch.float32, torch.device("cpu"))


def test_load_model_pair_takes_a_feature_draft_directory(verifier, draft, tmp_path):
    verifier.save_pretrained(tmp_path / "verifier")
    tiny_tokenizer().save_pretrained(tmp_path / "verifier")
    save_shared_draft(draft, verifier, tmp_path / "draft", {})
    pair = load_model_pair(draft_model=str(tmp_path / "draft"), verifier_model=str(tmp_path / "verifier"), device="cpu")
    assert pair.draft.takes_features and not pair.verifier.takes_features
    assert torch.isfinite(pair.draft.model.fc.down.weight).all()


def test_a_new_draft_proposes_what_the_hidden_state_it_reads_predicts(verifier):
    """Before training the MLP is the identity: with no layers, the proposal is the verifier's own argmax."""
    draft = feature_draft_from_verifier(verifier, EVERY_TOKEN, num_layers=0, mlp_size=16)
    draft.set_attn_implementation("sdpa")
    ids = torch.tensor([[3, 50, 7, 9]])
    features = last_hidden(verifier, ids)
    with torch.inference_mode():
        logits = draft(ids, features).logits
        expected = verifier.lm_head(features)
    torch.testing.assert_close(logits, expected, rtol=1e-4, atol=1e-4)
