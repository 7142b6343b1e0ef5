"""Drafters: where an engine's proposals come from.

Every speculative engine asks its drafter for a ``DraftBlock`` and verifies
it the same way, so each drafter works in Baseline, PD and PDV alike (in PDV
the decode lane runs it).

* ``none``         – no proposals: every step is a plain verifier step (the AR engine).
* ``model``        – the draft model, run autoregressively (``stages.draft_block``).
* ``ngram``        – prompt lookup over the request's prompt and output (``engine.ngram``);
  no model forward, and no draft cache at all.
* ``model+ngram``  – the lookup's proposal where there is one, the draft model for the other rows.
* ``suffix``       – suffix drafting (``engine.suffix``): the most frequent continuation of the
  latest tokens in the request's own context or in the global tree of completed requests'
  outputs, which the engine teaches through ``learn`` as requests complete.
* ``suffix+model`` – the suffix proposal where there is one, the draft model for the other rows.

A step runs in two halves so that the draft-length controller can weigh what
each row would get: ``lookups`` finds every row's model-free proposal (free), the
controller picks each row's length from the row's *source* (an
``engine.draft_source.DraftSource``: the draft model, or a lookup or suffix
match of n tokens, or none), and ``propose`` drafts. A model-free proposal is a
point mass (q = 1 for the proposed token): the acceptance rule then accepts it
with probability p(token) and, on a rejection, samples from p with that token
removed, which keeps the output exact.
"""

from __future__ import annotations

import numpy as np
import torch

from engine.config import EngineConfig
from engine.draft_source import MODEL, DraftSource, SourceKind
from engine.models.pair import ModelPair
from engine.ngram import prompt_lookup
from engine.runner import ModelRunner
from engine.sampling import SamplingRows
from engine.sequence import Sequence
from engine.stages import DraftBlock, draft_block
from engine.suffix import NO_PROPOSAL, Proposal, SuffixDrafting, load_warmup
from engine.suffix_tree import TreeSize


class Drafter:
    """Model-free proposals from a prompt ``lookup`` (``(min_n, max_n)``) or ``suffix`` drafting where either is
    set, the draft ``model`` for the rows they find nothing for."""

    def __init__(
        self,
        name: str,
        vocab_size: int,
        model: ModelRunner | None = None,
        lookup: tuple[int, int] | None = None,
        suffix: SuffixDrafting | None = None,
    ) -> None:
        if lookup is not None and suffix is not None:
            raise ValueError("a drafter uses prompt lookup or suffix drafting, not both")
        self.name = name
        self.vocab_size = vocab_size
        self.model = model  # the draft model whose caches sequences keep, if any
        self.lookup = lookup
        self.suffix = suffix  # holds the global tree: one per engine, for as long as the engine runs

    def lookups(self, seqs: list[Sequence], caps: list[int]) -> list[Proposal]:
        """Each row's model-free proposal of at most ``caps[b]`` tokens (``NO_PROPOSAL`` where nothing matches, or
        where the cap is 0: nothing is looked up for that row)."""
        rows = zip(seqs, caps, strict=True)
        if self.suffix is not None:
            return [self.suffix.propose(context_of(s), c) if c else NO_PROPOSAL for s, c in rows]
        if self.lookup is None:
            return [NO_PROPOSAL] * len(seqs)
        min_n, max_n = self.lookup
        return [row_lookup(s, min_n, max_n, c) if c else NO_PROPOSAL for s, c in rows]

    def source(self, found: Proposal) -> DraftSource | None:
        """Where a row's proposal would come from, or ``None`` when it can get none."""
        if found.tokens:
            return found.source
        return MODEL if self.model is not None else None

    def learn(self, output_token_ids: list[int]) -> None:
        """Teach suffix drafting a completed request's output (nothing for other drafters). Mutates: the tree."""
        if self.suffix is not None:
            self.suffix.learn(output_token_ids)

    def tree_size(self) -> TreeSize | None:
        """What the global suffix tree holds, or ``None`` for a drafter without one."""
        return self.suffix.size() if self.suffix is not None else None

    def propose(
        self,
        seqs: list[Sequence],
        lens: list[int],
        found: list[Proposal],
        rows: SamplingRows,
        confidence: float | None = None,
    ) -> DraftBlock:
        """Draft ``lens[b]`` tokens per row: the first ones of its model-free proposal, or the draft model's.

        Mutates: what ``draft_block`` mutates (rows the model drafts).
        """
        lookups = [f.tokens[:n] for f, n in zip(found, lens, strict=True)]
        model_lens = [0 if f.tokens or self.model is None else n for f, n in zip(found, lens, strict=True)]
        block = draft_block(self.model, seqs, model_lens, rows, confidence)
        block.sources = [self.source(f) if n > 0 else None for f, n in zip(found, lens, strict=True)]
        return with_point_masses(block, lookups, 0 if rows.all_greedy else self.vocab_size)


def context_of(seq: Sequence) -> list[int]:
    """``seq``'s prompt and every token emitted so far (the last one is ``pending``)."""
    return seq.request.prompt_token_ids + seq.request.output_token_ids


def row_lookup(seq: Sequence, min_n: int, max_n: int, k: int) -> Proposal:
    """The prompt lookup over ``seq``'s context."""
    found = prompt_lookup(np.asarray(context_of(seq), dtype=np.int64), min_n, max_n, k)
    if not found.tokens:
        return NO_PROPOSAL
    return Proposal(found.tokens, DraftSource.matched(SourceKind.LOOKUP, found.match))


def with_point_masses(block: DraftBlock, proposals: list[list[int]], vocab_size: int) -> DraftBlock:
    """``block`` with each non-empty proposal put in its row as point-mass draft distributions.

    Rows with a proposal must have drafted nothing in ``block``. ``vocab_size`` 0: the proposals' tokens alone,
    no distributions (a block of greedy rows, verified by ``speculative.verify_greedy``). Mutates: ``block``.
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
            if vocab_size:
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
    if config.drafter == "model+ngram":
        return Drafter("model+ngram", vocab, model=pair.draft, lookup=lookup)
    suffix = SuffixDrafting(config.suffix_tree_tokens, config.suffix_min_prob)
    if config.suffix_warmup is not None:  # an explicitly named set, never the measured prompts' outputs
        for tokens in load_warmup(config.suffix_warmup, vocab):
            suffix.learn(tokens)
    model = pair.draft if config.drafter == "suffix+model" else None
    return Drafter(config.drafter, vocab, model=model, suffix=suffix)
