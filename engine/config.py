"""Validated configuration values shared by every engine.

Each field that a user may set from the command line carries its flag in its
metadata (``engine.flags`` turns them into ``argparse`` options), so the
``generate`` and ``replay`` CLIs share one definition and map flags to fields
one to one. Only ``ControllerConfig.allow_zero``, ``SamplingParams.seed`` and
``stop_token_ids`` have no shared flag (each CLI seeds its own way; ``--ignore-eos``
sets no stop tokens). Validation lives in ``__post_init__`` only. ``None``
means "off" (or "auto", where the comment says so), never 0. Defaults carry
a comment saying why.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any


class EngineName(StrEnum):
    """An engine ``make_engine`` builds: the verifier alone (AR) or a speculative architecture."""

    AR = "ar"
    BASELINE = "baseline"
    PD = "pd"
    PDV = "pdv"

    @property
    def speculative(self) -> bool:
        """Whether the engine drafts: every engine but AR, the verifier alone."""
        return self is not EngineName.AR

    @classmethod
    def parse(cls, text: str) -> EngineName:
        """The engine ``text`` names in any case ("PDV", "pdv"); a ValueError naming the choices otherwise."""
        try:
            return cls(text.lower())
        except (ValueError, AttributeError):
            raise ValueError(f"unknown engine {text!r}; choose one of {', '.join(cls)}") from None


class LaneCompute(StrEnum):
    """How an engine's lanes share a CPU's cores (on CUDA every lane runs on its own stream whatever this says)."""

    TURNS = "turns"  # one lane at a time, with every intra-op thread
    AT_ONCE = "at-once"  # lanes at once, each with its own share of the cores as its intra-op threads
    ELASTIC = "elastic"  # a lane computing alone has every core; lanes with work at the same time split them


class StepChoice(StrEnum):
    """How PDV chooses, at or above ``hybrid_threshold`` running requests, between an atomic and a pipelined step."""

    COST = "cost"  # whichever advances every request sooner by the machine's measured step costs
    COUNT = "count"  # always pipelined


ENGINES: tuple[EngineName, ...] = tuple(EngineName)  # AR first: every comparison's reference
CONTROLLERS = ("fixed", "feedback", "goodput", "cost")
# engine.drafters: where a speculative engine's proposals come from
DRAFTERS = ("model", "ngram", "model+ngram", "suffix", "suffix+model")
DTYPES = ("float32", "bfloat16", "float16")  # --dtype: one dtype for both models
MAX_SEED = 2**64 - 1  # torch.Generator.manual_seed takes at most 64 bits
FLOAT32_MAX = 3.4028234663852886e38  # sampling runs in float32: a larger temperature would be inf there


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _is_integer(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def flag(name: str, kind: type, help: str = "", **argparse_options: Any) -> dict[str, Any]:
    """Field metadata naming the field's command-line flag (read by ``engine.flags``)."""
    return {"flag": name, "type": kind, "help": help, **argparse_options}


