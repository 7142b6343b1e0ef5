"""KV caches in one block pool per model, and the packed attention that reads them.

Each model's keys and values live in one ``KVPool``: ``[layers, slots, kv
heads, head dim]`` tensors cut into blocks of ``BLOCK_TOKENS`` slots. Every
request owns one ``KVStore`` per model – a list of blocks allocated once at
admission for its whole life (prompt + max_new_tokens + 1 positions: a draft
never proposes past max_new_tokens, so a verify step always fits) – so nothing
is ever copied to grow it and no step recomputes a prefix. Rolling back
rejected draft tokens is setting ``length`` back: positions past ``length`` are
never read and are overwritten by the next write.

A forward packs the new tokens of any set of requests into one row (batch size
1, no padding) for the model's linear layers. Attention is one call per layer
for the whole batch: ``StepIndex`` (built once per forward, shared by every
layer) says where each new token's keys go in the pool, which slots each row
reads, and how the packed queries spread into a padded ``[rows, longest new
run]`` block with a bottom-right causal mask. Per layer that is a write into
the pool, one gather of the rows' keys and values, one
``scaled_dot_product_attention`` and one gather back: the same operators
whatever the batch size. The mask is additive (0 or -inf, the pool's dtype),
made once per forward: SDPA would otherwise turn a boolean mask into one in
every layer. The gather copies the rows' prefixes once per layer;
the measurements that chose it over a loop of per-request calls are in
docs/results.md ("One attention call per layer").

The attention function is registered with transformers' ``AttentionInterface``
under ``ATTN_IMPLEMENTATION``; models switch to it with
``model.set_attn_implementation(ATTN_IMPLEMENTATION)``. Models without a mask
function for this name get no mask built by transformers, which is what we
want: ``StepIndex`` holds the mask.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, NamedTuple

import torch
import torch.nn.functional as F
from transformers import AttentionInterface

from engine import devices
from engine.shared_lock import SharedExclusiveLock
from engine.transfers import upload

ATTN_IMPLEMENTATION = "pdv_packed"
BLOCK_TOKENS = 16  # slots per block: small enough that a store wastes < 16 slots, large enough for short tables
ZERO_SLOT = 0  # never handed out and never written: padded reads point here, and zeros keep the padding finite
FIRST_POOL_BLOCKS = 64  # a pool starts at 1,024 slots and doubles when admission needs more


class KVPool:
    """All keys and values of one model, in blocks; a free list hands blocks to stores.

    keys, values: [num_layers, slots, num_kv_heads, head_dim]; slot s of block b is b * BLOCK_TOKENS + s.
    Block 0 holds the zero slot and is never handed out.

    ``lock`` guards the bookkeeping (the free list and fences). ``tensors``
    (``engine.shared_lock``) guards the tensors: every forward holds it shared,
    so lanes' forwards run at once, and growth, which replaces both tensors,
    holds it exclusive, so a forward never writes into a tensor growth has
    already copied. Forwards at once are safe because each writes only the
    slots of its own stores' blocks, and a store's blocks belong to it alone
    from ``allocate`` to ``release``; a store is advanced by one lane at a
    time (a request is in one stage at a time), and every forward reads only
    its own stores' blocks and the zero slot, which nothing writes.

    On CUDA a released block carries a *fence*, an event recorded on the
    releasing thread's current stream: the next store to get the block makes
    its own stream wait on the fence before its first write
    (``take_fences``), so a lane never overwrites keys another lane's queued
    kernels still read. Growth synchronizes the device before copying: it is
    rare (the pool doubles) and every lane's stream has used the old tensors.
    ``backend`` is ``engine.devices.stream_backend(device)`` unless given (a fake in tests).
    """

    def __init__(
        self,
        num_layers: int,
        num_kv_heads: int,
        head_dim: int,
        dtype: torch.dtype,
        device: torch.device,
        backend: Any = None,
    ) -> None:
        self.shape_tail = (num_kv_heads, head_dim)
        self.num_layers, self.dtype, self.device = num_layers, dtype, device
        self.backend = backend if backend is not None else devices.stream_backend(device)
        self.lock = threading.RLock()  # re-entered when a store's finalizer releases blocks inside an allocation
        self.tensors = SharedExclusiveLock()
        self.keys = self._zeros(FIRST_POOL_BLOCKS)
        self.values = self._zeros(FIRST_POOL_BLOCKS)
        self._free = list(range(FIRST_POOL_BLOCKS - 1, 0, -1))  # popped from the end: lowest block first
        self._fences: dict[int, Any] = {}  # block -> event its last user's stream recorded at release (CUDA)

    def _zeros(self, blocks: int) -> torch.Tensor:
        shape = (self.num_layers, blocks * BLOCK_TOKENS, *self.shape_tail)
        return torch.zeros(shape, dtype=self.dtype, device=self.device)

    @property
    def num_blocks(self) -> int:
        return self.keys.shape[1] // BLOCK_TOKENS

    @property
    def free_blocks(self) -> int:
        return len(self._free)

    def allocate(self, blocks: int) -> tuple[list[int], list[Any]]:
        """Hand out ``blocks`` blocks (growing the pool when too few are free) and the fences they carry."""
        with self.lock:
            if blocks <= len(self._free):
                return self._take(blocks)
        # growth waits for every running forward; tensors before bookkeeping, the order forwards take them in
        with self.tensors.exclusive(), self.lock:
            if blocks > len(self._free):
                self._grow(blocks - len(self._free))
            return self._take(blocks)

    def _take(self, blocks: int) -> tuple[list[int], list[Any]]:
        taken = [self._free.pop() for _ in range(blocks)]
        fences = [f for f in (self._fences.pop(b, None) for b in taken) if f is not None]
        return taken, list(dict.fromkeys(fences))

    def release(self, blocks: list[int]) -> None:
        """Return ``blocks``; on CUDA fenced by an event on the calling thread's current stream."""
        fence = None
        if self.backend is not None:
            fence = self.backend.Event()
            fence.record(self.backend.current_stream(self.device))
        with self.lock:
            self._free.extend(sorted(blocks, reverse=True))
            if fence is not None:
                self._fences.update(dict.fromkeys(blocks, fence))

    def _grow(self, missing: int) -> None:
        old = self.num_blocks
        new = max(2 * old, old + missing)
        if self.backend is not None:
            self.backend.synchronize(self.device)  # every lane's queued reads and writes of the old tensors
        for name in ("keys", "values"):
            grown = self._zeros(new)
            grown[:, : old * BLOCK_TOKENS] = getattr(self, name)
            setattr(self, name, grown)
        self._free = list(range(new - 1, old - 1, -1)) + self._free


