"""Drafters: where an engine's proposals come from.

Every speculative engine asks its drafter for a ``DraftBlock`` and verifies
it the same way, so each drafter works in Baseline, PD and PDV alike (in PDV
the decode lane runs it).

* ``none``        – no proposals: every step is a plain verifier step (the AR engine).
* ``model``       – the draft model, run autoregressively (``stages.draft_block``).
* ``ngram``       – prompt lookup over the request's prompt and output (``engine.ngram``);
  no model forward, and no draft cache at all.
* ``model+ngram`` – the lookup's proposal where there is one, the draft model for the other rows.

A lookup proposal is a point mass (q = 1 for the proposed token): the
acceptance rule then accepts it with probability p(token) and, on a rejection,
samples from p with that token removed, which keeps the output exact.
"""

from __future__ import annotations

import numpy as np
import torch

from engine.config import EngineConfig
from engine.models.pair import ModelPair
from engine.ngram import prompt_lookup
from engine.runner import ModelRunner
from engine.sampling import SamplingRows
from engine.sequence import Sequence
from engine.stages import DraftBlock, draft_block


class Drafter:
    """Proposes up to ``lens[b]`` tokens for each row. Mutates: what ``draft_block`` mutates."""

    name = "none"
    model: ModelRunner | None = None  # the draft model whose caches sequences keep, if any

    def __init__(self, vocab_size: int) -> None:
        self.vocab_size = vocab_size

    def propose(
        self, seqs: list[Sequence], lens: list[int], rows: SamplingRows, confidence: float | None = None
    ) -> DraftBlock:
        return draft_block(None, seqs, [0] * len(seqs), rows)


class ModelDrafter(Drafter):
    name = "model"

    def __init__(self, model: ModelRunner) -> None:
        super().__init__(model.vocab_size)
        self.model = model

    def propose(self, seqs, lens, rows, confidence=None) -> DraftBlock:
        return draft_block(self.model, seqs, lens, rows, confidence)


class NgramDrafter(Drafter):
    name = "ngram"

    def __init__(self, vocab_size: int, min_n: int, max_n: int) -> None:
        super().__init__(vocab_size)
        self.min_n, self.max_n = min_n, max_n

    def lookups(self, seqs: list[Sequence], lens: list[int]) -> list[list[int]]:
        """Each row's lookup proposal (at most ``lens[b]`` tokens; [] where nothing matches)."""
        return [lookup(seq, self.min_n, self.max_n, n) if n > 0 else [] for seq, n in zip(seqs, lens, strict=True)]

    def propose(self, seqs, lens, rows, confidence=None) -> DraftBlock:
        block = draft_block(None, seqs, [0] * len(seqs), rows)
        return with_point_masses(block, self.lookups(seqs, lens), self.vocab_size)


class ModelNgramDrafter(NgramDrafter):
    name = "model+ngram"

    def __init__(self, model: ModelRunner, min_n: int, max_n: int) -> None:
        super().__init__(model.vocab_size, min_n, max_n)
        self.model = model

    def propose(self, seqs, lens, rows, confidence=None) -> DraftBlock:
        found = self.lookups(seqs, lens)
        model_lens = [0 if proposal else n for proposal, n in zip(found, lens, strict=True)]
        block = draft_block(self.model, seqs, model_lens, rows, confidence)
        return with_point_masses(block, found, self.vocab_size)


def lookup(seq: Sequence, min_n: int, max_n: int, k: int) -> list[int]:
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
    if not speculative:
        return Drafter(pair.verifier.vocab_size)
    if config.drafter == "model":
        return ModelDrafter(pair.draft)
    if config.drafter == "ngram":
        return NgramDrafter(pair.verifier.vocab_size, config.prompt_lookup_min, config.prompt_lookup_max)
    return ModelNgramDrafter(pair.draft, config.prompt_lookup_min, config.prompt_lookup_max)