@dataclass(frozen=True)
class SamplingParams:
    # greedy by default: outputs are then checkable token for token
    temperature: float = field(default=0.0, metadata=flag("--temperature", float, "0 = greedy"))
    # Sampled in float32: a top_p below float32's smallest positive value is 0 there, and keeps the top
    # token alone (the top token always stays), which samples exactly what greedy decoding picks.
    top_p: float = field(default=1.0, metadata=flag("--top-p", float, "nucleus sampling mass, in (0, 1]"))
    # An engine turns a top_k at or past its vocabulary size into None at submission (it keeps every token).
    top_k: int | None = field(default=None, metadata=flag("--top-k", int, "keep the k most likely tokens (0 = off)"))
    max_new_tokens: int = field(default=128, metadata=flag("--max-new-tokens", int, "cap on each output's length"))
    # A per-request generator: the same random numbers whatever the batch. The tokens can still differ
    # across batches, since a forward over another batch rounds the probabilities differently.
    # A generator takes a seed of at most 64 bits.
    seed: int | None = None
    stop_token_ids: tuple[int, ...] | None = None  # None = the model's end-of-sequence tokens

    def __post_init__(self) -> None:
        # every check runs here, at submission, so that no value can raise later inside a batched step
        for name in ("temperature", "top_p"):
            if not _is_number(getattr(self, name)):
                raise ValueError(f"{name} must be a number, got {getattr(self, name)!r}")
        for name in ("top_k", "max_new_tokens", "seed"):
            value = getattr(self, name)
            if value is not None and not _is_integer(value):
                raise ValueError(f"{name} must be an integer, got {value!r}")
        if not (0 <= self.temperature <= FLOAT32_MAX):  # also refuses nan and infinities
            largest = f"{FLOAT32_MAX:.4g}"
            raise ValueError(f"temperature must be a finite number >= 0 (at most {largest}), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k is not None and self.top_k < 1:
            raise ValueError(f"top_k must be >= 1 (or None for no top-k truncation), got {self.top_k}")
        if self.max_new_tokens < 1:
            raise ValueError(f"max_new_tokens must be >= 1, got {self.max_new_tokens}")
        if self.seed is not None and self.seed < 0:
            raise ValueError(f"seed must be >= 0, got {self.seed}")
        if self.seed is not None and self.seed > MAX_SEED:
            raise ValueError(f"seed must be < 2**64 (a generator takes 64 bits), got {self.seed}")
        if self.stop_token_ids is not None and not all(_is_integer(t) and t >= 0 for t in self.stop_token_ids):
            raise ValueError(f"stop_token_ids must be non-negative integers, got {self.stop_token_ids!r}")

    @property
    def greedy(self) -> bool:
        return self.temperature == 0


@dataclass(frozen=True)
class ControllerConfig:
    # cost: per step, the L the machine's measured costs and the measured acceptance say is fastest; with prompt
    # lookup it beat every fixed L on the default pair from 4 to 32 requests (docs/results.md, "Drafters")
    kind: str = field(default="cost", metadata=flag("--controller", str, "draft-length policy", choices=CONTROLLERS))
    # start (and, for "fixed", constant) draft length: a common sweet spot for small drafts and lookups
    draft_len: int = field(default=4, metadata=flag("--draft-len", int, "draft length L (start value)"))
    min_len: int = field(default=1, metadata=flag("--min-draft-len", int, "adaptive controllers' lower bound"))
    # beyond 8 the acceptance of a small draft rarely pays for the extra draft passes
    max_len: int = field(default=8, metadata=flag("--max-draft-len", int, "adaptive controllers' upper bound"))
    allow_zero: bool = True  # feedback may switch speculation off (L = 0) under heavy load
    # PDV blocks ahead in verification above which feedback backs off
    target_verify_queue: int = field(
        default=2,
        metadata=flag(
            "--target-verify-queue",
            int,
            "feedback controller: PDV verify blocks ahead (queued or verifying) above which it shortens L; "
            "at most --micro-batches - 1 can be ahead",
        ),
    )
    target_decode_p95_ms: float | None = field(
        default=None,  # no latency target: the right one depends on the model and the device
        metadata=flag(
            "--target-decode-p95-ms",
            float,
            "feedback controller: decode step p95 (ms) above which it shortens L (0 = no target)",
        ),
    )
    # a row stops drafting at the first position whose draft top-1 probability is below this (None = off):
    # a weak draft's unsure proposals are mostly rejected, so skipping them saves draft and verify work
    draft_confidence: float | None = field(
        default=None,
        metadata=flag(
            "--draft-confidence",
            float,
            "stop drafting a row where the draft's top-1 probability falls below this (0 = always draft L)",
        ),
    )

    def __post_init__(self) -> None:
        if self.kind not in CONTROLLERS:
            raise ValueError(f"controller must be one of {', '.join(CONTROLLERS)}, got {self.kind!r}")
        if not 0 <= self.min_len <= self.max_len:
            raise ValueError(f"need 0 <= min draft length <= max draft length, got {self.min_len}..{self.max_len}")
        if not 0 <= self.draft_len <= self.max_len:
            raise ValueError(f"draft length must be in 0..{self.max_len}, got {self.draft_len}")
        if self.kind != "fixed" and self.draft_len < self.min_len:
            raise ValueError(f"start draft length {self.draft_len} is below the minimum {self.min_len}")
        if self.draft_confidence is not None and not 0 < self.draft_confidence < 1:
            raise ValueError(f"draft confidence must be in (0, 1) (or None for off), got {self.draft_confidence}")
        if self.target_verify_queue < 0:
            raise ValueError(f"target verify queue must be >= 0, got {self.target_verify_queue}")
        if self.target_decode_p95_ms is not None and not self.target_decode_p95_ms > 0:
            raise ValueError(f"target decode p95 must be > 0 ms (or None for none), got {self.target_decode_p95_ms}")


@dataclass(frozen=True)
class EngineConfig:
    """How an engine runs; which engine is ``make_engine``'s name alone."""

    controller: ControllerConfig = ControllerConfig()
    # suffix drafting: after a warm-up of other requests it beat prompt lookup and AR at 1, 4 and 16 concurrent
    # requests on held-out ShareGPT (docs/results.md, "Suffix drafting across requests"); no draft model runs
    drafter: str = field(
        default="suffix",
        metadata=flag("--drafter", str, "where proposals come from (the AR engine has none)", choices=DRAFTERS),
    )
    # prompt lookup (ngram drafters): the suffix lengths tried, longest first
    prompt_lookup_min: int = field(
        default=2, metadata=flag("--prompt-lookup-min", int, "ngram drafters: shortest suffix looked up")
    )
    prompt_lookup_max: int = field(
        default=4, metadata=flag("--prompt-lookup-max", int, "ngram drafters: longest suffix looked up")
    )
    # suffix drafters: the global tree's memory bound, oldest outputs evicted first; 65,536 tokens (about 700
    # chat answers of 96 tokens) take about 27 MB (410 bytes per token measured over 300 SmolLM2 answers)
    suffix_tree_tokens: int = field(
        default=65_536, metadata=flag("--suffix-tree-tokens", int, "suffix drafters: tokens the global tree keeps")
    )
    # a token is proposed while its estimated probability is at least this (vLLM's suffix_decoding_min_token_prob)
    suffix_min_prob: float = field(
        default=0.1,
        metadata=flag("--suffix-min-prob", float, "suffix drafters: least estimated probability of a proposed token"),
    )
    suffix_warmup: str | None = field(
        default=None,  # None: the tree starts empty and learns from this engine's completed requests only
        metadata=flag(
            "--suffix-warmup",
            str,
            'suffix drafters: JSON file {"sequences": [[token, ...], ...]} the global tree learns first',
        ),
    )
    # running requests; beyond this CPU step time grows faster than throughput
    max_batch_size: int = field(default=32, metadata=flag("--max-batch-size", int, "running requests at most"))
    # KV budget in tokens per model; requests wait rather than exceed it
    max_cache_tokens: int = field(
        default=65_536, metadata=flag("--max-cache-tokens", int, "KV budget in tokens per model")
    )
    # tokens per prefill forward, so a long prompt cannot stall decoding
    prefill_chunk_tokens: int = field(
        default=512, metadata=flag("--prefill-chunk-tokens", int, "prompt tokens per prefill forward")
    )
    # with one or two running requests there is nothing to pipeline against; None: never atomic
    hybrid_threshold: int | None = field(
        default=3,
        metadata=flag(
            "--hybrid-threshold",
            int,
            "pdv: below this many running requests draft+verify run atomically; at or above it --step-choice "
            "decides (0 = never atomic)",
        ),
    )
    # pipelining pays only where drafting a group costs about what verifying one does, and the lanes overlap:
    # the measured costs say where, a fixed count cannot
    step_choice: StepChoice = field(
        default=StepChoice.COST,
        metadata=flag(
            "--step-choice",
            str,
            "pdv: atomic or pipelined per step from the measured step costs (cost), or always pipelined (count)",
            choices=[c.value for c in StepChoice],
        ),
    )
    # taking turns is what the engines did before lanes could run at once on a CPU; at-once and elastic are
    # measured against it in docs/results.md ("Lanes that pay")
    lane_compute: LaneCompute = field(
        default=LaneCompute.TURNS,
        metadata=flag(
            "--lane-compute",
            str,
            "CPU: lanes take turns with every core, run at once with a share each, or elastic (all alone, shares)",
            choices=[c.value for c in LaneCompute],
        ),
    )
    # one lane steps the whole running batch, as the colocated engines always did; 2 is the generic
    # parallelism any engine could use with lanes at once (two half-batches, one core each): the fair
    # reference for what PD's and PDV's lanes at once gain (docs/results.md, "Lanes that pay")
    colocated_lanes: int = field(
        default=1,
        metadata=flag(
            "--colocated-lanes",
            int,
            "ar, baseline: lanes stepping the running batch, each its own share (1, or 2 with --lane-compute "
            "at-once)",
        ),
    )
    verify_promote_margin: int = field(
        default=2,  # a backlog of a group or two is normal pipelining; beyond that verification is the bottleneck
        metadata=flag(
            "--verify-promote-margin", int, "pdv: verify outranks decode when its backlog exceeds decode's by this"
        ),
    )
    # pd, pdv: 1 is the colocated loop's order, counted from the prefill's own last turn (docs/results.md)
    prefill_after_turns: int | None = field(
        default=1, metadata=flag("--prefill-after-turns", int, "pd, pdv: a prefill waits at most this many turns")
    )
    micro_batches: int = field(
        default=2,  # two groups: one drafts while the other verifies
        metadata=flag("--micro-batches", int, "pdv: groups of running requests pipelined between draft and verify"),
    )
    intra_op_threads: int | None = field(
        default=None,  # None: leave torch's default
        metadata=flag("--intra-op-threads", int, "torch intra-op threads (0 = torch's default)"),
    )
    # lanes that may use the device at once; None = auto: every lane on a GPU (their streams overlap), one at a
    # time on a CPU (lanes running side by side oversubscribe the cores and slow each other down)
    concurrent_lanes: int | None = field(
        default=None,
        metadata=flag("--concurrent-lanes", int, "lanes on the device at once (0 = auto: 1 on a CPU, all on CUDA)"),
    )

    def __post_init__(self) -> None:
        if self.drafter not in DRAFTERS:
            raise ValueError(f"drafter must be one of {', '.join(DRAFTERS)}, got {self.drafter!r}")
        if not 1 <= self.prompt_lookup_min <= self.prompt_lookup_max:
            lookup = f"{self.prompt_lookup_min}..{self.prompt_lookup_max}"
            raise ValueError(f"need 1 <= prompt lookup min <= prompt lookup max, got {lookup}")
        if not 0 <= self.suffix_min_prob < 1:
            raise ValueError(f"suffix min prob must be in [0, 1), got {self.suffix_min_prob}")
        if self.suffix_warmup is not None and not Path(self.suffix_warmup).is_file():
            raise ValueError(f"suffix warm-up file {self.suffix_warmup} does not exist")
        for name in ("suffix_tree_tokens", "max_batch_size", "max_cache_tokens", "prefill_chunk_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be >= 1, got {getattr(self, name)}")
        if self.micro_batches < 1:
            raise ValueError(f"micro_batches must be >= 1, got {self.micro_batches}")
        for name, kind in (("step_choice", StepChoice), ("lane_compute", LaneCompute)):
            value = getattr(self, name)
            if value not in set(kind):
                raise ValueError(f"{name} must be one of {', '.join(kind)}, got {value!r}")
            object.__setattr__(self, name, kind(value))  # the typed value, also when given as its text
        if self.colocated_lanes not in (1, 2):
            raise ValueError(f"colocated_lanes must be 1 or 2, got {self.colocated_lanes}")
        if self.colocated_lanes == 2 and self.lane_compute is not LaneCompute.AT_ONCE:
            # two halves taking turns would only step the batch in two forwards instead of one
            raise ValueError("colocated_lanes = 2 splits the batch for lanes at once: it needs lane_compute at-once")
        if self.verify_promote_margin < 0:
            raise ValueError(f"verify_promote_margin must be >= 0, got {self.verify_promote_margin}")
        nones = {"hybrid_threshold": "never", "prefill_after_turns": "off"}
        for name, none in (nones | dict.fromkeys(("intra_op_threads", "concurrent_lanes"), "auto")).items():
            value = getattr(self, name)
            if value is not None and value < 1:
                raise ValueError(f"{name} must be >= 1 (or None for {none}), got {value}")
