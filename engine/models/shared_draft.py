"""Drafts that borrow their verifier's embedding table.

A draft for a small verifier cannot afford its own full-width vocabulary: for
SmolLM2-135M the 49,152 x 576 embedding is a fifth of the verifier, so a draft
carrying one can never cost much less than a fifth of a verifier forward. A
*shared-embedding draft* stores only its transformer layers and final norm.
At load time it takes

* the verifier's input embedding module itself (shared, no copy), and
* an output layer over a fixed subset of the vocabulary whose rows are the
  verifier's embedding rows for those tokens.

Tokens outside the subset get logit ``-inf``: the draft never proposes them,
and the acceptance rule stays exact because it only needs the draft's
probability of the tokens it actually proposed (``q > 0``), while the
verifier's distribution keeps the whole vocabulary.

On disk it is a normal Hugging Face directory (``config.json`` +
``model.safetensors``) whose config carries a ``pdv_draft`` entry: the subset
size and a fingerprint of the verifier embedding it was trained against, so it
is never silently paired with another verifier.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import nn
from transformers import LlamaConfig, LlamaForCausalLM
from transformers.models.llama.modeling_llama import LlamaRotaryEmbedding

CONFIG_KEY = "pdv_draft"
OWN_PREFIXES = ("model.layers.", "model.norm.")
INDEX_KEY = "lm_head.vocab_index"
WEIGHTS = "model.safetensors"


class SharedDraftError(ValueError):
    """A shared-embedding draft that does not fit the verifier it is loaded with."""


class VocabSubsetHead(nn.Module):
    """Output layer over ``vocab_index`` only; every other token gets logit ``-inf``."""

    def __init__(self, embedding: torch.Tensor, vocab_index: torch.Tensor, dtype: torch.dtype | None = None) -> None:
        super().__init__()
        self.vocab_size = embedding.shape[0]
        self.register_buffer("vocab_index", vocab_index.to(torch.long, copy=True), persistent=False)
        rows = embedding.detach()[self.vocab_index].to(dtype or embedding.dtype)
        self.register_buffer("weight", rows, persistent=False)

    def subset_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] -> [..., N] logits of the subset tokens, in ``vocab_index`` order."""
        return nn.functional.linear(hidden, self.weight)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """[..., H] -> [..., V] logits over the full vocabulary."""
        small = self.subset_logits(hidden)
        full = small.new_full((*small.shape[:-1], self.vocab_size), float("-inf"))
        return full.index_copy_(-1, self.vocab_index, small)


class CastEmbedding(nn.Module):
    """The verifier's embedding module, shared, with its output cast to the draft's compute dtype."""

    def __init__(self, shared: nn.Module, dtype: torch.dtype) -> None:
        super().__init__()
        self.shared = shared
        self.out_dtype = dtype

    @property
    def weight(self) -> torch.Tensor:
        return self.shared.weight

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.shared(input_ids).to(self.out_dtype)


def embedding_fingerprint(embedding: torch.Tensor) -> str:
    """sha256 of the embedding rounded to bfloat16, so float32 and bfloat16 loads of one model agree."""
    raw = embedding.detach().to("cpu", torch.bfloat16).contiguous().view(torch.int16).numpy().tobytes()
    return hashlib.sha256(raw).hexdigest()


def is_shared_draft(path: str | Path) -> bool:
    config = Path(path) / "config.json"
    if not config.is_file():
        return False
    try:
        return CONFIG_KEY in json.loads(config.read_text())
    except json.JSONDecodeError:
        return False


def stored_compute_dtype(path: str | Path) -> torch.dtype | None:
    """The dtype a shared draft was trained to run in (``pdv_draft.compute_dtype``), if it names one."""
    name = json.loads((Path(path) / "config.json").read_text())[CONFIG_KEY].get("compute_dtype")
    if name is None:
        return None
    dtype = getattr(torch, name, None)
    if not isinstance(dtype, torch.dtype) or not dtype.is_floating_point:
        raise SharedDraftError(f"draft {path} names an unknown compute_dtype {name!r}")
    return dtype


def draft_from_verifier(verifier: LlamaForCausalLM, layers: list[int], vocab_index: torch.Tensor) -> LlamaForCausalLM:
    """A draft made of copies of some verifier layers, its final norm and a subset output layer."""
    config = _draft_config(verifier, len(layers))
    state = {k: v.clone() for k, v in verifier.state_dict().items() if k.startswith("model.norm.")}
    state.update(_copied_layers(verifier, layers))
    draft = _empty(config)
    _attach(draft, verifier, vocab_index, state)
    return draft


