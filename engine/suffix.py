"""Suffix drafting: proposals from everything already generated (SuffixDecoding, Oliaro et al. 2024).

Each step a row's latest tokens are matched against two texts:

* the request's own prompt and output (``context_continuation``): a scan of
  the context like prompt lookup's, but over *every* earlier occurrence of
  the longest matching suffix, counted as a per-request suffix tree would
  count them;
* the global tree (``engine.suffix_tree``) of the outputs of requests that
  completed earlier on this engine, plus an explicitly named warm-up set.

Each side proposes the most frequent continuation of its longest match, at
most ``SPEC_FACTOR`` x match tokens (a longer match earns a longer draft),
every token's estimated probability at least ``min_prob``; the proposal with
the higher score (the sum of those probabilities) wins. A proposal is a point
mass, like prompt lookup's, so the acceptance rule keeps the output exact.

No leakage: the tree learns an output only once its request has completed
OK (``learn``, called by the engine as it retires the request), so no request
is drafted from its own output or from one that had not finished before it.
A server's engine keeps its one tree for as long as it runs.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import NamedTuple

import numpy as np

from engine.draft_source import DraftSource, SourceKind
from engine.suffix_tree import NO_CONTINUATION, Continuation, SuffixTree, TreeSize

DEPTH = 24  # tokens kept per suffix in the global tree (vLLM's suffix_decoding_max_tree_depth default)
MAX_MATCH = 16  # longest suffix matched; beyond it a longer match hardly changes the continuation
SPEC_FACTOR = 1.0  # tokens proposed per matched token (vLLM's suffix_decoding_max_spec_factor default)
MIN_COUNT = 1  # occurrences a continuation needs: one suffices within a request (it repeats itself)


class Proposal(NamedTuple):
    tokens: list[int]  # [] when nothing is proposed
    source: DraftSource | None  # None exactly when tokens is empty


NO_PROPOSAL = Proposal([], None)


def context_continuation(
    context: np.ndarray, max_match: int, budget: Callable[[int], int], min_prob: float, min_count: int = MIN_COUNT
) -> Continuation:
    """The most frequent continuation of the longest suffix of ``context`` that occurs earlier in it.

    ``context`` is 1-D and ends with the last emitted token; at most ``budget(match)`` tokens are proposed.
    Probabilities are counted as ``SuffixTree`` counts them: an occurrence that runs into the end of
    the context still counts among the ways its prefix went on.
    """
    n = len(context)
    if n < 2:
        return NO_CONTINUATION
    ends = np.flatnonzero(context[:-1] == context[-1])  # where earlier occurrences of the matched suffix end
    if not ends.size:
        return NO_CONTINUATION
    match = 1
    while match < min(max_match, n - 1):
        before = ends - match
        keep = before >= 0
        keep[keep] = context[before[keep]] == context[n - 1 - match]
        if not keep.any():
            break
        ends, match = ends[keep], match + 1
    tokens: list[int] = []
    probs: list[float] = []
    prob, live = 1.0, ends + 1  # positions of the next token after each occurrence
    if len(live) < min_count:
        return Continuation([], [], match)
    limit = budget(match)
    while len(tokens) < limit:
        going = live[live < n]
        if not going.size:
            break
        values, counts = np.unique(context[going], return_counts=True)
        best = int(counts.argmax())
        prob *= counts[best] / len(live)
        if prob < min_prob or counts[best] < min_count:
            break
        tokens.append(int(values[best]))
        probs.append(prob)
        live = going[context[going] == values[best]] + 1
    return Continuation(tokens, probs, match)


class SuffixDrafting:
    """The global tree with its lock, and the choice between it and the request's own context. Thread-safe."""

    def __init__(self, max_tokens: int, min_prob: float, depth: int = DEPTH, max_match: int = MAX_MATCH) -> None:
        self.tree = SuffixTree(depth, max_tokens)
        self.min_prob = min_prob
        self.max_match = max_match
        self._lock = threading.Lock()  # lanes draft while another lane's retirement teaches the tree

    def learn(self, tokens: list[int]) -> None:
        """Add a completed output to the global tree (evicting the oldest beyond its bound). Mutates: the tree."""
        if tokens:
            with self._lock:
                self.tree.add(tokens)

    def size(self) -> TreeSize:
        with self._lock:
            return self.tree.size()

    def propose(self, context: list[int], cap: int) -> Proposal:
        """The better of the request's and the tree's continuations of ``context``, at most ``cap`` tokens."""
        if cap <= 0:
            return NO_PROPOSAL

        def budget(match: int) -> int:
            return min(cap, max(1, math.floor(SPEC_FACTOR * match)))

        own = context_continuation(np.asarray(context, dtype=np.int64), self.max_match, budget, self.min_prob)
        with self._lock:
            shared = self.tree.propose(context, self.max_match, budget, self.min_prob, MIN_COUNT)
        best, kind = (own, SourceKind.REQUEST) if own.score >= shared.score else (shared, SourceKind.GLOBAL)
        if not best.tokens:
            return NO_PROPOSAL
        return Proposal(best.tokens, DraftSource.matched(kind, best.match))


def load_warmup(path: str | Path, vocab_size: int) -> list[list[int]]:
    """The token sequences of a warm-up file: JSON ``{"sequences": [[token, ...], ...]}``.

    Raises ``ValueError`` naming the file for a malformed one or a token outside the vocabulary.
    """
    try:
        data = json.loads(Path(path).read_text())
        sequences = data["sequences"]
        if not all(isinstance(s, list) and all(isinstance(t, int) for t in s) for s in sequences):
            raise TypeError("sequences must be lists of integer token ids")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ValueError(f"suffix warm-up file {path}: {type(exc).__name__}: {exc}") from exc
    bad = next((t for s in sequences for t in s if not 0 <= t < vocab_size), None)
    if bad is not None:
        raise ValueError(f"suffix warm-up file {path}: token {bad} is outside the vocabulary of {vocab_size}")
    return sequences
