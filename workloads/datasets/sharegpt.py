"""ShareGPT workloads: prompts and reference output lengths from real conversations.

A request is the first human turn of a conversation; its reference output length
is the token count of the assistant turn that answers it. Variants without
replies (first human turn only) are common, so those records get a configurable
default output length instead of being dropped. Reading the file, including the
truncated bundled copy, is ``workloads.datasets.sharegpt_file``'s job.

Sampling follows the vLLM serving benchmark: seeded shuffle, then keep records
whose prompt and output both have at least 4 tokens, whose prompt has at most
1024 and whose prompt plus output has at most 2048 tokens. Tokenising is the
slow part, so it happens after the shuffle and stops once enough requests are
collected.
"""

from __future__ import annotations

import logging
import random
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from workloads.datasets.sharegpt_file import DatasetError, Exchange, ScanReport, iter_exchanges

log = logging.getLogger(__name__)


class Tokenizer(Protocol):
    def encode(self, text: str) -> list[int]: ...


@dataclass(frozen=True)
class SampledRequest:
    """One benchmark request: the prompt text and how many tokens to generate for it."""

    request_id: str
    prompt: str
    output_len: int
    prompt_len: int | None = None
    has_reply: bool = True


@dataclass(frozen=True)
class ShareGPTFilter:
    """Length limits in tokens (defaults are vLLM's ``benchmark_serving`` ones)."""

    min_prompt_len: int = 4
    min_output_len: int = 4
    max_prompt_len: int = 1024
    max_total_len: int = 2048

    def accepts(self, prompt_len: int, output_len: int, max_context: int | None = None) -> bool:
        total = prompt_len + output_len
        if prompt_len < self.min_prompt_len or output_len < self.min_output_len:
            return False
        if prompt_len > self.max_prompt_len or total > self.max_total_len:
            return False
        return max_context is None or total <= max_context


@dataclass(frozen=True)
class Dataset:
    """Sampled requests plus an account of what was dropped and why."""

    requests: list[SampledRequest]
    path: Path
    records: int
    skipped_records: int
    filtered_out: int
    truncated_at: int | None
    skip_reasons: dict[str, int] = field(default_factory=dict)


def token_len(tokenizer: Tokenizer, text: str) -> int:
    return len(tokenizer.encode(text))


def load_sharegpt(
    path: str | Path | None,
    tokenizer: Tokenizer,
    num_requests: int | None = None,
    seed: int = 0,
    filter: ShareGPTFilter = ShareGPTFilter(),
    default_output_len: int = 128,
    max_context: int | None = None,
    encode_prompt: Callable[[str], list[int]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> Dataset:
    """Sample up to ``num_requests`` requests (all usable ones when ``None``).

    Records without a reply use ``default_output_len``. ``max_context`` is the
    model's context window: prompt plus output must fit in it. ``encode_prompt``
    is how the engines will tokenise a prompt (with the chat template, say), so
    that the length filter counts the tokens they will actually get; by default
    the bare tokenizer. ``progress(sampled, wanted)`` is called after every
    candidate prompt; an exception it raises ends the sampling.
    """
    if default_output_len < 1:
        raise ValueError("default_output_len must be positive")
    report = ScanReport()
    skipped: Counter[str] = Counter()
    exchanges = list(iter_exchanges(path, report, skipped))
    real_path = report.path or Path(str(path))
    if not exchanges:
        if report.records == 0:
            raise DatasetError(f"{real_path}: no records (the JSON array is empty)")
        reasons = ", ".join(f"{reason}: {n}" for reason, n in skipped.most_common())
        raise DatasetError(
            f"{real_path}: no usable records: all {report.records} records have the wrong shape "
            f"(expected {{'id', 'conversations': [{{'from', 'value'}}]}}; {reasons})"
        )
    requests, filtered_out = sample_exchanges(
        exchanges, tokenizer, num_requests, seed, filter, default_output_len, max_context, encode_prompt, progress
    )
    if num_requests is not None and len(requests) < num_requests:
        log.warning(
            "%s: only %d of %d requested prompts pass the length filter",
            real_path,
            len(requests),
            num_requests,
        )
    return Dataset(
        requests=requests,
        path=real_path,
        records=report.records,
        skipped_records=sum(skipped.values()),
        filtered_out=filtered_out,
        truncated_at=report.truncated_at,
        skip_reasons=dict(skipped),
    )


def sample_exchanges(
    exchanges: list[Exchange],
    tokenizer: Tokenizer,
    num_requests: int | None,
    seed: int = 0,
    filter: ShareGPTFilter = ShareGPTFilter(),
    default_output_len: int = 128,
    max_context: int | None = None,
    encode_prompt: Callable[[str], list[int]] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[list[SampledRequest], int]:
    """Seeded shuffle of ``exchanges`` (mutated in place), then the first that pass ``filter``.

    Returns the sampled requests and how many candidates the filter dropped; see ``load_sharegpt``.
    """
    random.Random(seed).shuffle(exchanges)
    wanted = len(exchanges) if num_requests is None else num_requests
    requests: list[SampledRequest] = []
    filtered_out = 0
    for ex in exchanges:
        if len(requests) >= wanted:
            break
        prompt_len = len(encode_prompt(ex.prompt)) if encode_prompt else token_len(tokenizer, ex.prompt)
        output_len = default_output_len if ex.reply is None else token_len(tokenizer, ex.reply)
        if filter.accepts(prompt_len, output_len, max_context):
            requests.append(SampledRequest(ex.record_id, ex.prompt, output_len, prompt_len, ex.reply is not None))
        else:
            filtered_out += 1
        if progress is not None:  # after every candidate, so a long run of filtered ones can still be stopped
            progress(len(requests), wanted)
    return requests, filtered_out
