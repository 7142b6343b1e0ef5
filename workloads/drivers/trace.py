"""The trace: the exact requests every engine of a comparison replays.

A trace is built once per invocation – prompts sampled, tokenised, output
lengths capped – and handed unchanged to every engine and load point, so the
runs differ only in the engine and the load. Prompt token ids are fixed here,
not at submission, for the same reason.

Sources (``DatasetSpec``):

* ``sharegpt`` – the bundled ShareGPT file (``workloads.datasets.sharegpt``).
* a local file or directory, or a hub id – anything ``datasets.load_dataset``
  reads, in the ShareGPT, OpenAI-messages or prompt-column shape
  (``workloads.datasets.sources``); a ``.json`` file that is not valid JSON is
  read by the ShareGPT loader. Prompts go through the model's chat template.
* ``mt-bench`` – the bundled MT-Bench questions' first turns
  (``workloads.drivers.mt_bench``; ``replay`` runs their second turns after them).
* ``synthetic`` – ``workloads.datasets.synthetic`` text of a set token length, encoded
  without a chat template so the prompt has the asked length.

A request's ``max_new_tokens`` is its sampled output length, capped by the
run's ``--max-new-tokens``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from workloads.datasets.mt_bench import first_turns
from workloads.datasets.sharegpt import SampledRequest, Tokenizer, load_sharegpt, sample_exchanges
from workloads.datasets.sharegpt_file import BUNDLED
from workloads.datasets.sources import load_exchanges
from workloads.datasets.synthetic import LengthSpec, synthetic_requests

SYNTHETIC = "synthetic"
MT_BENCH = "mt-bench"
_PATH_SUFFIXES = (".json", ".jsonl", ".csv", ".parquet")


@dataclass(frozen=True)
class TraceItem:
    request_id: str
    prompt: str
    prompt_token_ids: tuple[int, ...]
    max_new_tokens: int


@dataclass(frozen=True)
class Trace:
    items: tuple[TraceItem, ...]
    source: str  # what the prompts came from, for run.json
    seed: int

    def __len__(self) -> int:
        return len(self.items)

    def describe(self) -> dict[str, Any]:
        prompt = [len(i.prompt_token_ids) for i in self.items]
        output = [i.max_new_tokens for i in self.items]
        return {
            "source": self.source,
            "seed": self.seed,
            "num_requests": len(self.items),
            "prompt_tokens_total": sum(prompt),
            "max_new_tokens_total": sum(output),
        }


@dataclass(frozen=True)
class DatasetSpec:
    """Where prompts come from: ``sharegpt`` (bundled), ``mt-bench``, ``synthetic``, a path or a hub id."""

    name: str = BUNDLED
    input_len: LengthSpec = field(default_factory=lambda: LengthSpec(256))  # synthetic only
    output_len: LengthSpec = field(default_factory=lambda: LengthSpec(128))  # synthetic only
    split: str = "train"  # hub ids and directories only
    config: str | None = None  # a hub dataset's configuration

    @property
    def synthetic(self) -> bool:
        return self.name == SYNTHETIC

    def check(self) -> None:
        """Raise ``FileNotFoundError`` for a dataset path that does not exist (a hub id is checked on loading)."""
        if self.name in (BUNDLED, SYNTHETIC, MT_BENCH) or Path(self.name).exists():
            return
        if self.name.startswith(("/", ".", "~")) or self.name.lower().endswith(_PATH_SUFFIXES):
            raise FileNotFoundError(f"dataset file {self.name} does not exist")

    def describe(self) -> str:
        if self.synthetic:
            return (
                f"synthetic (prompt {self.input_len.mean}±{self.input_len.range_ratio:.0%}, "
                f"output {self.output_len.mean}±{self.output_len.range_ratio:.0%} tokens)"
            )
        if self.name in (BUNDLED, MT_BENCH):
            return "sharegpt (bundled)" if self.name == BUNDLED else "mt-bench (bundled, first turns)"
        if Path(self.name).exists():
            return f"dataset file {self.name}"
        config = f", config {self.config}" if self.config else ""
        return f"dataset {self.name} (split {self.split}{config})"


def build_trace(
    sampled: Sequence[SampledRequest],
    encode: Callable[[str], list[int]],
    max_new_tokens: int | None,
    source: str,
    seed: int,
) -> Trace:
    """Tokenise ``sampled`` with ``encode`` and cap output lengths; request ids made unique."""
    if max_new_tokens is not None and max_new_tokens < 1:
        raise ValueError(f"max_new_tokens must be >= 1, got {max_new_tokens}")
    seen: dict[str, int] = {}
    items = []
    for s in sampled:
        # ShareGPT ids repeat across records; a run needs one row per request
        n = seen.get(s.request_id, 0)
        seen[s.request_id] = n + 1
        request_id = s.request_id if n == 0 else f"{s.request_id}#{n}"
        cap = s.output_len if max_new_tokens is None else min(s.output_len, max_new_tokens)
        items.append(TraceItem(request_id, s.prompt, tuple(encode(s.prompt)), max(1, cap)))
    return Trace(tuple(items), source, seed)


class PromptEncoder(Protocol):
    """What ``load_trace`` needs of a model pair (``engine.models.pair.ModelPair`` fits)."""

    tokenizer: Tokenizer
    max_context: int

    def encode_prompt(self, text: str, raw: bool = False) -> list[int]: ...


def load_trace(
    spec: DatasetSpec,
    pair: PromptEncoder,
    num_requests: int,
    seed: int,
    max_new_tokens: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Trace:
    """Sample and tokenise ``num_requests`` requests for ``pair``'s tokenizer.

    ``progress(sampled, wanted)`` follows the sampling of ShareGPT prompts (the
    slow part: each candidate is tokenised to apply the length filter); an
    exception it raises ends it.
    """
    if num_requests < 1:
        raise ValueError(f"num_requests must be >= 1, got {num_requests}")
    spec.check()
    if spec.synthetic:
        sampled = synthetic_requests(pair.tokenizer, num_requests, spec.input_len, spec.output_len, seed)
        trace = build_trace(
            sampled, lambda text: pair.encode_prompt(text, raw=True), max_new_tokens, spec.describe(), seed
        )
        if progress is not None:
            progress(len(trace.items), num_requests)
        return trace
    if spec.name == MT_BENCH:
        sampled = first_turns(num_requests, max_new_tokens or 128)
        return build_trace(sampled, pair.encode_prompt, max_new_tokens, spec.describe(), seed)
    found = None if spec.name == BUNDLED else load_exchanges(spec.name, spec.split, spec.config)
    sampling = dict(max_context=pair.max_context, encode_prompt=pair.encode_prompt, progress=progress)
    if found is None:  # the bundled file, or a .json file that is not valid JSON
        dataset = load_sharegpt(spec.name, pair.tokenizer, num_requests, seed, **sampling)
        return build_trace(dataset.requests, pair.encode_prompt, max_new_tokens, spec.describe(), seed)
    sampled, _ = sample_exchanges(found, pair.tokenizer, num_requests, seed, **sampling)
    if not sampled:
        raise ValueError(f"{spec.describe()}: no prompt passes the length filter")
    return build_trace(sampled, pair.encode_prompt, max_new_tokens, spec.describe(), seed)
