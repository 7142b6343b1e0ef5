"""Model pairs of real architectures' shapes with seeded random weights: nothing to download.

The configs below are the published ``config.json`` fields of each
architecture that decide a forward's cost (layers, widths, heads, vocabulary,
RoPE), written here so a machine with no network builds the same models. The
weights are random, so what a pair measures is the *cost* of its forwards,
never the quality of its text; the tokenizer is the in-code byte-level one
(``tiny.tiny_tokenizer``), whose 257 ids are a prefix of every vocabulary
here.

Greedy losslessness holds for any weights, but a random draft model agrees
with a random verifier about as often as chance (1 in the vocabulary).
Acceptance therefore comes from one of two sources, and a pair says which:

* **self-drafting**: the draft is the verifier's first few layers with its
  embedding, final norm and LM head (``self:N``), sharing the tensors. A
  random network's residual stream carries the embedding through every layer,
  so the truncated model agrees with the whole one often, not always;
* **lookup drafting** (``ngram``, ``suffix``): a random verifier's greedy
  output falls into short cycles, and repetitive prompts repeat themselves, so
  proposals copied from the context are accepted. An independent draft shape
  (``llama-3.2-1b``) costs what that draft model costs, and its acceptance is
  near zero: it measures the draft lane's cost, not its value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn
from transformers import AutoModelForCausalLM, LlamaConfig, PreTrainedModel

from engine.models.pair import ModelPair, _pair, resolve_device
from engine.models.tiny import tiny_tokenizer

SHAPE_SEED = 1234
EOS = 256  # the byte-level tokenizer's <eos>: a stop token every shape's vocabulary holds

_LLAMA3_ROPE = {"rope_type": "llama3", "low_freq_factor": 1.0, "high_freq_factor": 4.0}
_LLAMA3_ROPE.update(original_max_position_embeddings=8192)

SHAPES: dict[str, dict[str, Any]] = {
    # meta-llama/Llama-3.1-8B
    "llama-3.1-8b": dict(
        vocab_size=128256, hidden_size=4096, intermediate_size=14336, num_hidden_layers=32,
        num_attention_heads=32, num_key_value_heads=8, head_dim=128, max_position_embeddings=131072,
        rms_norm_eps=1e-5, rope_theta=500000.0, rope_scaling={**_LLAMA3_ROPE, "factor": 8.0},
        tie_word_embeddings=False, initializer_range=0.02,
    ),
    # meta-llama/Llama-3.2-1B
    "llama-3.2-1b": dict(
        vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16,
        num_attention_heads=32, num_key_value_heads=8, head_dim=64, max_position_embeddings=131072,
        rms_norm_eps=1e-5, rope_theta=500000.0, rope_scaling={**_LLAMA3_ROPE, "factor": 32.0},
        tie_word_embeddings=True, initializer_range=0.02,
    ),
    # HuggingFaceTB/SmolLM2-135M-Instruct, the smol preset's verifier
    "smollm2-135m": dict(
        vocab_size=49152, hidden_size=576, intermediate_size=1536, num_hidden_layers=30,
        num_attention_heads=9, num_key_value_heads=3, head_dim=64, max_position_embeddings=8192,
        rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True, initializer_range=0.041666666666666664,
    ),
    # HuggingFaceTB/SmolLM2-360M-Instruct
    "smollm2-360m": dict(
        vocab_size=49152, hidden_size=960, intermediate_size=2560, num_hidden_layers=32,
        num_attention_heads=15, num_key_value_heads=5, head_dim=64, max_position_embeddings=8192,
        rms_norm_eps=1e-5, rope_theta=100000.0, tie_word_embeddings=True, initializer_range=0.02,
    ),
    # the tiny preset's shape, for runs on a CPU in seconds; large weights: peaked logits, no greedy near-ties
    "tiny": dict(
        vocab_size=257, hidden_size=64, intermediate_size=128, num_hidden_layers=3, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=2048, tie_word_embeddings=True, initializer_range=0.35,
    ),
}  # fmt: skip


@dataclass(frozen=True)
class ShapedPair:
    """A verifier shape and where its draft comes from: another shape, or ``self:N`` (its first N layers)."""

    verifier: str
    draft: str
    acceptance: str  # where accepted proposals come from, for the report

    def __post_init__(self) -> None:
        if self.verifier not in SHAPES:
            raise ValueError(f"unknown model shape {self.verifier!r}; choose one of {', '.join(SHAPES)}")
        if self.draft.startswith("self:"):
            layers = self.draft.removeprefix("self:")
            depth = SHAPES[self.verifier]["num_hidden_layers"]
            if not layers.isdigit() or not 1 <= int(layers) < depth:
                raise ValueError(f"draft {self.draft!r}: self:N needs 1 <= N < {depth} layers")
        elif self.draft not in SHAPES:
            raise ValueError(f"unknown draft shape {self.draft!r}; choose one of {', '.join(SHAPES)} or self:N")
        elif SHAPES[self.draft]["vocab_size"] != SHAPES[self.verifier]["vocab_size"]:
            raise ValueError(f"{self.draft} and {self.verifier} have different vocabularies")


PAIRS: dict[str, ShapedPair] = {
    "llama8b-1b": ShapedPair("llama-3.1-8b", "llama-3.2-1b", "the 1B draft's is about chance: it measures cost"),
    "llama8b-self4": ShapedPair("llama-3.1-8b", "self:4", "self-drafting: the 8B's first 4 layers"),
    "smol-self4": ShapedPair("smollm2-135m", "self:4", "self-drafting: the 135M's first 4 layers (the smol draft's)"),
    "tiny-self2": ShapedPair("tiny", "self:2", "self-drafting: the first 2 of 3 layers"),
}  # fmt: skip


def shape_config(name: str) -> LlamaConfig:
    """The Llama config of shape ``name``, its stop token the byte tokenizer's <eos>."""
    return LlamaConfig(**SHAPES[name], eos_token_id=EOS, bos_token_id=None, pad_token_id=EOS)


