"""A CUDA backend for the CPU that reports every missing wait and every missing ``record_stream``.

It implements ``engine.devices.CudaBackend`` for tensors that stay on the CPU,
so the engine's CUDA paths run unchanged (``fake_cuda`` below installs it as
``engine.devices.stream_backend``). Kernels still run on the calling thread,
at once; what the fake adds is the ordering CUDA would give them: each stream
keeps a vector clock, an event records its stream's clock, a stream that
waits on an event merges it, a blocking read-back (a copy to the host, a
scalar read) or a synchronize marks work as done. The current stream is kept
per thread, as CUDA keeps it.

While a thread is inside ``stream(s)``, a dispatch mode (``StreamTracer``)
sees every operator it runs, as a kernel queued on ``s``:

* a read of memory another stream wrote, or a write to memory another stream
  read or wrote, must be ordered after that access (``Hazard.UNORDERED``);
* memory allocated on one stream and used by another must, when it is freed,
  be marked with ``record_stream`` for that stream or be done with
  (``Hazard.FREED_IN_USE``): the caching allocator hands freed memory to the
  next allocation on its own stream at once.

Memory is tracked per storage; a KV pool's storages (``watch_pool``) per
block, because lanes write different requests' blocks of one pool at once
(``index_copy_`` and ``index_select`` along the slots say which blocks).
``fail_kernels`` makes every later operator raise a CUDA error, as a real
one (sticky, for the whole process) would.
"""

from __future__ import annotations

import threading
import weakref
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, NamedTuple

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from engine import devices
from engine.devices import AllocatorMemory
from engine.kv import BLOCK_TOKENS, KVPool

BLOCKING_READS = (
    torch.ops.aten._local_scalar_dense.default,
    torch.ops.aten.is_nonzero.default,
    torch.ops.aten.item.default,
)
FAKE_MEMORY = AllocatorMemory(allocated_mb=11.0, reserved_mb=32.0, peak_allocated_mb=17.0, peak_reserved_mb=64.0)
INDEXED = {torch.ops.aten.index_copy_.default: 2, torch.ops.aten.index_select.default: 2}  # op -> index arg


class Hazard(StrEnum):
    UNORDERED = "unordered access"  # no event orders this stream's access after another stream's
    FREED_IN_USE = "freed in use"  # freed with another stream's use neither done nor recorded


class Finding(NamedTuple):
    hazard: Hazard
    op: str  # the operator (or "free") that found it
    stream: str  # the stream of the access or of the allocation
    other: str  # the stream whose access is not ordered before it


class FakeStream:
    def __init__(self, cuda: FakeCuda, name: str, priority: int = 0) -> None:
        self.cuda, self.name, self.priority = cuda, name, priority
        self.clock: dict[str, int] = {name: 0}  # vector clock: how far each stream's work is ordered before ours

    def wait_event(self, event: FakeEvent) -> None:
        with self.cuda.lock:
            for name, tick in event.clock.items():
                self.clock[name] = max(self.clock.get(name, 0), tick)

    def wait_stream(self, other: FakeStream) -> None:
        event = FakeEvent(self.cuda)
        event.record(other)
        self.wait_event(event)

    def __repr__(self) -> str:
        return f"FakeStream({self.name})"


class FakeEvent:
    def __init__(self, cuda: FakeCuda) -> None:
        self.cuda = cuda
        self.clock: dict[str, int] = {}
        self.stream: FakeStream | None = None

    def record(self, stream: FakeStream | None = None) -> None:
        with self.cuda.lock:
            self.stream = stream if stream is not None else self.cuda.current_stream()
            self.clock = dict(self.stream.clock)

    def query(self) -> bool:
        """Done: the device got past this point (only what a host wait made certain counts)."""
        with self.cuda.lock:
            return all(self.cuda.done.get(name, 0) >= tick for name, tick in self.clock.items())

    def synchronize(self) -> None:
        with self.cuda.lock:
            self.cuda.host_waits += 1
            self.cuda.mark_done(self.clock)


@dataclass
class Access:
    stream: str
    tick: int


