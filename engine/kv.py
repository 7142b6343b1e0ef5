"""Per-request KV caches and the packed (varlen) attention that reads them.

Every request owns one ``KVStore`` per model, allocated once at admission for
its whole life (prompt + max_new_tokens + 1 positions: a draft never proposes past
max_new_tokens, so a verify step always fits), so
nothing is ever copied to grow it and no step recomputes a prefix. A forward
pass packs the new tokens of any set of requests into one row (batch size 1,
no padding); ``packed_attention`` writes each request's new keys/values into
its own store and attends over that request's valid prefix only, as varlen
flash-attention does on a GPU. Rolling back rejected draft tokens is setting
``length`` back: positions past ``length`` are never read and are overwritten
by the next write.

The attention function is registered with transformers' ``AttentionInterface``
under ``ATTN_IMPLEMENTATION``; models switch to it with
``model.set_attn_implementation(ATTN_IMPLEMENTATION)``. Models without a mask
function for this name get no mask built by transformers, which is what we
want: masking is per segment, below.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import AttentionInterface

ATTN_IMPLEMENTATION = "pdv_packed"


class KVStore:
    """Keys and values of one request in one model.

    keys, values: [num_layers, num_kv_heads, capacity, head_dim]
    """

    __slots__ = ("keys", "values", "length")

    def __init__(
        self,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        capacity: int,
        dtype: torch.dtype,
        device: torch.device,
    ) -> None:
        shape = (num_layers, num_kv_heads, capacity, head_dim)
        self.keys = torch.empty(shape, dtype=dtype, device=device)
        self.values = torch.empty(shape, dtype=dtype, device=device)
        self.length = 0  # valid positions; everything at or past it is garbage

    @property
    def capacity(self) -> int:
        return self.keys.shape[2]

    def truncate(self, length: int) -> None:
        """Forget every position at or after ``length`` (rollback of rejected drafts)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of length {self.length} to {length}")
        self.length = length


@dataclass(frozen=True)
class Segment:
    """One request's slice of a packed forward: tokens [start, start + num_tokens)."""

    store: KVStore
    start: int
    num_tokens: int

    @property
    def past(self) -> int:
        return self.store.length


@dataclass(frozen=True)
class PackedBatch:
    """What ``packed_attention`` needs to know about a packed forward."""

    segments: tuple[Segment, ...]


def packed_attention(
    module: torch.nn.Module,
    query: torch.Tensor,  # [1, H, N, D]   N = total new tokens of all segments
    key: torch.Tensor,  # [1, H_kv, N, D] new keys, RoPE applied
    value: torch.Tensor,  # [1, H_kv, N, D]
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    packed_batch: PackedBatch | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    if packed_batch is None:
        raise RuntimeError(f"{ATTN_IMPLEMENTATION} attention needs packed_batch=...; use engine.runner.ModelRunner")
    layer = module.layer_idx
    out = query.new_empty(query.shape[2], query.shape[1], query.shape[3])  # [N, H, D]
    for seg in packed_batch.segments:
        s, e = seg.start, seg.start + seg.num_tokens
        past, end = seg.past, seg.past + seg.num_tokens
        seg.store.keys[layer, :, past:end] = key[0, :, s:e]
        seg.store.values[layer, :, past:end] = value[0, :, s:e]
        k = seg.store.keys[layer, :, :end].unsqueeze(0)  # [1, H_kv, end, D]
        v = seg.store.values[layer, :, :end].unsqueeze(0)
        q = query[:, :, s:e]  # [1, H, q, D]
        mask, causal = None, False
        if seg.num_tokens > 1:
            if past == 0:
                causal = True
            else:
                # query i sits at absolute position past + i and sees keys 0..past + i
                rows = torch.arange(seg.num_tokens, device=q.device).unsqueeze(1) + past
                mask = torch.arange(end, device=q.device).unsqueeze(0) <= rows  # [q, end]
        o = F.scaled_dot_product_attention(
            q, k, v, attn_mask=mask, is_causal=causal, scale=scaling, enable_gqa=True
        )  # [1, H, q, D]
        out[s:e] = o[0].transpose(0, 1)
    return out.unsqueeze(0), None  # [1, N, H, D]


AttentionInterface.register(ATTN_IMPLEMENTATION, packed_attention)


class KVBudget:
    """Tokens of KV cache reserved by admitted requests (per model)."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.used = 0
        self._lock = threading.Lock()

    def try_reserve(self, tokens: int) -> bool:
        with self._lock:
            if self.used + tokens > self.capacity:
                return False
            self.used += tokens
            return True

    def release(self, tokens: int) -> None:
        with self._lock:
            self.used -= tokens
