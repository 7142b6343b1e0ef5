"""A ``ModelRunner`` that replays decode and verify forwards as CUDA graphs, one per shape bucket.

The first forward of a bucket (``graph_plan.GraphKey``) runs eagerly on the
bucket's fixed buffers (its result is the forward's, and it warms up cuBLAS
and the allocator), then the same function is captured; later forwards of the
bucket copy their inputs into those buffers and replay. Every other forward
runs ``ModelRunner.forward`` unchanged. Each choice is counted by its reason
(``graph_stats``), so a report says how many forwards replayed and why the
others did not.

A graph holds the addresses of the KV pool's tensors: when the pool grows
(new tensors), the runner drops its graphs and captures again. Graph replays
of one runner are ordered one after the other on the device (each waits on
the last one's event), since its graphs share one memory pool.

Nothing here is on an engine's path unless a pair is wrapped
(``with_cuda_graphs``); on the CPU a wrapped pair runs every forward eagerly.
Verified on a GPU: not yet (docs/gpu.md).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import torch

from engine.attention import PackedBatch
from engine.gpu.graph_index import fixed_step_index, meta_values
from engine.gpu.graph_plan import MAX_TOKENS_PER_ROW, Eager, GraphKey, graph_plan
from engine.kv import BLOCK_TOKENS, KVStore
from engine.models.pair import ModelPair
from engine.runner import ModelRunner, Stage
from engine.transfers import upload

REPLAYED = "graph: replayed"
CAPTURED = "graph: captured (this forward ran eagerly on the graph's buffers)"
RECAPTURE = "graph: all dropped, the KV pool grew"


class GraphBackend:
    """torch.cuda's graphs as the runner uses them; a fake with the same two methods runs the path on the CPU."""

    def pool(self) -> Any:
        return torch.cuda.graph_pool_handle()

    def capture(self, run: Callable[[], None], pool: Any) -> Any:
        """A graph of the kernels ``run`` launches (nothing runs now); its ``replay()`` launches them again."""
        graph = torch.cuda.CUDAGraph()
        # thread_local: other lanes' threads keep launching on their own streams while this one captures
        with torch.cuda.graph(graph, pool=pool, capture_error_mode="thread_local"):
            run()
        return graph


def graph_backend(device: torch.device) -> GraphBackend | None:
    return GraphBackend() if device.type == "cuda" else None


@dataclass
class _Bucket:
    """A captured forward's fixed buffers, filled before each replay."""

    key: GraphKey
    ids: torch.Tensor  # [rows * tokens] long: the packed new tokens, padding rows' after the real ones
    meta: torch.Tensor  # [rows * (1 + span / BLOCK_TOKENS)] long: ``graph_index.meta_values``
    keep: torch.Tensor  # [rows * tokens] long: packed positions whose logits are kept, real ones first
    out: torch.Tensor | None = None  # [rows * tokens, V] float32: written by each run or replay
    graph: Any = None


@dataclass(frozen=True)
class GraphStats:
    """What a graph runner did: forwards per choice, the buckets captured, and each failed capture's error."""

    choices: dict[str, int]
    buckets: tuple[GraphKey, ...]
    failed: dict[str, str] = field(default_factory=dict)

    @property
    def replayed_share(self) -> float | None:
        total = sum(self.choices.values())
        return self.choices.get(REPLAYED, 0) / total if total else None