@dataclass
class Memory:
    """What the tracer knows of one storage (or one block of a watched pool)."""

    allocated_on: str | None  # None: made outside every stream (weights, the host)
    write: Access | None = None
    reads: dict[str, Access] = field(default_factory=dict)  # last read per stream since the write
    users: dict[str, Access] = field(default_factory=dict)  # last access per stream, for the free check
    recorded: set[str] = field(default_factory=set)  # streams record_stream marked it for


class FakeCuda:
    """The backend: ``engine.devices.CudaBackend``'s methods, plus what tests read (``findings``, ``pinned``)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self._local = threading.local()
        self.default = FakeStream(self, "default")
        self.streams = [self.default]
        self.done: dict[str, int] = {}  # per stream, the tick a host wait has seen it finish
        self.storages: dict[int, Memory] = {}  # id(storage) -> what happened to it
        self.blocks: dict[tuple[int, int], Memory] = {}  # (id(pool storage), block) -> ...
        self.pools: list[KVPool] = []
        self.findings: list[Finding] = []
        self.host_waits = 0  # event synchronizes (the staging buffer's waits)
        self.pinned = 0  # host buffers pinned
        self.fresh_memories = 0  # caches emptied and peaks reset
        self.failure: str | None = None

    # ---------------------------------------------------------- the backend
    def Stream(self, device=None, priority: int = 0) -> FakeStream:  # noqa: N802 - mirrors torch.cuda.Stream
        with self.lock:
            stream = FakeStream(self, f"s{len(self.streams)}", priority)
            self.streams.append(stream)
        return stream

    def Event(self) -> FakeEvent:  # noqa: N802 - mirrors torch.cuda.Event
        return FakeEvent(self)

    @contextmanager
    def stream(self, stream: FakeStream):
        """Make ``stream`` current on this thread; its operators are traced as kernels on it."""
        before = getattr(self._local, "current", None)
        self._local.current = stream
        tracer = None
        if getattr(self._local, "tracer", None) is None:  # one tracer per thread: nested contexts share it
            tracer = self._local.tracer = StreamTracer(self)
            tracer.__enter__()
        try:
            yield
        finally:
            if tracer is not None:
                tracer.__exit__(None, None, None)
                self._local.tracer = None
            self._local.current = before

    def current_stream(self, device=None) -> FakeStream:
        return getattr(self._local, "current", None) or self.default

    def synchronize(self, device=None) -> None:
        with self.lock:
            for stream in self.streams:
                self.mark_done(stream.clock)

    def record_stream(self, tensor: torch.Tensor, stream: FakeStream) -> None:
        with self.lock:
            self._memory(tensor.untyped_storage(), stream.name).recorded.add(stream.name)

    def pin(self, tensor: torch.Tensor) -> torch.Tensor:
        self.pinned += 1
        return tensor

    def fresh_memory(self, device=None) -> None:
        self.fresh_memories += 1

    def memory(self, device=None) -> AllocatorMemory:
        """Figures no CPU has: the fake's own, so a test can tell they were read and written through."""
        return FAKE_MEMORY

    # ----------------------------------------------------------- for tests
    def watch_pool(self, pool: KVPool) -> None:
        """Track ``pool``'s keys and values per block (its ``backend`` must be this fake)."""
        self.pools.append(pool)

    def fail_kernels(self, message: str = "CUDA error: an illegal memory access was encountered") -> None:
        """Every operator a stream runs from now on raises ``torch.AcceleratorError(message)``."""
        self.failure = message

    def mark_done(self, clock: dict[str, int]) -> None:
        for name, tick in clock.items():
            self.done[name] = max(self.done.get(name, 0), tick)

    # ------------------------------------------------------- the bookkeeping
    def _ordered(self, access: Access, stream: FakeStream) -> bool:
        """``access`` happens before whatever ``stream`` runs next."""
        if access.stream == stream.name:
            return True
        return max(stream.clock.get(access.stream, 0), self.done.get(access.stream, 0)) >= access.tick

    def _memory(self, storage: torch.UntypedStorage, stream: str | None) -> Memory:
        key = id(storage)
        if key not in self.storages:
            self.storages[key] = Memory(allocated_on=stream)
            weakref.finalize(storage, self._freed, key)
        return self.storages[key]

    def _freed(self, key: int) -> None:
        with self.lock:
            memory = self.storages.pop(key, None)
            if memory is None or memory.allocated_on is None:
                return
            owner = next(s for s in self.streams if s.name == memory.allocated_on)
            for name, access in memory.users.items():
                if name not in memory.recorded and not self._ordered(access, owner):
                    self.findings.append(Finding(Hazard.FREED_IN_USE, "free", owner.name, name))

    def access(self, memory: Memory, stream: FakeStream, write: bool, op: str) -> None:
        tick = stream.clock[stream.name]
        others = [memory.write] if memory.write is not None else []
        if write:
            others += list(memory.reads.values())
        for other in others:
            if not self._ordered(other, stream):
                self.findings.append(Finding(Hazard.UNORDERED, op, stream.name, other.stream))
        here = Access(stream.name, tick)
        if write:
            memory.write, memory.reads = here, {}
        else:
            memory.reads[stream.name] = here
        memory.users[stream.name] = here


