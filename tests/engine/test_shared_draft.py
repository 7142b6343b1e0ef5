"""Drafts that borrow the verifier's embeddings and propose a subset of its vocabulary."""

import json

import numpy as np
import pytest
import torch

from engine.config import ControllerConfig, EngineConfig, StepChoice
from engine.models.pair import ModelLoadError, _pair, load_model_pair
from engine.models.shared_draft import (
    SharedDraftError,
    draft_from_verifier,
    embedding_fingerprint,
    is_shared_draft,
    load_shared_draft,
    save_shared_draft,
)
from engine.models.tiny import tiny_models, tiny_tokenizer
from tests.engine.test_sampling_in_engines import merged_chisquare, sampled_second_tokens, second_token_marginal
from tests.support.greedy import greedy_run_matches_verifier
from tests.support.sampling_power import power_at_distance, trials_for_power

# the tiny vocabulary is 256 bytes + <eos>; the draft may propose lowercase letters, space and <eos> only
SUBSET = torch.tensor([*range(ord("a"), ord("z") + 1), ord(" "), 256])


@pytest.fixture(scope="module")
def verifier():
    return tiny_models()[1].float().eval()


@pytest.fixture(scope="module")
def subset_pair(verifier):
    draft = draft_from_verifier(verifier, [0], SUBSET).eval()
    return _pair(draft, verifier, tiny_tokenizer(), None, torch.device("cpu"), {"preset": "", "draft": "subset"})


def test_tokens_outside_the_subset_get_minus_infinity(verifier):
    draft = draft_from_verifier(verifier, [0, 2], SUBSET)
    with torch.inference_mode():
        logits = draft(input_ids=torch.tensor([[104, 105]])).logits[0, -1]
    outside = torch.ones(257, dtype=torch.bool)
    outside[SUBSET] = False
    assert torch.isneginf(logits[outside]).all()
    assert torch.isfinite(logits[SUBSET]).all()
    assert draft.model.embed_tokens is verifier.get_input_embeddings()  # shared, not copied


def test_layers_are_copies_of_the_chosen_verifier_layers(verifier):
    draft = draft_from_verifier(verifier, [2, 0], SUBSET)
    assert torch.equal(draft.model.layers[0].mlp.up_proj.weight, verifier.model.layers[2].mlp.up_proj.weight)
    assert torch.equal(draft.model.layers[1].self_attn.q_proj.weight, verifier.model.layers[0].self_attn.q_proj.weight)
    with torch.no_grad():
        draft.model.layers[0].mlp.up_proj.weight.add_(1.0)
    assert not torch.equal(draft.model.layers[0].mlp.up_proj.weight, verifier.model.layers[2].mlp.up_proj.weight)
    with pytest.raises(ValueError, match="layers must be indices"):
        draft_from_verifier(verifier, [3], SUBSET)


def test_save_and_load_round_trip(verifier, tmp_path):
    draft = draft_from_verifier(verifier, [0, 1], SUBSET).eval()
    with torch.no_grad():  # weights are stored in bfloat16: round them first so the round trip is exact
        for name, p in draft.named_parameters():
            if name.startswith(("model.layers.", "model.norm.")):
                p.copy_(p.bfloat16().float())
    save_shared_draft(draft, verifier, tmp_path, {"layers": "0,1"})
    assert is_shared_draft(tmp_path)
    names = {p.name for p in tmp_path.iterdir()}
    assert names == {"config.json", "model.safetensors"}  # no embedding, no tokenizer of its own
    meta = json.loads((tmp_path / "config.json").read_text())["pdv_draft"]
    assert meta["vocab_subset"] == len(SUBSET)
    assert meta["verifier_embedding_sha256"] == embedding_fingerprint(verifier.get_input_embeddings().weight)
    loaded = load_shared_draft(tmp_path, verifier, torch.float32, torch.device("cpu"))
    ids = torch.tensor([[104, 101, 108, 108, 111]])
    with torch.inference_mode():
        want = draft(input_ids=ids).logits
        got = loaded(input_ids=ids).logits
    assert torch.equal(torch.isneginf(got), torch.isneginf(want))
    finite = torch.isfinite(want)
    torch.testing.assert_close(got[finite], want[finite])


def test_a_different_verifier_is_refused(verifier, tmp_path):
    save_shared_draft(draft_from_verifier(verifier, [0], SUBSET), verifier, tmp_path / "draft", {})
    other = tiny_models()[1]
    with torch.no_grad():
        other.get_input_embeddings().weight[5] += 1.0
    with pytest.raises(SharedDraftError, match="different verifier embedding"):
        load_shared_draft(tmp_path / "draft", other, torch.float32, torch.device("cpu"))
    # the same refusal through the public loader is one clear ModelLoadError
    other.save_pretrained(tmp_path / "verifier")
    tiny_tokenizer().save_pretrained(tmp_path / "verifier")
    with pytest.raises(ModelLoadError, match="different verifier embedding"):
        load_model_pair(draft_model=str(tmp_path / "draft"), verifier_model=str(tmp_path / "verifier"), device="cpu")


def test_a_draft_that_reads_the_verifiers_hidden_states_is_refused_by_name(verifier, tmp_path):
    save_shared_draft(draft_from_verifier(verifier, [0], SUBSET), verifier, tmp_path, {})
    config = json.loads((tmp_path / "config.json").read_text())
    config["pdv_draft"]["reads"] = "verifier_hidden"
    (tmp_path / "config.json").write_text(json.dumps(config))
    with pytest.raises(SharedDraftError, match="reads 'verifier_hidden'; this version loads drafts that read tokens"):
        load_shared_draft(tmp_path, verifier, torch.float32, torch.device("cpu"))