class GraphRunner(ModelRunner):
    """``runner`` (sharing its model, pool and settings) with decode and verify forwards replayed as graphs."""

    def __init__(self, runner: ModelRunner, backend: GraphBackend | None = None) -> None:
        # no ModelRunner.__init__: the wrapped runner already set the model up; share its state as it is
        self.__dict__.update(runner.__dict__)
        self.graphs = backend if backend is not None else graph_backend(self.device)
        self._buckets: dict[GraphKey, _Bucket] = {}
        self._failed: dict[GraphKey, str] = {}
        self._choices: Counter[str] = Counter()
        self._lock = threading.Lock()  # one lane at a time fills and replays the buffers
        # padding rows' scratch keys, never read by a real row: taken now, since a forward holds the pool's tensors
        # shared and taking blocks may grow the pool, which needs them exclusive
        self._padding = self.new_store(MAX_TOKENS_PER_ROW) if self.graphs is not None else None
        self._graph_pool = self.graphs.pool() if self.graphs is not None else None
        self._captured_over: tuple[torch.Tensor, torch.Tensor] | None = None
        self._last_replay: Any = None  # event after the last graph forward: the next one waits on it

    def graph_stats(self) -> GraphStats:
        with self._lock:
            failed = {str(tuple(k)): v for k, v in self._failed.items()}
            return GraphStats(dict(self._choices), tuple(self._buckets), failed)

    @torch.inference_mode()
    def forward(
        self,
        stores: list[KVStore],
        input_ids: torch.Tensor,  # [N] long, on device
        num_tokens: list[int],  # [B], sums to N
        keep: torch.Tensor,  # [K] long, on device
        stage: Stage | None = None,
    ) -> torch.Tensor:  # [K, V] float32 logits
        ends = [s.length + n for s, n in zip(stores, num_tokens, strict=True)]
        plan = graph_plan(num_tokens, ends, stage, self.graphs is not None)
        if isinstance(plan, GraphKey) and plan in self._failed:
            plan = Eager.CAPTURE_FAILED
        if isinstance(plan, Eager):
            with self._lock:
                self._choices[plan.value] += 1
            return super().forward(stores, input_ids, num_tokens, keep, stage)
        for store, n in zip(stores, num_tokens, strict=True):
            if store.length + n > store.capacity:
                raise RuntimeError(f"KV store overflow: {store.length} + {n} > capacity {store.capacity}")
        if sum(num_tokens) != input_ids.shape[0]:
            raise ValueError(f"packed {input_ids.shape[0]} tokens but the stores take {sum(num_tokens)}")
        with self.pool.tensors.shared():
            backend = self.pool.backend
            for store in stores:
                for fence in store.take_fences():
                    backend.current_stream(self.device).wait_event(fence)
            with self._lock:
                logits = self._graph_forward(plan, stores, input_ids, keep)
        for store, n in zip(stores, num_tokens, strict=True):
            store.length += n
        return logits

    def _graph_forward(
        self, key: GraphKey, stores: list[KVStore], input_ids: torch.Tensor, keep: torch.Tensor
    ) -> torch.Tensor:
        """Fill ``key``'s buffers and replay its graph (capturing it first when new). Holds ``_lock``."""
        backend = self.pool.backend  # None on a CPU pool (a fake graph backend in tests)
        tensors = (self.pool.keys, self.pool.values)
        before = self._captured_over
        grown = before is not None and any(a is not b for a, b in zip(tensors, before, strict=True))
        if grown:
            self._buckets.clear()
            self._choices[RECAPTURE] += 1
        self._captured_over = tensors
        if backend is not None and self._last_replay is not None:
            backend.current_stream(self.device).wait_event(self._last_replay)
        bucket = self._buckets.get(key)
        fresh = bucket is None
        if fresh:
            bucket = self._new_bucket(key)
        n, k = input_ids.shape[0], keep.shape[0]
        bucket.ids[:n].copy_(input_ids)
        bucket.meta.copy_(upload(meta_values(stores, self._padding, key), self.device))
        bucket.keep[:k].copy_(keep)
        if fresh:
            run = self._runner_of(bucket)
            run()
            logits = bucket.out[:k].clone()
            try:
                bucket.graph = self.graphs.capture(run, self._graph_pool)
            except Exception as exc:  # counted and reported; this bucket runs eagerly from now on
                self._failed[key] = f"{type(exc).__name__}: {exc}"
                self._choices[Eager.CAPTURE_FAILED.value] += 1
            else:
                self._buckets[key] = bucket
                self._choices[CAPTURED] += 1
        else:
            bucket.graph.replay()
            logits = bucket.out[:k].clone()
            self._choices[REPLAYED] += 1
        if backend is not None:
            self._last_replay = backend.Event()
            self._last_replay.record(backend.current_stream(self.device))
        return logits

    def _new_bucket(self, key: GraphKey) -> _Bucket:
        size = key.rows * key.tokens
        meta = key.rows * (1 + key.span // BLOCK_TOKENS)
        zeros = {"dtype": torch.long, "device": self.device}
        return _Bucket(key, torch.zeros(size, **zeros), torch.zeros(meta, **zeros), torch.zeros(size, **zeros))

    def _runner_of(self, bucket: _Bucket) -> Callable[[], None]:
        """The forward a bucket captures: fixed buffers in, ``bucket.out`` written."""

        def run() -> None:
            with torch.inference_mode():
                index = fixed_step_index(bucket.meta, bucket.key, self.pool.dtype)
                logits = self.model(
                    input_ids=bucket.ids.unsqueeze(0),
                    position_ids=index.position_ids,
                    use_cache=False,
                    logits_to_keep=bucket.keep,
                    packed_batch=PackedBatch(self.pool, index),
                ).logits
                bucket.out = logits[0].float()

        return run


def with_cuda_graphs(pair: ModelPair, backend: GraphBackend | None = None) -> ModelPair:
    """A copy of ``pair`` whose two runners replay decode and verify forwards as graphs (eagerly on the CPU)."""
    return replace(pair, verifier=GraphRunner(pair.verifier, backend), draft=GraphRunner(pair.draft, backend))


def graph_stats(pair: ModelPair) -> dict[str, GraphStats]:
    """Each wrapped runner's stats, by model name; empty for a pair that is not wrapped."""
    runners = (pair.verifier, pair.draft)
    return {r.name: r.graph_stats() for r in runners if isinstance(r, GraphRunner)}
