"""The index tensors of a fixed-shape forward, computed on the device from one packed tensor (so inside a graph).

The eager path (``engine.attention.step_index``) sorts and groups rows on the
host and sizes every tensor to the batch at hand. A captured forward has one
group of ``rows x tokens`` queries over ``span`` keys per row, whatever the
batch: the host fills ``meta`` (each row's past length, then its block table)
and everything else is device arithmetic on fixed shapes.
"""

from __future__ import annotations

import torch

from engine.attention import StepIndex
from engine.attention import _group as group_index
from engine.gpu.graph_plan import GraphKey
from engine.kv import BLOCK_TOKENS, KVStore


def meta_values(stores: list[KVStore], padding: KVStore, key: GraphKey) -> list[int]:
    """``meta`` for ``stores`` padded to ``key.rows`` rows with ``padding`` (past 0), tables ``span`` keys wide."""
    width = key.span // BLOCK_TOKENS
    rows = [*stores, *[padding] * (key.rows - len(stores))]
    pasts = [s.length for s in stores] + [0] * (key.rows - len(stores))
    tables: list[int] = []
    for store in rows:
        tables += store.blocks[:width] + [0] * (width - min(width, len(store.blocks)))
    return pasts + tables


def fixed_step_index(meta: torch.Tensor, key: GraphKey, dtype: torch.dtype) -> StepIndex:
    """The ``StepIndex`` of ``key``'s shape from ``meta`` ([rows * (1 + span / BLOCK_TOKENS)] long). No host reads."""
    rows, tokens, span = key
    device = meta.device
    past = meta[:rows]
    table = meta[rows:].view(rows, span // BLOCK_TOKENS)
    token = torch.arange(rows * tokens, device=device)  # [N] packed order: row r's tokens at r * tokens + i
    row_of_token, offset = token // tokens, token % tokens
    positions = past[row_of_token] + offset
    block = table[row_of_token, positions // BLOCK_TOKENS]
    count = torch.full((rows,), tokens, dtype=torch.long, device=device)
    starts = torch.arange(rows, device=device) * tokens
    group = group_index(past, count, starts, table, tokens, span, dtype)
    return StepIndex(
        write_slots=block * BLOCK_TOKENS + positions % BLOCK_TOKENS,
        position_ids=positions.unsqueeze(0),
        output_index=token,  # one group in row order: its padded outputs are the packed order
        groups=(group,),
    )