def test_load_model_pair_takes_a_shared_draft_directory(verifier, tmp_path):
    verifier.save_pretrained(tmp_path / "verifier")
    tiny_tokenizer().save_pretrained(tmp_path / "verifier")
    save_shared_draft(draft_from_verifier(verifier, [1], SUBSET), verifier, tmp_path / "draft", {})
    pair = load_model_pair(draft_model=str(tmp_path / "draft"), verifier_model=str(tmp_path / "verifier"), device="cpu")
    draft = pair.draft.model
    assert draft.model.embed_tokens is pair.verifier.model.get_input_embeddings()
    own = sum(p.numel() for p in draft.model.layers.parameters()) + draft.model.norm.weight.numel()
    assert pair.describe()["draft_params"] == str(own)


@pytest.mark.parametrize("engine", ["baseline", "pdv"])
def test_greedy_output_is_the_verifiers_even_for_tokens_the_draft_cannot_propose(subset_pair, engine):
    # pdv pipelines at three requests or more, reading no step-cost profile (none is measured for this pair)
    config = EngineConfig(
        drafter="model", controller=ControllerConfig(kind="fixed", draft_len=3), step_choice=StepChoice.COUNT
    )
    requests = greedy_run_matches_verifier(subset_pair, engine, ["Hello, World! 123", "zzz", "UPPER case"], 20, config)
    outputs = [t for r in requests for t in r.output_token_ids]
    assert any(t not in SUBSET.tolist() for t in outputs)  # the verifier did emit tokens outside the subset
    assert sum(r.drafted for r in requests) > 0


def test_sampled_second_token_follows_the_verifier_with_a_subset_draft(subset_pair):
    """T = 1, second output token, pooled chi-square at level 1e-3, with as many samples as give power >= 0.9
    against every distribution at total-variation distance 0.1 or more (``tests/support/sampling_power.py``)."""
    prompt = subset_pair.encode_prompt("hi")
    exact = second_token_marginal(subset_pair.verifier.model, prompt)
    trials = trials_for_power(exact, delta=0.1, alpha=1e-3, target=0.9)
    assert power_at_distance(exact, trials, 0.1, 1e-3) >= 0.9
    second = sampled_second_tokens(subset_pair, "baseline", prompt, trials)
    assert second[np.setdiff1d(np.arange(257), SUBSET.numpy())].sum() > 0  # mass outside the subset is reached
    assert merged_chisquare(second, exact) > 1e-3


@pytest.fixture(scope="module")
def saved_bf16_pair(verifier, tmp_path_factory):
    root = tmp_path_factory.mktemp("bf16")
    verifier.save_pretrained(root / "verifier")
    tiny_tokenizer().save_pretrained(root / "verifier")
    draft = draft_from_verifier(verifier, [0, 1], SUBSET)
    save_shared_draft(draft, verifier, root / "draft", {"compute_dtype": "bfloat16"})
    return str(root / "draft"), str(root / "verifier")


def test_a_draft_runs_in_the_dtype_it_was_trained_in(saved_bf16_pair, monkeypatch):
    monkeypatch.setattr("engine.models.pair.cpu_has_bfloat16", lambda: True)
    draft_dir, verifier_dir = saved_bf16_pair
    pair = load_model_pair(draft_model=draft_dir, verifier_model=verifier_dir, device="cpu")
    assert pair.verifier.dtype == torch.float32
    assert pair.draft.dtype == torch.bfloat16
    assert pair.draft.pool.keys.dtype == torch.bfloat16  # the KV cache it writes
    assert pair.describe()["draft_dtype"] == "bfloat16"
    # the embedding table is still the verifier's own tensor, not a bfloat16 copy
    assert pair.draft.model.model.embed_tokens.weight is pair.verifier.model.get_input_embeddings().weight
    config = EngineConfig(drafter="model", controller=ControllerConfig(kind="fixed", draft_len=3))
    requests = greedy_run_matches_verifier(pair, "baseline", ["abc abc abc", "Hello there"], 16, config)
    assert sum(r.accepted for r in requests) > 0
    # --dtype names the dtype of both models
    both = load_model_pair(draft_model=draft_dir, verifier_model=verifier_dir, device="cpu", dtype="float32")
    assert both.draft.dtype == torch.float32


def test_a_cpu_without_bfloat16_runs_the_draft_in_float32(saved_bf16_pair, monkeypatch, caplog):
    monkeypatch.setattr("engine.models.pair.cpu_has_bfloat16", lambda: False)
    draft_dir, verifier_dir = saved_bf16_pair
    with caplog.at_level("INFO", logger="engine.models.pair"):
        pair = load_model_pair(draft_model=draft_dir, verifier_model=verifier_dir, device="cpu")
    assert pair.draft.dtype == torch.float32
    assert "no bfloat16 instructions" in caplog.text


def test_an_unknown_compute_dtype_is_one_clear_error(verifier, tmp_path):
    verifier.save_pretrained(tmp_path / "verifier")
    tiny_tokenizer().save_pretrained(tmp_path / "verifier")
    save_shared_draft(
        draft_from_verifier(verifier, [0], SUBSET), verifier, tmp_path / "draft", {"compute_dtype": "int8"}
    )
    with pytest.raises(ModelLoadError, match="unknown compute_dtype 'int8'"):
        load_model_pair(draft_model=str(tmp_path / "draft"), verifier_model=str(tmp_path / "verifier"), device="cpu")
