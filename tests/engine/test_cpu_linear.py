"""The oneDNN route for float32 CPU linears: same parameters, same results, chosen by PDV_CPU_LINEAR."""

import pytest
import torch
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM

from engine.models.cpu_linear import ENV, OneDNNLinear, chosen_backend, onednn_available, route_linears
from engine.models.pair import ModelLoadError, load_model_pair
from engine.models.tiny import tiny_models, tiny_tokenizer

pytestmark = pytest.mark.skipif(not onednn_available(), reason="this PyTorch build has no oneDNN linear")


def linears(model: nn.Module) -> tuple[int, int]:
    kinds = [type(m) for m in model.modules()]
    return kinds.count(OneDNNLinear), kinds.count(nn.Linear)


def wide_model(layers: int) -> LlamaForCausalLM:
    """Layers large enough for the oneDNN route (256 x 512 and up), byte vocabulary like the tiny preset."""
    config = LlamaConfig(
        vocab_size=257,
        hidden_size=256,
        intermediate_size=512,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=4,
        tie_word_embeddings=False,
        eos_token_id=256,
        pad_token_id=256,
    )
    torch.manual_seed(layers)
    return LlamaForCausalLM(config).eval()


def test_routing_keeps_the_parameters_and_the_tie_and_round_trips():
    model = tiny_models()[1]
    params = {id(p) for p in model.parameters()}
    ids = torch.tensor([[3, 70, 101, 9, 200]])
    with torch.inference_mode():
        want = model(input_ids=ids).logits
    plain = linears(model)[1]

    assert route_linears(model, "onednn", min_weights=0) == "onednn"
    assert linears(model) == (plain, 0)
    assert {id(p) for p in model.parameters()} == params  # nothing copied
    assert model.lm_head.weight is model.get_input_embeddings().weight  # still tied
    with torch.inference_mode():
        got = model(input_ids=ids).logits
    torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
    assert torch.equal(got.argmax(-1), want.argmax(-1))

    assert route_linears(model, "blas") == "blas"
    assert linears(model) == (0, plain)
    with torch.inference_mode():
        assert torch.equal(model(input_ids=ids).logits, want)  # the same kernel again gives the same bits


def test_small_layers_and_other_dtypes_stay_where_they_are():
    model = tiny_models()[1]
    assert route_linears(model, "onednn") == "blas"  # every tiny layer is below the size threshold
    assert linears(model)[0] == 0
    wide = wide_model(1)
    assert route_linears(wide, "onednn", min_weights=256 * 257) == "onednn"
    assert isinstance(wide.lm_head, OneDNNLinear)  # 257 x 256: just large enough
    assert type(wide.model.layers[0].self_attn.k_proj) is nn.Linear  # 256 x 256: too small
    assert route_linears(wide.to(torch.bfloat16), "onednn") == "default"
    with pytest.raises(ValueError, match="backend must be one of"):
        route_linears(model, "mkl")


def test_the_environment_variable_picks_the_kernel(monkeypatch, tmp_path):
    for name, layers in (("draft", 1), ("verifier", 2)):
        wide_model(layers).save_pretrained(tmp_path / name)
        tiny_tokenizer().save_pretrained(tmp_path / name)
    dirs = {"draft_model": str(tmp_path / "draft"), "verifier_model": str(tmp_path / "verifier"), "device": "cpu"}
    monkeypatch.delenv(ENV, raising=False)
    assert chosen_backend() == "onednn"
    pair = load_model_pair(**dirs)
    assert pair.describe()["cpu_linear"] == "onednn"
    assert linears(pair.verifier.model) == (2 * 7 + 1, 0)  # seven linears per layer and the output layer
    monkeypatch.setenv(ENV, "blas")
    pair = load_model_pair(**dirs)
    assert pair.describe()["cpu_linear"] == "blas"
    assert linears(pair.verifier.model)[0] == 0
    monkeypatch.setenv(ENV, "fast")
    with pytest.raises(ModelLoadError, match=f"{ENV} must be one of onednn, blas, got 'fast'"):
        load_model_pair(**dirs)
