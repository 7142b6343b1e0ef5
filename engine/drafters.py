"""Drafters: where an engine's proposals come from.

Every speculative engine asks its drafter for a ``DraftBlock`` and verifies
it the same way, so each drafter works in Baseline, PD and PDV alike (in PDV
the decode lane runs it).

* ``none``        – no proposals: every step is a plain verifier step (the AR engine).
* ``model``       – the draft model, run autoregressively (``stages.draft_block``).
* ``ngram``       – prompt lookup over the request's prompt and output (``engine.ngram``);
  no model forward, and no draft cache at all.
* ``model+ngram`` – the lookup's proposal where there is one, the draft model for the other rows.

A step runs in two halves so that the draft-length controller can weigh what
each row would get: ``lookups`` finds every row's lookup proposal (free), the
controller picks each row's length from the row's *source* (``model``,
``lookup<n>`` for a lookup that matched n tokens, or none), and ``propose``
drafts. A lookup proposal is a point mass (q = 1 for the proposed token): the
acceptance rule then accepts it with probability p(token) and, on a
rejection, samples from p with that token removed, which keeps the output exact.
"""

from __future__ import annotations

import numpy as np
import torch

from engine.config import EngineConfig
from engine.models.pair import ModelPair
from engine.ngram import NO_LOOKUP, Lookup, prompt_lookup
from engine.runner import ModelRunner
from engine.sampling import SamplingRows
from engine.sequence import Sequence
from engine.stages import DraftBlock, draft_block

MODEL = "model"  # the source of a row the draft model drafts


def lookup_source(match: int) -> str:
    """The source name of a lookup proposal that matched ``match`` tokens."""
    return f"lookup{match}"


class Drafter:
    """Lookup proposals where ``lookup`` is set (``(min_n, max_n)``), the draft ``model`` for the other rows."""

    def __init__(
        self, name: str, vocab_size: int, model: ModelRunner | None = None, lookup: tuple[int, int] | None = None
    ) -> None:
        self.name = name
        self.vocab_size = vocab_size
        self.model = model  # the draft model whose caches sequences keep, if any
        self.lookup = lookup

    def lookups(self, seqs: list[Sequence], caps: list[int]) -> list[Lookup]:
        """Each row's lookup proposal of at most ``caps[b]`` tokens (``NO_LOOKUP`` where nothing matches)."""
        if self.lookup is None:
            return [NO_LOOKUP] * len(seqs)
        min_n, max_n = self.lookup
        return [row_lookup(seq, min_n, max_n, cap) for seq, cap in zip(seqs, caps, strict=True)]

    def source(self, found: Lookup) -> str | None:
        """Where a row's proposal would come from, or ``None`` when it can get none."""
        if found.tokens:
            return lookup_source(found.match)
        return MODEL if self.model is not None else None

    def propose(
        self,
        seqs: list[Sequence],
        lens: list[int],
        found: list[Lookup],
        rows: SamplingRows,
        confidence: float | None = None,
    ) -> DraftBlock:
        """Draft ``lens[b]`` tokens per row: the first ones of its lookup, or the draft model's.

        Mutates: what ``draft_block`` mutates (rows the model drafts).
        """
        lookups = [f.tokens[:n] for f, n in zip(found, lens, strict=True)]
        model_lens = [0 if f.tokens or self.model is None else n for f, n in zip(found, lens, strict=True)]
        block = draft_block(self.model, seqs, model_lens, rows, confidence)
        block.sources = [self.source(f) if n > 0 else None for f, n in zip(found, lens, strict=True)]
        return with_point_masses(block, lookups, self.vocab_size)


def row_lookup(seq: Sequence, min_n: int, max_n: int, k: int) -> Lookup:
    """The lookup over ``seq``'s prompt and every token emitted so far (the last one is ``pending``)."""
    request = seq.request
    context = np.asarray(request.prompt_token_ids + request.output_token_ids, dtype=np.int64)
    return prompt_lookup(context, min_n, max_n, k)


def with_point_masses(block: DraftBlock, proposals: list[list[int]], vocab_size: int) -> DraftBlock:
    """``block`` with each non-empty proposal put in its row as point-mass draft distributions.

    Rows with a proposal must have drafted nothing in ``block``. Mutates: ``block``.
    """
    width = max([block.tokens.shape[1], *map(len, proposals)])
    batch, device = len(block.seqs), block.tokens.device
    if width > block.tokens.shape[1]:
        tokens = torch.zeros(batch, width, dtype=torch.long, device=device)
        probs = torch.zeros(batch, width, vocab_size, device=device)
        tokens[:, : block.tokens.shape[1]] = block.tokens
        if block.probs.shape[-1]:
            probs[:, : block.probs.shape[1]] = block.probs
        block.tokens, block.probs = tokens, probs
    for b, proposal in enumerate(proposals):
        if proposal:
            n = len(proposal)
            ids = torch.tensor(proposal, device=device)
            block.tokens[b, :n] = ids
            block.probs[b, :n] = 0
            block.probs[b, torch.arange(n, device=device), ids] = 1.0
            block.lens[b] = n
    return block


def make_drafter(config: EngineConfig, pair: ModelPair, speculative: bool = True) -> Drafter:
    """The drafter ``config.drafter`` names (``none`` for an engine that does not speculate)."""
    vocab = pair.verifier.vocab_size
    lookup = (config.prompt_lookup_min, config.prompt_lookup_max)
    if not speculative:
        return Drafter("none", vocab)
    if config.drafter == "model":
        return Drafter("model", vocab, model=pair.draft)
    if config.drafter == "ngram":
        return Drafter("ngram", vocab, lookup=lookup)
    return Drafter("model+ngram", vocab, model=pair.draft, lookup=lookup)
