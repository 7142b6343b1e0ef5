"""Validated configuration values shared by every engine.

``python -m workloads replay`` has a flag for every field of ``SamplingParams``
and ``EngineConfig`` and for the draft-length settings of ``ControllerConfig``
(``add_controller_args``); ``python -m engine generate`` shares the sampling and
draft-length flags and runs with the default ``EngineConfig``. Only
``ControllerConfig.allow_zero`` has no flag. Defaults carry a comment saying why.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

ENGINES = ("ar", "baseline", "pd", "pdv")
CONTROLLERS = ("fixed", "feedback", "goodput")
DTYPES = ("float32", "bfloat16", "float16")  # --dtype: one dtype for both models
DTYPE_HELP = "one dtype for both models (default: float32 on the CPU, bfloat16 on CUDA; a distilled draft its own)"


@dataclass(frozen=True)
class SamplingParams:
    temperature: float = 0.0  # greedy by default: outputs are then checkable token for token
    top_p: float = 1.0
    top_k: int = 0  # 0 = no top-k truncation
    max_new_tokens: int = 128
    seed: int | None = None  # per-request generator, so a request's samples do not depend on batching
    stop_token_ids: tuple[int, ...] | None = None  # None = the model's end-of-sequence tokens

    def __post_init__(self) -> None:
        if not (self.temperature >= 0 and math.isfinite(self.temperature)):  # also refuses nan
            raise ValueError(f"temperature must be a finite number >= 0, got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 0:
            raise ValueError(f"top_k must be >= 0, got {self.top_k}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class ControllerConfig:
    kind: str = "fixed"
    draft_len: int = 4  # start (and, for "fixed", constant) draft length: a common sweet spot for small drafts
    min_len: int = 1
    max_len: int = 8  # beyond 8 the acceptance of a small draft rarely pays for the extra draft passes
    allow_zero: bool = True  # feedback may switch speculation off (L = 0) under heavy load
    target_verify_queue: int = 2  # PDV blocks ahead in verification above which feedback backs off
    target_decode_p95_ms: float = 0.0  # 0 = no latency target
    # a row stops drafting at the first position whose draft top-1 probability is below this (0 = off):
    # a weak draft's unsure proposals are mostly rejected, so skipping them saves draft and verify work
    draft_confidence: float = 0.0

    def __post_init__(self) -> None:
        if self.kind not in CONTROLLERS:
            raise ValueError(f"controller must be one of {', '.join(CONTROLLERS)}, got {self.kind!r}")
        if not 0 <= self.min_len <= self.max_len:
            raise ValueError(f"need 0 <= min draft length <= max draft length, got {self.min_len}..{self.max_len}")
        if not 0 <= self.draft_len <= self.max_len:
            raise ValueError(f"draft length must be in 0..{self.max_len}, got {self.draft_len}")
        if self.kind != "fixed" and self.draft_len < self.min_len:
            raise ValueError(f"start draft length {self.draft_len} is below the minimum {self.min_len}")
        if not 0 <= self.draft_confidence < 1:
            raise ValueError(f"draft confidence must be in [0, 1), got {self.draft_confidence}")
        if self.target_verify_queue < 0 or self.target_decode_p95_ms < 0:
            raise ValueError("controller targets must be >= 0")


@dataclass(frozen=True)
class EngineConfig:
    engine: str = "baseline"
    controller: ControllerConfig = ControllerConfig()
    max_batch_size: int = 32  # running requests; beyond this CPU step time grows faster than throughput
    max_cache_tokens: int = 65_536  # KV budget in tokens per model; requests wait rather than exceed it
    prefill_chunk_tokens: int = 512  # tokens per prefill forward, so a long prompt cannot stall decoding
    hybrid_threshold: int = 3  # PDV: below this many running requests, draft+verify run atomically as in PD
    verify_promote_margin: int = 2  # PDV: verify outranks decode when its backlog exceeds decode's by this
    micro_batches: int = 2  # PDV: running requests are split in this many groups that pipeline
    intra_op_threads: int = 0  # torch threads; 0 = leave torch's default
    # lanes that may use the device at once; 0 = auto: every lane on a GPU (their streams overlap), one at a
    # time on a CPU (lanes running side by side oversubscribe the cores and slow each other down)
    concurrent_lanes: int = 0

    def __post_init__(self) -> None:
        if self.engine not in ENGINES:
            raise ValueError(f"engine must be one of {', '.join(ENGINES)}, got {self.engine!r}")
        for name in ("max_batch_size", "max_cache_tokens", "prefill_chunk_tokens", "micro_batches"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        for name in ("hybrid_threshold", "verify_promote_margin", "intra_op_threads", "concurrent_lanes"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be >= 0, got {getattr(self, name)}")


def add_controller_args(parser) -> None:
    """The draft-length flags, on an ``argparse`` parser or argument group."""
    defaults = ControllerConfig()
    parser.add_argument("--controller", choices=CONTROLLERS, default=defaults.kind)
    parser.add_argument("--draft-len", type=int, default=defaults.draft_len, help="draft length L (start value)")
    parser.add_argument("--min-draft-len", type=int, default=defaults.min_len)
    parser.add_argument("--max-draft-len", type=int, default=defaults.max_len)
    parser.add_argument(
        "--draft-confidence",
        type=float,
        default=defaults.draft_confidence,
        help="stop drafting a row where the draft's top-1 probability falls below this (0 = always draft L)",
    )
    parser.add_argument(
        "--target-verify-queue",
        type=int,
        default=defaults.target_verify_queue,
        help="feedback controller: PDV verify blocks ahead (queued or verifying) above which it shortens L; "
        "at most --micro-batches - 1 can be ahead",
    )
    parser.add_argument(
        "--target-decode-p95-ms",
        type=float,
        default=defaults.target_decode_p95_ms,
        help="feedback controller: decode step p95 (ms) above which it shortens L (0 = no target)",
    )


def controller_from_args(args: argparse.Namespace) -> ControllerConfig:
    return ControllerConfig(
        kind=args.controller,
        draft_len=args.draft_len,
        min_len=args.min_draft_len,
        max_len=args.max_draft_len,
        draft_confidence=args.draft_confidence,
        target_verify_queue=args.target_verify_queue,
        target_decode_p95_ms=args.target_decode_p95_ms,
    )
