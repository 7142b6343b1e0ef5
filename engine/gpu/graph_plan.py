"""Which forwards replay a CUDA graph: a pure function from a forward's shape to a bucket or a reason to run eagerly.

A captured graph replays one fixed sequence of kernels on fixed buffers, so
the forward it stands for must have a fixed shape. A decode step (one new
token per row) and a verify step with one draft length for every row (L + 1
per row) have one once two things are padded:

* the rows, up to the next batch bucket (``BATCH_BUCKETS``, as vLLM and
  gpt-fast capture): padding rows write into a scratch store of their own and
  their logits are dropped;
* the keys each row reads, up to the next multiple of ``SPAN_STEP``: keys past
  a row's end read the zero slot and are masked out, as in a padded group of
  the eager path (``engine.attention``).

Prefill chunks, rows with different new-token counts (a draft block's first
forward feeds one or two tokens per row), batches above the largest bucket
and spans above ``MAX_SPAN`` run eagerly, each with its reason counted.
"""

from __future__ import annotations

from enum import StrEnum
from typing import NamedTuple

from engine.kv import BLOCK_TOKENS
from engine.runner import Stage

# the batch sizes graphs are captured for; every engine's default --max-batch-size (32) and the first light's
# largest concurrency (64) are buckets themselves, so a full batch pads nothing
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64)
SPAN_STEP = 256  # keys per span bucket: a chat request (~40 prompt + 128 output tokens) stays in one or two
MAX_SPAN = 4096  # beyond it a graph's padded attention costs more than the launches it saves
MAX_TOKENS_PER_ROW = 17  # the profile grid's largest verify step (L = 16, + 1)


class Eager(StrEnum):
    """Why a forward ran eagerly; the stats count each."""

    NO_CUDA = "eager: not on CUDA"
    PREFILL = "eager: prefill or an unlabelled forward"
    RAGGED = "eager: rows bring different numbers of new tokens"
    TOO_MANY_ROWS = "eager: more rows than the largest batch bucket"
    TOO_MANY_TOKENS = "eager: more new tokens per row than a graph is captured for"
    TOO_LONG = "eager: keys beyond the longest span bucket"
    CAPTURE_FAILED = "eager: this bucket's capture failed"


class GraphKey(NamedTuple):
    """One captured graph: padded rows, new tokens per row, padded keys per row."""

    rows: int
    tokens: int
    span: int


def bucket(value: int, buckets: tuple[int, ...]) -> int | None:
    """The smallest bucket at least ``value``; None above the largest."""
    return next((b for b in buckets if b >= value), None)


def graph_plan(
    num_tokens: list[int],  # [B] new tokens per row
    ends: list[int],  # [B] where each row's keys end after this forward (past + new tokens)
    stage: Stage | None,
    on_cuda: bool,
) -> GraphKey | Eager:
    """The graph this forward replays, or why it runs eagerly. Pure."""
    if not on_cuda:
        return Eager.NO_CUDA
    if stage not in (Stage.DRAFT, Stage.VERIFY):
        return Eager.PREFILL
    if len(set(num_tokens)) != 1:
        return Eager.RAGGED
    rows = bucket(len(num_tokens), BATCH_BUCKETS)
    if rows is None:
        return Eager.TOO_MANY_ROWS
    if num_tokens[0] > MAX_TOKENS_PER_ROW:
        return Eager.TOO_MANY_TOKENS
    span = -(-max(ends) // SPAN_STEP) * SPAN_STEP
    if span > MAX_SPAN:
        return Eager.TOO_LONG
    assert span % BLOCK_TOKENS == 0  # a span is whole blocks: the block table has span / BLOCK_TOKENS columns
    return GraphKey(rows, num_tokens[0], span)
