"""Model architectures by their shapes alone: what a forward reads and computes, no weights.

The figures are the public ``config.json`` values of each model (hidden size,
layers, attention and key/value heads, MLP width, vocabulary, tied
embeddings). From them: parameters that a forward multiplies by (every linear
layer and the output head; the embedding lookup reads one row per token), the
bytes those weights take, and the key/value bytes one cached token takes.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModelShape:
    name: str
    layers: int
    hidden: int
    intermediate: int  # the gated MLP's width (three matrices: gate, up, down)
    heads: int
    kv_heads: int
    vocab: int
    tied_embeddings: bool  # the output head shares the embedding matrix
    max_context: int
    dtype_bytes: int = 2  # bfloat16 on a GPU

    def __post_init__(self) -> None:
        for name in ("layers", "hidden", "intermediate", "heads", "kv_heads", "vocab", "max_context", "dtype_bytes"):
            if getattr(self, name) < 1:
                raise ValueError(f"{self.name}: {name} must be >= 1")
        if self.hidden % self.heads or self.heads % self.kv_heads:
            raise ValueError(f"{self.name}: heads must divide hidden and kv_heads must divide heads")

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    @property
    def layer_params(self) -> int:
        attention = 2 * self.hidden * self.hidden + 2 * self.hidden * self.kv_heads * self.head_dim  # q, o; k, v
        return attention + 3 * self.hidden * self.intermediate

    @property
    def matmul_params(self) -> int:
        """Weights every token is multiplied by: every layer's linears and the output head."""
        return self.layers * self.layer_params + self.vocab * self.hidden

    @property
    def params(self) -> int:
        embedding = 0 if self.tied_embeddings else self.vocab * self.hidden
        return self.matmul_params + embedding

    @property
    def weight_bytes(self) -> int:
        """Bytes a forward reads of weights (the untied embedding's rows are a few per token: left out)."""
        return self.matmul_params * self.dtype_bytes

    @property
    def kv_bytes_per_token(self) -> int:
        return 2 * self.layers * self.kv_heads * self.head_dim * self.dtype_bytes


# public config.json values
LLAMA_3_1_8B = ModelShape("Llama-3.1-8B", 32, 4096, 14336, 32, 8, 128_256, False, 131_072)
LLAMA_3_2_1B = ModelShape("Llama-3.2-1B", 16, 2048, 8192, 32, 8, 128_256, True, 131_072)
LLAMA_3_1_70B = ModelShape("Llama-3.1-70B", 80, 8192, 28672, 64, 8, 128_256, False, 131_072)
QWEN_2_5_7B = ModelShape("Qwen2.5-7B-Instruct", 28, 3584, 18944, 28, 4, 152_064, False, 32_768)
QWEN_2_5_0_5B = ModelShape("Qwen2.5-0.5B-Instruct", 24, 896, 4864, 14, 2, 151_936, True, 32_768)


@dataclass(frozen=True)
class ModelPairShape:
    name: str
    verifier: ModelShape
    draft: ModelShape

    @property
    def max_context(self) -> int:
        return min(self.verifier.max_context, self.draft.max_context)

    @property
    def vocab_size(self) -> int:
        return self.verifier.vocab


PAIRS: dict[str, ModelPairShape] = {
    "llama-8b-1b": ModelPairShape("llama-8b-1b", LLAMA_3_1_8B, LLAMA_3_2_1B),
    "llama-70b-8b": ModelPairShape("llama-70b-8b", LLAMA_3_1_70B, LLAMA_3_1_8B),
    "qwen-7b-0.5b": ModelPairShape("qwen-7b-0.5b", QWEN_2_5_7B, QWEN_2_5_0_5B),
}


def pair_shape(name: str) -> ModelPairShape:
    """The pair ``name`` names; a ValueError naming the choices otherwise."""
    try:
        return PAIRS[name]
    except KeyError:
        raise ValueError(f"unknown model pair {name!r}; choose one of {', '.join(PAIRS)}") from None