class KVStore:
    """One request's keys and values in one model: the pool blocks it owns and how many positions are valid.

    Its blocks return to the pool when the store is garbage-collected or ``free`` is called.
    """

    __slots__ = ("pool", "blocks", "length", "fences", "_finalizer", "__weakref__")

    def __init__(self, pool: KVPool, capacity: int) -> None:
        self.pool = pool
        self.blocks, self.fences = pool.allocate(-(-capacity // BLOCK_TOKENS))
        self.length = 0  # valid positions; everything at or past it is garbage
        self._finalizer = weakref.finalize(self, pool.release, self.blocks)

    @property
    def capacity(self) -> int:
        return len(self.blocks) * BLOCK_TOKENS

    @property
    def dtype(self) -> torch.dtype:
        return self.pool.dtype

    def truncate(self, length: int) -> None:
        """Forget every position at or after ``length`` (rollback of rejected drafts)."""
        if not 0 <= length <= self.length:
            raise ValueError(f"cannot truncate a cache of length {self.length} to {length}")
        self.length = length

    def take_fences(self) -> list[Any]:
        """The events the first forward must wait on before writing (blocks' previous users); empties them."""
        fences, self.fences = self.fences, []
        return fences

    def free(self) -> None:
        """Return the blocks to the pool now; the store must not be used afterwards."""
        self._finalizer()


class StepIndex(NamedTuple):
    """Where a packed forward's tokens go and what they read, built once per forward for every layer.

    B = rows, N = packed new tokens, Q = the longest row's new tokens, K = the longest row's end.
    """

    write_slots: torch.Tensor  # [N] long: pool slot of each new token's key/value
    position_ids: torch.Tensor  # [1, N] long: absolute position of each new token
    read_slots: torch.Tensor  # [B * K] long: slots of each row's keys 0..end-1, ZERO_SLOT beyond
    query_index: torch.Tensor  # [B * Q] long: packed token at each padded query position (0 for padding)
    output_index: torch.Tensor  # [N] long: padded position of each packed token
    mask: torch.Tensor  # [B, 1, Q, K] additive, the pool's dtype: 0 where query i of row b sees key j
    # (j <= past_b + i; a padded query sees key 0), -inf elsewhere
    rows: int
    width: int  # Q
    span: int  # K


def step_index(stores: list[KVStore], num_tokens: list[int], device: torch.device) -> StepIndex:
    """The index tensors of one packed forward: one host-to-device copy, then device arithmetic.

    The host packs every row's (past, new tokens) and block table into one
    tensor, so a GPU sees one upload per forward however many rows there are.
    """
    rows = len(stores)
    pasts = [s.length for s in stores]
    width = max(num_tokens)
    span = max(p + n for p, n in zip(pasts, num_tokens, strict=True))
    table_width = -(-span // BLOCK_TOKENS)
    host = [*pasts, *num_tokens]
    for s in stores:
        host += s.blocks[:table_width] + [0] * (table_width - min(table_width, len(s.blocks)))
    packed = upload(host, device)
    past, count = packed[:rows], packed[rows : 2 * rows]
    table = packed[2 * rows :].view(rows, table_width)  # [B, blocks]
    end = past + count

    key_pos = torch.arange(span, device=device)  # [K]
    slots = table[:, key_pos // BLOCK_TOKENS] * BLOCK_TOKENS + key_pos % BLOCK_TOKENS  # [B, K]
    read_slots = torch.where(key_pos < end.unsqueeze(1), slots, ZERO_SLOT).view(-1)

    query_pos = torch.arange(width, device=device)  # [Q]
    starts = torch.cumsum(count, 0) - count  # [B] packed index of each row's first new token
    real_query = query_pos < count.unsqueeze(1)  # [B, Q]
    query_index = torch.where(real_query, starts.unsqueeze(1) + query_pos, 0).view(-1)
    sees = key_pos <= (past.unsqueeze(1) + query_pos).unsqueeze(2)  # [B, Q, K]
    sees |= ~real_query.unsqueeze(2) & (key_pos == 0)  # a padded query attends to key 0: no all-masked row (NaN)

    mask = torch.zeros(sees.shape, dtype=stores[0].dtype, device=device).masked_fill_(~sees, float("-inf"))

    row_of_token = torch.repeat_interleave(torch.arange(rows, device=device), count)  # [N]
    offset = torch.arange(row_of_token.shape[0], device=device) - starts[row_of_token]  # [N] i within its row
    positions = past[row_of_token] + offset
    write_slots = slots[row_of_token, positions]
    return StepIndex(
        write_slots=write_slots,
        position_ids=positions.unsqueeze(0),
        read_slots=read_slots,
        query_index=query_index,
        output_index=row_of_token * width + offset,
        mask=mask.unsqueeze(1),
        rows=rows,
        width=width,
        span=span,
    )


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
    k = keys.index_select(0, ix.read_slots).view(ix.rows, ix.span, kv_heads, dim).transpose(1, 2)  # [B, H_kv, K, D]
    v = values.index_select(0, ix.read_slots).view(ix.rows, ix.span, kv_heads, dim).transpose(1, 2)
    q = query[0].transpose(0, 1).index_select(0, ix.query_index)  # [B * Q, H, D]
    q = q.view(ix.rows, ix.width, heads, dim).transpose(1, 2)  # [B, H, Q, D]
    o = F.scaled_dot_product_attention(q, k, v, attn_mask=ix.mask, scale=scaling, enable_gqa=True)  # [B, H, Q, D]
    out = o.transpose(1, 2).reshape(ix.rows * ix.width, heads, dim).index_select(0, ix.output_index)  # [N, H, D]
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
