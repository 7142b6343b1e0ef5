"""Batched greedy generation with the teacher's top-k log-probabilities at every step.

The distillation recipe spends most of its time making the verifier write
answers, so this loop is built for throughput on a CPU rather than for
generality:

* one key/value buffer per batch, ``[layers, batch, kv_heads, capacity, head_dim]``,
  allocated once; a step writes one column and never copies the cache (a
  growing cache that concatenates every step moves the whole cache each step);
* grouped-query attention as two batched matmuls over the columns written so
  far, with each query head group reading its shared key/value head directly
  (PyTorch's fused CPU attention is several times slower for one query token
  in bfloat16); keys are stored transposed so that the written prefix is an
  ordinary strided matrix that the matmul reads without copying;
* finished answers leave the batch, a few at a time;
* prompts are left-padded to a common width; a key mask hides the padding and
  per-row position ids start each prompt at position 0;
* only the top-k of each step's distribution is kept, never a whole
  ``[steps, batch, vocab]`` logits tensor.

The attention function is registered with transformers' ``AttentionInterface``
under ``ATTN_IMPLEMENTATION`` and receives the batch's cache as a keyword
argument, the way ``engine.kv`` does for the engines. In float32 the tokens
equal transformers' own greedy ``generate`` (``tests/test_teacher.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from transformers import AttentionInterface

ATTN_IMPLEMENTATION = "pdv_batched_greedy"


@dataclass
class BatchCache:
    """Keys and values of a left-padded batch; every row has the same number of columns written."""

    keys: torch.Tensor  # [layers, B, kv_heads, head_dim, capacity]: transposed, so a prefix is a plain matrix
    values: torch.Tensor  # [layers, B, kv_heads, capacity, head_dim]
    key_ok: torch.Tensor  # [B, capacity] bool: column holds a real token (not padding)
    length: int = 0  # columns written so far

    @classmethod
    def empty(cls, config, batch: int, capacity: int, dtype: torch.dtype) -> BatchCache:
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // config.num_attention_heads
        shape = (config.num_hidden_layers, batch, config.num_key_value_heads, capacity, head_dim)
        return cls(
            keys=torch.empty(shape, dtype=dtype).transpose(-1, -2).contiguous(),
            values=torch.empty(shape, dtype=dtype),
            key_ok=torch.zeros((batch, capacity), dtype=torch.bool),
        )

    def shrink(self, keep: torch.Tensor) -> None:
        """Keep only the rows ``keep`` (in that order), e.g. to stop spending compute on finished answers."""
        self.keys = self.keys[:, keep]
        self.values = self.values[:, keep]
        self.key_ok = self.key_ok[keep]


def batched_attention(
    module: torch.nn.Module,
    query: torch.Tensor,  # [B, H, n, D]
    key: torch.Tensor,  # [B, H_kv, n, D], RoPE applied
    value: torch.Tensor,  # [B, H_kv, n, D]
    attention_mask: torch.Tensor | None,
    scaling: float | None = None,
    dropout: float = 0.0,
    batch_cache: BatchCache | None = None,
    **kwargs,
) -> tuple[torch.Tensor, None]:
    if batch_cache is None:
        raise RuntimeError(f"{ATTN_IMPLEMENTATION} attention needs batch_cache=...; use engine.teacher.greedy_topk")
    cache, layer = batch_cache, module.layer_idx
    batch, heads, n, dim = query.shape
    kv_heads = key.shape[1]
    group = heads // kv_heads
    start, end = cache.length, cache.length + n
    cache.keys[layer, ..., start:end] = key.transpose(-1, -2)
    cache.values[layer, :, :, start:end] = value
    keys_t, values = cache.keys[layer, ..., :end], cache.values[layer, :, :, :end]
    # head h reads key/value head h // group: fold each group's queries into one matrix
    q = query.reshape(batch, kv_heads, group * n, dim)
    scores = torch.matmul(q, keys_t).float() * (scaling if scaling is not None else dim**-0.5)
    column = torch.arange(end)
    row = torch.arange(start, end).unsqueeze(1)
    visible = (column <= row) & cache.key_ok[:, None, :end]  # [B, n, end]
    visible |= column == row  # a padding query sees itself, so its (unused) softmax stays finite
    scores = scores.view(batch, kv_heads, group, n, end).masked_fill(~visible[:, None, None], float("-inf"))
    probs = scores.softmax(-1).to(values.dtype).view(batch, kv_heads, group * n, end)
    out = torch.matmul(probs, values).view(batch, heads, n, dim)
    return out.transpose(1, 2), None  # [B, n, H, D]


AttentionInterface.register(ATTN_IMPLEMENTATION, batched_attention)


@dataclass
class GreedyAnswer:
    tokens: torch.Tensor  # [G] int64, ends with the stop token if one was produced
    topk_ids: torch.Tensor  # [G, k] int64, sorted by probability; column 0 is the greedy token
    topk_logp: torch.Tensor  # [G, k] float32 log-probabilities


@torch.inference_mode()
def greedy_topk(
    model, prompts: Sequence[Sequence[int]], max_new_tokens: int, stop_id: int, top_k: int
) -> list[GreedyAnswer]:
    """Greedy answers of ``model`` to ``prompts`` (one batch), with top-k log-probs at each answer position.

    An answer ends with its first stop token or after ``max_new_tokens``.
    Finished rows leave the batch (a copy of the cache) once they make up an
    eighth of it, so short answers stop costing compute soon after they end.
    """
    previous = model.config._attn_implementation
    model.set_attn_implementation(ATTN_IMPLEMENTATION)
    try:
        return _generate(model, prompts, max_new_tokens, stop_id, top_k)
    finally:
        model.set_attn_implementation(previous)


def _generate(model, prompts, max_new_tokens, stop_id, top_k) -> list[GreedyAnswer]:
    batch, width = len(prompts), max(len(p) for p in prompts)
    lengths = torch.tensor([len(p) for p in prompts])
    dtype = next(model.parameters()).dtype
    cache = BatchCache.empty(model.config, batch, width + max_new_tokens, dtype)
    ids = torch.zeros((batch, width), dtype=torch.long)
    for row, p in enumerate(prompts):
        ids[row, width - len(p) :] = torch.tensor(p, dtype=torch.long)
        cache.key_ok[row, width - len(p) : width] = True
    positions = (torch.arange(width) - (width - lengths).unsqueeze(1)).clamp_min(0)
    logits = model(input_ids=ids, position_ids=positions, batch_cache=cache, logits_to_keep=1).logits[:, -1]
    cache.length = width
    out_ids = torch.zeros((batch, max_new_tokens, top_k), dtype=torch.long)
    out_logp = torch.zeros((batch, max_new_tokens, top_k))
    produced = torch.zeros(batch, dtype=torch.long)  # answer length of each prompt so far
    rows = torch.arange(batch)  # prompt of each cache row
    stopped = torch.zeros(batch, dtype=torch.bool)  # per cache row
    for step in range(max_new_tokens):
        top_logp, top_ids = logits.float().log_softmax(-1).topk(top_k, dim=-1)
        live = ~stopped
        out_ids[rows[live], step] = top_ids[live]
        out_logp[rows[live], step] = top_logp[live]
        produced[rows[live]] += 1
        token = top_ids[:, 0]
        stopped |= token == stop_id
        if bool(stopped.all()) or step == max_new_tokens - 1:
            break
        if 8 * int(stopped.sum()) >= len(rows):  # drop finished rows once they are an eighth of the batch
            keep = (~stopped).nonzero().squeeze(1)
            cache.shrink(keep)
            rows, lengths, token, stopped = rows[keep], lengths[keep], token[keep], stopped[keep]
        cache.key_ok[:, cache.length] = True
        step_positions = (lengths + step).unsqueeze(1)
        logits = model(input_ids=token.unsqueeze(1), position_ids=step_positions, batch_cache=cache).logits[:, -1]
        cache.length += 1
    return [
        GreedyAnswer(out_ids[row, :n, 0].clone(), out_ids[row, :n].clone(), out_logp[row, :n].clone())
        for row, n in enumerate(produced.tolist())
    ]