def _draft_config(verifier: LlamaForCausalLM, num_layers: int) -> LlamaConfig:
    config = LlamaConfig(**{**verifier.config.to_dict(), "num_hidden_layers": num_layers, "tie_word_embeddings": False})
    config.layer_types = None
    setattr(config, CONFIG_KEY, {})
    return config


def _copied_layers(verifier: LlamaForCausalLM, layers: list[int]) -> dict[str, torch.Tensor]:
    """Copies of the chosen verifier layers' weights, renumbered 0, 1, ... in the given order."""
    count = verifier.config.num_hidden_layers
    if not layers or min(layers) < 0 or max(layers) >= count:
        raise ValueError(f"layers must be indices into the verifier's {count} layers, got {layers}")
    source = verifier.state_dict()
    state = {}
    for new, old in enumerate(layers):
        prefix = f"model.layers.{old}."
        state.update(
            {f"model.layers.{new}.{k[len(prefix) :]}": v.clone() for k, v in source.items() if k.startswith(prefix)}
        )
    return state


def save_shared_draft(draft: LlamaForCausalLM, verifier: LlamaForCausalLM, out: Path, extra: dict) -> None:
    """Write the draft's own weights (bfloat16) and a config naming the verifier embedding it needs."""
    out.mkdir(parents=True, exist_ok=True)
    head: VocabSubsetHead = draft.lm_head
    state = {
        k: v.detach().to(torch.bfloat16).contiguous()
        for k, v in draft.state_dict().items()
        if k.startswith(OWN_PREFIXES)
    }
    state[INDEX_KEY] = head.vocab_index.to(torch.int32).cpu()
    save_file(state, str(out / WEIGHTS), metadata={"format": "pt"})
    config = draft.config.to_dict()
    config[CONFIG_KEY] = {
        **extra,
        "embeddings": "verifier",
        "vocab_subset": int(head.vocab_index.numel()),
        "verifier_embedding_sha256": embedding_fingerprint(verifier.get_input_embeddings().weight),
    }
    config["torch_dtype"] = config["dtype"] = "bfloat16"
    (out / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n")


def load_shared_draft(
    path: str | Path, verifier: LlamaForCausalLM, dtype: torch.dtype, device: torch.device
) -> LlamaForCausalLM:
    """Load a shared-embedding draft onto ``verifier``'s embedding; refuses a different verifier.

    The draft's layers, output rows and KV cache use ``dtype``, which may differ from the verifier's: the
    shared embedding's output is then cast on the way in.
    """
    path = Path(path)
    raw = json.loads((path / "config.json").read_text())
    meta = raw.pop(CONFIG_KEY)
    want = meta.get("verifier_embedding_sha256")
    have = embedding_fingerprint(verifier.get_input_embeddings().weight)
    if want != have:
        raise SharedDraftError(
            f"draft {path} was trained on a different verifier embedding (sha256 {str(want)[:12]}..., "
            f"this verifier has {have[:12]}...); pair it with the verifier it was distilled from"
        )
    if "reads" in meta:  # a draft that also reads the verifier's hidden states needs inputs the engines do not pass
        raise SharedDraftError(f"draft {path} reads {meta['reads']!r}; this version loads drafts that read tokens only")
    config = LlamaConfig(**raw)
    setattr(config, CONFIG_KEY, meta)
    state = load_file(str(path / WEIGHTS))
    index = state.pop(INDEX_KEY).long()
    draft = _empty(config)
    _attach(draft, verifier, index, {k: v.to(device, dtype) for k, v in state.items()})
    return draft.eval()


def _empty(config: LlamaConfig) -> LlamaForCausalLM:
    with torch.device("meta"):
        return LlamaForCausalLM(config)


def _attach(draft: LlamaForCausalLM, verifier, vocab_index: torch.Tensor, state: dict[str, torch.Tensor]) -> None:
    """Fill a meta-device draft: own weights from ``state``, embeddings from the verifier."""
    embedding = verifier.get_input_embeddings()
    own = {k: v for k, v in state.items() if k.startswith(OWN_PREFIXES)}
    missing, unexpected = draft.load_state_dict(own, strict=False, assign=True)
    missing = [k for k in missing if not k.startswith(("model.embed_tokens.", "lm_head."))]
    if missing or unexpected:
        raise SharedDraftError(f"draft weights do not match its config: missing {missing}, unexpected {unexpected}")
    dtype = next(iter(own.values())).dtype
    draft.model.embed_tokens = embedding if embedding.weight.dtype == dtype else CastEmbedding(embedding, dtype)
    draft.lm_head = VocabSubsetHead(embedding.weight, vocab_index.to(embedding.weight.device), dtype)
    draft.model.rotary_emb = LlamaRotaryEmbedding(draft.config).to(embedding.weight.device)