def _tensors(value: Any) -> list[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in _tensors(v)]
    return []


class StreamTracer(TorchDispatchMode):
    """Each operator of its thread, as a kernel on the thread's current stream of ``cuda``."""

    def __init__(self, cuda: FakeCuda) -> None:
        super().__init__()
        self.cuda = cuda

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        cuda = self.cuda
        if cuda.failure is not None:
            raise torch.AcceleratorError(cuda.failure)
        out = func(*args, **kwargs)
        schema = func._schema
        if schema.returns and all(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
            return out  # a view: no kernel, no access
        stream = cuda.current_stream()
        with cuda.lock:
            stream.clock[stream.name] += 1
            inputs = {}
            values = list(args) + [kwargs.get(a.name) for a in schema.arguments[len(args) :]]
            for arg, value in zip(schema.arguments, values, strict=False):
                written = arg.alias_info is not None and arg.alias_info.is_write
                for tensor in _tensors(value):
                    inputs[id(tensor.untyped_storage())] = tensor
                    self._touch(tensor, stream, written, func, args)
            for tensor in _tensors(out):
                storage = tensor.untyped_storage()
                if id(storage) not in inputs:  # a fresh allocation on this stream, or an out= argument
                    cuda.access(cuda._memory(storage, stream.name), stream, True, str(func))
            if func in BLOCKING_READS or (
                func is torch.ops.aten._to_copy.default
                and kwargs.get("device") == torch.device("cpu")
                and not kwargs.get("non_blocking", False)
            ):
                cuda.mark_done(stream.clock)  # the host waited for this stream up to here
        return out

    def _touch(self, tensor: torch.Tensor, stream: FakeStream, write: bool, func, args) -> None:
        cuda, storage = self.cuda, tensor.untyped_storage()
        pool_storages = {id(t.untyped_storage()) for p in cuda.pools for t in (p.keys, p.values)}
        if id(storage) in pool_storages:
            index_at = INDEXED.get(func)
            if index_at is not None and tensor is args[0]:
                blocks = {int(s) // BLOCK_TOKENS for s in args[index_at].reshape(-1).tolist()}
            else:  # a whole-pool operator (growth's copy): every block
                blocks = {b for (key, b) in cuda.blocks if key == id(storage)}
            for block in blocks:
                memory = cuda.blocks.setdefault((id(storage), block), Memory(allocated_on=None))
                cuda.access(memory, stream, write, str(func))
            return
        cuda.access(cuda._memory(storage, None), stream, write, str(func))


@pytest.fixture
def fake_cuda(monkeypatch) -> FakeCuda:
    """The fake as every CPU device's stream backend: engines built in the test run their CUDA paths on it."""
    cuda = FakeCuda()
    monkeypatch.setattr(devices, "stream_backend", lambda device: cuda)
    return cuda


def on_fake(pair, cuda: FakeCuda, monkeypatch) -> None:
    """Point ``pair``'s KV pools (built before the fake) at ``cuda``, watched per block, until the test ends
    (the fences of blocks released meanwhile are the fake's, and are dropped with it)."""
    for runner in (pair.verifier, pair.draft):
        if runner is not None:
            monkeypatch.setattr(runner.pool, "backend", cuda)
            monkeypatch.setattr(runner.pool, "_fences", {})
            cuda.watch_pool(runner.pool)
