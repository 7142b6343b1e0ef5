"""Packed attention over the KV pool: a few padded calls per layer for the whole batch.

A forward packs the new tokens of any set of requests into one row (batch
size 1, no padding) for the model's linear layers. Attention needs each row's
own keys, so the rows are spread into padded blocks: a *group* of rows is one
``[rows, longest new run]`` block of queries over ``[rows, longest end]``
keys with a bottom-right causal mask, and one ``scaled_dot_product_attention``
call. ``StepIndex`` (built once per forward, shared by every layer) says
where each new token's keys go in the pool and, per group, which slots each
row reads and where its queries and outputs sit. Per layer that is a write
into the pool and, per group, one gather of the rows' keys and values, one
SDPA call and one gather back.

How many groups: padding costs work in proportion to the padded block, and a
group costs a fixed number of operators. One row with a long prompt among
short ones pads every row to its length (a batch of 16 with two prompts of
430 and 620 tokens among fourteen of 30–90 spent a third of its step on
padding). ``attention_groups`` sorts the rows by where their keys end and
splits where the padding it saves is worth more than a group's fixed cost
(``GROUP_OVERHEAD``), up to ``MAX_GROUPS`` groups: so the operators per layer
are bounded by the group count, never by the batch size, and rows of similar
length stay in one call.

Padding changes a row's numbers only in the last bits: a padded key's score
is ``-inf`` (the mask is additive, made once per forward in the pool's dtype)
and adds zero to the softmax, but SDPA's CPU kernel blocks the keys by the
padded length, so the additions run in another order, as they do when the
same row runs in another batch (about 4e-5 on logits of 30 for smol).

The attention function is registered with transformers' ``AttentionInterface``
under ``ATTN_IMPLEMENTATION``; models switch to it with
``model.set_attn_implementation(ATTN_IMPLEMENTATION)``. Models without a mask
function for this name get no mask built by transformers, which is what we
want: ``StepIndex`` holds the masks.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from transformers import AttentionInterface

from engine.kv import BLOCK_TOKENS, ZERO_SLOT, KVPool, KVStore
from engine.transfers import upload

ATTN_IMPLEMENTATION = "pdv_packed"
# a group's fixed cost in padded-cost units (``padded_cost``; 16 decode rows x 64 keys): on the smol verifier over
# the load prompts, 512 to 8,192 measured level and 0 no better (docs/results.md, "Padding in the packed attention")
GROUP_OVERHEAD = 2048
MAX_GROUPS = 4


def padded_cost(rows: int, width: int, span: int) -> int:
    """The padded work of a group in units of one key: each row gathers ``span`` keys, and its ``width``
    queries score all of them."""
    return rows * span * (1 + width)


def attention_groups(
    ends: list[int], widths: list[int], overhead: int = GROUP_OVERHEAD, most: int = MAX_GROUPS
) -> list[list[int]]:
    """The rows (by index) in groups of one padded attention call each, rows sorted by end within and across.

    ``ends[r]`` is where row r's keys end (past + new tokens), ``widths[r]``
    its new tokens. Starting from one group, the split that saves the most
    padded cost is taken while it saves more than ``overhead`` and fewer than
    ``most`` groups exist. Pure; O(most x rows).
    """
    order = sorted(range(len(ends)), key=lambda r: (ends[r], widths[r]))
    exact = sum(padded_cost(1, widths[r], ends[r]) for r in order)
    if padded_cost(len(order), max(widths), max(ends)) - exact <= overhead:
        return [order]  # no split can pay: the common case of rows of similar length
    segments = [(0, len(order))]
    while len(segments) < most:
        saving, at = max((_best_split(order, ends, widths, a, b), i) for i, (a, b) in enumerate(segments))
        if saving[0] <= overhead:
            break
        a, b = segments[at]
        segments[at : at + 1] = [(a, saving[1]), (saving[1], b)]
    return [order[a:b] for a, b in segments]


def _best_split(order: list[int], ends: list[int], widths: list[int], a: int, b: int) -> tuple[int, int]:
    """(padded cost saved, split position) of the best split of ``order[a:b]``; (0, a) if none saves."""
    suffix_width = [0] * (b - a + 1)
    for i in range(b - 1, a - 1, -1):
        suffix_width[i - a] = max(suffix_width[i - a + 1], widths[order[i]])
    whole = padded_cost(b - a, suffix_width[0], ends[order[b - 1]])
    best, prefix_width = (0, a), 0
    for k in range(a + 1, b):
        prefix_width = max(prefix_width, widths[order[k - 1]])
        left = padded_cost(k - a, prefix_width, ends[order[k - 1]])
        right = padded_cost(b - k, suffix_width[k - a], ends[order[b - 1]])
        best = max(best, (whole - left - right, k))
    return best


class GroupIndex(NamedTuple):
    """One padded attention call: R rows, Q = their longest new run, K = their longest end."""

    read_slots: torch.Tensor  # [R * K] long: slots of each row's keys 0..end-1, ZERO_SLOT beyond
    query_index: torch.Tensor  # [R * Q] long: packed token at each padded query position (0 for padding)
    mask: torch.Tensor  # [R, 1, Q, K] additive, the pool's dtype: 0 where query i of row r sees key j
    # (j <= past_r + i; a padded query sees key 0), -inf elsewhere
    rows: int
    width: int  # Q
    span: int  # K


class StepIndex(NamedTuple):
    """Where a packed forward's N new tokens go and what they read, built once per forward for every layer."""

    write_slots: torch.Tensor  # [N] long: pool slot of each new token's key/value
    position_ids: torch.Tensor  # [1, N] long: absolute position of each new token
    output_index: torch.Tensor  # [N] long: each packed token's position in the groups' padded outputs, in order
    groups: tuple[GroupIndex, ...]


