"""The trace: the exact requests every engine of a comparison replays.

A trace is built once per invocation – prompts sampled, tokenised, output
lengths capped – and handed unchanged to every engine and load point, so the
runs differ only in the engine and the load. Prompt token ids are fixed here,
not at submission, for the same reason.

Sources (``DatasetSpec``):

* ``sharegpt`` – the bundled ShareGPT file; a path – a ShareGPT-format JSON
  file (``workloads.sharegpt``). Prompts go through the model's chat template.
* ``synthetic`` – ``workloads.synthetic`` text of a set token length, encoded
  without a chat template so the prompt has the asked length.

A request's ``max_new_tokens`` is its sampled output length, capped by the
run's ``--max-new-tokens``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from conversations.sharegpt_file import BUNDLED
from workloads.sharegpt import SampledRequest, Tokenizer, load_sharegpt
from workloads.synthetic import LengthSpec, synthetic_requests

SYNTHETIC = "synthetic"


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
    """Where prompts come from: ``sharegpt`` (bundled), a file path, or ``synthetic``."""

    name: str = BUNDLED
    input_len: LengthSpec = field(default_factory=lambda: LengthSpec(256))  # synthetic only
    output_len: LengthSpec = field(default_factory=lambda: LengthSpec(128))  # synthetic only

    @property
    def synthetic(self) -> bool:
        return self.name == SYNTHETIC

    def check(self) -> None:
        """Raise ``FileNotFoundError`` for a dataset path that does not exist."""
        if self.name not in (BUNDLED, SYNTHETIC) and not Path(self.name).is_file():
            raise FileNotFoundError(f"dataset file {self.name} does not exist")

    def describe(self) -> str:
        if self.synthetic:
            return (
                f"synthetic (prompt {self.input_len.mean}±{self.input_len.range_ratio:.0%}, "
                f"output {self.output_len.mean}±{self.output_len.range_ratio:.0%} tokens)"
            )
        return "sharegpt (bundled)" if self.name == BUNDLED else f"sharegpt file {self.name}"


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
    """What ``load_trace`` needs of a model pair (``engine.models.ModelPair`` fits)."""

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
    dataset = load_sharegpt(
        spec.name,
        pair.tokenizer,
        num_requests,
        seed,
        max_context=pair.max_context,
        encode_prompt=pair.encode_prompt,
        progress=progress,
    )
    return build_trace(dataset.requests, pair.encode_prompt, max_new_tokens, spec.describe(), seed)
