"""The in-code ``tiny`` pair: seeded random Llama models and a byte-level tokenizer.

Small enough that the whole test suite runs in seconds; it shows nothing
about real acceptance rates.
"""

from __future__ import annotations

import torch
from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

TINY_SEED = 1234


def tiny_tokenizer() -> PreTrainedTokenizerFast:
    """Byte-level tokenizer: 256 byte tokens + <eos>, no merges (any text encodes)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    vocab["<eos>"] = len(vocab)
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, eos_token="<eos>", pad_token="<eos>")
    # No BPE word cache. Without the regex split a whole prompt is one "word",
    # so the cache (10,000 words by default) kept about 1 KB per distinct
    # prompt, RSS rising ~10 MB over the first 10,000 prompts; with no merges
    # it saves nothing. Set here: ``cache_capacity`` does not survive the copy
    # PreTrainedTokenizerFast makes of ``tok``.
    fast.backend_tokenizer.model._resize_cache(0)
    return fast


def tiny_models(num_draft_layers: int = 2) -> tuple[LlamaForCausalLM, LlamaForCausalLM]:
    """A seeded verifier and a draft made of its first layer(s), so acceptance is neither 0 nor 1."""
    config = LlamaConfig(
        vocab_size=257,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=3,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=2048,
        initializer_range=0.35,  # large weights: peaked distributions, so greedy argmax has no near-ties
        tie_word_embeddings=True,
        eos_token_id=256,
        bos_token_id=None,
        pad_token_id=256,
    )
    torch.manual_seed(TINY_SEED)
    verifier = LlamaForCausalLM(config).eval()
    draft_config = LlamaConfig(**{**config.to_dict(), "num_hidden_layers": num_draft_layers})
    draft = LlamaForCausalLM(draft_config).eval()
    state = {k: v for k, v in verifier.state_dict().items() if k in draft.state_dict()}
    draft.load_state_dict(state)
    return draft, verifier