def step_index(
    stores: list[KVStore], num_tokens: list[int], device: torch.device, overhead: int = GROUP_OVERHEAD
) -> StepIndex:
    """The index tensors of one packed forward: one host-to-device copy, then device arithmetic.

    The host packs every row's past, new tokens, group order, output offset
    and block table into one tensor, so a GPU sees one upload per forward
    however many rows and groups there are. ``overhead``: a group's fixed
    cost for ``attention_groups`` (a benchmark varies it).
    """
    rows = len(stores)
    pasts = [s.length for s in stores]
    ends = [p + n for p, n in zip(pasts, num_tokens, strict=True)]
    groups = attention_groups(ends, num_tokens, overhead)
    shapes = [(len(g), max(num_tokens[r] for r in g), max(ends[r] for r in g)) for g in groups]
    order = [r for g in groups for r in g]
    out_offset = [0] * rows  # where each row's padded outputs start in the groups' concatenated outputs
    base = 0
    for g, (n, width, _) in zip(groups, shapes, strict=True):
        for i, r in enumerate(g):
            out_offset[r] = base + i * width
        base += n * width
    table_width = -(-max(ends) // BLOCK_TOKENS)
    host = [*pasts, *num_tokens, *order, *out_offset]
    for s in stores:
        host += s.blocks[:table_width] + [0] * (table_width - min(table_width, len(s.blocks)))
    packed = upload(host, device)
    past, count, sorted_rows, offsets = packed[: 4 * rows].view(4, rows)
    table = packed[4 * rows :].view(rows, table_width)  # [B, blocks]
    starts = torch.cumsum(count, 0) - count  # [B] packed index of each row's first new token

    row_of_token = torch.repeat_interleave(torch.arange(rows, device=device), count)  # [N]
    offset = torch.arange(row_of_token.shape[0], device=device) - starts[row_of_token]  # [N] i within its row
    positions = past[row_of_token] + offset
    block = table[row_of_token, positions // BLOCK_TOKENS]
    first, dtype = 0, stores[0].dtype
    indexes = []
    for n, width, span in shapes:
        members = sorted_rows[first : first + n]
        first += n
        indexes.append(_group(past[members], count[members], starts[members], table[members], width, span, dtype))
    return StepIndex(
        write_slots=block * BLOCK_TOKENS + positions % BLOCK_TOKENS,
        position_ids=positions.unsqueeze(0),
        output_index=offsets[row_of_token] + offset,
        groups=tuple(indexes),
    )


def _group(past, count, starts, table, width: int, span: int, dtype: torch.dtype) -> GroupIndex:
    """One group's index tensors from its rows' pasts, new-token counts, first packed tokens and block tables."""
    device = past.device
    end = past + count
    key_pos = torch.arange(span, device=device)  # [K]
    slots = table[:, key_pos // BLOCK_TOKENS] * BLOCK_TOKENS + key_pos % BLOCK_TOKENS  # [R, K]
    read_slots = torch.where(key_pos < end.unsqueeze(1), slots, ZERO_SLOT).view(-1)
    query_pos = torch.arange(width, device=device)  # [Q]
    real_query = query_pos < count.unsqueeze(1)  # [R, Q]
    query_index = torch.where(real_query, starts.unsqueeze(1) + query_pos, 0).view(-1)
    sees = key_pos <= (past.unsqueeze(1) + query_pos).unsqueeze(2)  # [R, Q, K]
    sees |= ~real_query.unsqueeze(2) & (key_pos == 0)  # a padded query attends to key 0: no all-masked row (NaN)
    mask = torch.zeros(sees.shape, dtype=dtype, device=device).masked_fill_(~sees, float("-inf"))
    return GroupIndex(read_slots, query_index, mask.unsqueeze(1), past.shape[0], width, span)


class PackedBatch(NamedTuple):
    """What ``packed_attention`` needs besides the layer's own tensors."""

    pool: KVPool
    index: StepIndex


def packed_attention(
    module: torch.nn.Module,
    query: torch.Tensor,  # [1, H, N, D]   N = total new tokens of all rows
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
    pool, ix = packed_batch
    layer = module.layer_idx
    keys, values = pool.keys[layer], pool.values[layer]  # [slots, H_kv, D]
    keys.index_copy_(0, ix.write_slots, key[0].transpose(0, 1))
    values.index_copy_(0, ix.write_slots, value[0].transpose(0, 1))
    heads, kv_heads, dim = query.shape[1], key.shape[1], query.shape[3]
    queries = query[0].transpose(0, 1)  # [N, H, D]
    outs = []
    for g in ix.groups:
        k = keys.index_select(0, g.read_slots).view(g.rows, g.span, kv_heads, dim).transpose(1, 2)  # [R, H_kv, K, D]
        v = values.index_select(0, g.read_slots).view(g.rows, g.span, kv_heads, dim).transpose(1, 2)
        q = queries.index_select(0, g.query_index).view(g.rows, g.width, heads, dim).transpose(1, 2)  # [R, H, Q, D]
        o = F.scaled_dot_product_attention(q, k, v, attn_mask=g.mask, scale=scaling, enable_gqa=True)
        outs.append(o.transpose(1, 2).reshape(g.rows * g.width, heads, dim))
    padded = outs[0] if len(outs) == 1 else torch.cat(outs)
    return padded.index_select(0, ix.output_index).unsqueeze(0), None  # [1, N, H, D]


AttentionInterface.register(ATTN_IMPLEMENTATION, packed_attention)
