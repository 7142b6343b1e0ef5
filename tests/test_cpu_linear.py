"""The oneDNN route for float32 CPU linears: same parameters, same results, chosen by PDV_CPU_LINEAR."""

import pytest
import torch
from torch import nn

from engine.cpu_linear import ENV, OneDNNLinear, chosen_backend, onednn_available, route_linears
from engine.models import ModelLoadError, load_model_pair, tiny_models

pytestmark = pytest.mark.skipif(not onednn_available(), reason="this PyTorch build has no oneDNN linear")


def linears(model: nn.Module) -> tuple[int, int]:
    kinds = [type(m) for m in model.modules()]
    return kinds.count(OneDNNLinear), kinds.count(nn.Linear)


def test_routing_keeps_the_parameters_and_the_tie_and_round_trips():
    model = tiny_models()[1]
    params = {id(p) for p in model.parameters()}
    ids = torch.tensor([[3, 70, 101, 9, 200]])
    with torch.inference_mode():
        want = model(input_ids=ids).logits
    plain = linears(model)[1]

    assert route_linears(model, "onednn") == "onednn"
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


def test_other_dtypes_are_left_alone():
    model = tiny_models()[1].to(torch.bfloat16)
    assert route_linears(model, "onednn") == "default"
    assert linears(model)[0] == 0
    with pytest.raises(ValueError, match="backend must be one of"):
        route_linears(model, "mkl")


def test_the_environment_variable_picks_the_kernel(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert chosen_backend() == "onednn"
    monkeypatch.setenv(ENV, "blas")
    pair = load_model_pair(preset="tiny", device="cpu")
    assert pair.describe()["cpu_linear"] == "blas"
    assert linears(pair.verifier.model)[0] == 0
    monkeypatch.setenv(ENV, "onednn")
    pair = load_model_pair(preset="tiny", device="cpu")
    assert pair.describe()["cpu_linear"] == "onednn"
    assert linears(pair.verifier.model)[1] == 0 and linears(pair.draft.model)[1] == 0
    monkeypatch.setenv(ENV, "fast")
    with pytest.raises(ModelLoadError, match=f"{ENV} must be one of onednn, blas, got 'fast'"):
        load_model_pair(preset="tiny", device="cpu")