def random_model(config: LlamaConfig, device: torch.device, dtype: torch.dtype) -> PreTrainedModel:
    """A causal LM of ``config`` initialised on ``device`` (seeded there: an 8B model never touches host memory)."""
    with torch.device(device):
        model = AutoModelForCausalLM.from_config(config, dtype=dtype)
    return model.eval()


def truncated(verifier: PreTrainedModel, layers: int) -> PreTrainedModel:
    """The verifier's first ``layers`` layers with its embedding, final norm and head, sharing every tensor."""
    config = LlamaConfig(**{**verifier.config.to_dict(), "num_hidden_layers": layers})
    with torch.device("meta"):  # every module is replaced by the verifier's below: nothing to allocate
        draft = AutoModelForCausalLM.from_config(config)
    body, source = draft.model, verifier.model
    body.embed_tokens, body.norm, body.rotary_emb = source.embed_tokens, source.norm, source.rotary_emb
    body.layers = nn.ModuleList(source.layers[:layers])  # layer_idx 0..layers-1: the draft's own KV pool layers
    draft.lm_head = verifier.lm_head
    draft.generation_config = verifier.generation_config
    return draft.eval()


def load_shaped_pair(name: str, device: str = "auto", dtype: str = "bfloat16", seed: int = SHAPE_SEED) -> ModelPair:
    """The shaped pair ``name`` (``PAIRS``) with seeded random weights on ``device`` in ``dtype``."""
    if name not in PAIRS:
        raise ValueError(f"unknown shaped pair {name!r}; choose one of {', '.join(PAIRS)}")
    return load_shaped(PAIRS[name], name, device, dtype, seed)


def load_shaped(spec: ShapedPair, name: str, device: str, dtype: str, seed: int = SHAPE_SEED) -> ModelPair:
    """The pair ``spec`` describes, labelled ``name``, with seeded random weights on ``device`` in ``dtype``."""
    dev = resolve_device(device)
    torch_dtype = getattr(torch, dtype)
    torch.manual_seed(seed)
    verifier = random_model(shape_config(spec.verifier), dev, torch_dtype)
    if spec.draft.startswith("self:"):
        draft = truncated(verifier, int(spec.draft.removeprefix("self:")))
    else:
        draft = random_model(shape_config(spec.draft), dev, torch_dtype)
    source = {"preset": f"shaped:{name}", "draft": spec.draft, "verifier": spec.verifier}
    return _pair(draft, verifier, tiny_tokenizer(), None, dev, source)
