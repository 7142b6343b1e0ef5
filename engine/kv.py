"""KV caches in one block pool per model: the pool, each request's store of blocks, and the KV budget.

Each model's keys and values live in one ``KVPool``: ``[layers, slots, kv
heads, head dim]`` tensors cut into blocks of ``BLOCK_TOKENS`` slots. Every
request owns one ``KVStore`` per model – a list of blocks allocated once at
admission for its whole life (prompt + max_new_tokens + 1 positions: a draft
never proposes past max_new_tokens, so a verify step always fits) – so nothing
is ever copied to grow it and no step recomputes a prefix. Rolling back
rejected draft tokens is setting ``length`` back: positions past ``length`` are
never read and are overwritten by the next write.

The packed attention that reads the pool is ``engine.attention``.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import torch

from engine import devices
from engine.shared_lock import SharedExclusiveLock

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
