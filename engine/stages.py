"""The stages of speculative decoding, as plain functions over batches.

    prefill_chunk  ->  ( draft_block -> verify_block -> accept_block )*

Every engine is built from these four functions; the engines differ only in
which thread calls which stage, on which sequences, and when. Each function
says what it mutates. None of them knows about threads, queues or streams.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import accumulate

import torch

from engine.draft_source import DraftSource
from engine.request import FinishReason, StepRecord, TokenKind
from engine.runner import ModelRunner, Stage
from engine.sampling import SamplingRows, probabilities, sample, uniforms
from engine.sequence import Sequence
from engine.speculative import verify, verify_greedy
from engine.transfers import FiniteChecks, read_back, upload


def _keep_last(counts: list[int], device: torch.device) -> torch.Tensor:
    """Packed index of the last token of each segment."""
    return upload([c - 1 for c in accumulate(counts)], device)


def _finish_reason(seq: Sequence, tokens: list[int]) -> tuple[list[int], FinishReason | None]:
    """Cut ``tokens`` at the first stop token (kept) or at max_new_tokens."""
    limit = seq.remaining
    for i, token in enumerate(tokens[:limit]):
        if token in seq.stop_token_ids:
            return tokens[: i + 1], FinishReason.STOP
    if len(tokens) >= limit:
        return tokens[:limit], FinishReason.LENGTH
    return tokens, None


# --------------------------------------------------------------------------
# Prefill
# --------------------------------------------------------------------------


def prefill_chunk(
    verifier: ModelRunner, draft: ModelRunner | None, seqs: list[Sequence], token_budget: int
) -> list[Sequence]:
    """Feed the next prompt chunk of ``seqs`` (first come, first served) into both caches.

    At most ``token_budget`` prompt tokens go through each model. Sequences
    whose prompt is now complete get their first token sampled by the verifier
    and emitted. Mutates: the sequences' caches, ``prefilled``, ``pending``,
    ``draft_pending`` and their requests. Returns the sequences that finished
    prefill in this call (some may have finished outright).
    """
    chosen: list[tuple[Sequence, int]] = []
    budget = token_budget
    for seq in seqs:
        if budget == 0:
            break
        n = min(seq.prompt_len - seq.prefilled, budget)
        if n > 0:
            chosen.append((seq, n))
            budget -= n
    if not chosen:
        return []
    counts = [n for _, n in chosen]
    completes = [seq.prefilled + n == seq.prompt_len for seq, n in chosen]
    device = verifier.device
    prompt = [t for seq, n in chosen for t in seq.request.prompt_token_ids[seq.prefilled : seq.prefilled + n]]
    keep_host = [end - 1 for end, complete in zip(accumulate(counts), completes, strict=True) if complete]
    packed = upload(prompt + keep_host, device)  # the chunk's one upload: tokens, then kept positions
    ids, keep = packed[: len(prompt)], packed[len(prompt) :]
    stores = [seq.verifier_kv for seq, _ in chosen]
    logits = verifier.forward(stores, ids, counts, keep, Stage.PREFILL)
    done = [seq for (seq, _), complete in zip(chosen, completes, strict=True) if complete]
    first: list[int] = []
    if done:
        checks = FiniteChecks()
        checks.add(logits, f"verifier forward in {Stage.PREFILL}")
        rows = SamplingRows.of(done, device)
        # the chunk's one read-back: the first tokens and the logits' check together, before the draft's forward,
        # so a failing verifier forward fails the chunk before anything else runs on it
        first, flags = read_back(sample(probabilities(logits, rows), rows), checks.flags(device))
        checks.raise_if_any(flags)
    if draft is not None:
        # the draft's logits at the prompt end are never used: its first proposal follows the first token
        draft.forward([seq.draft_kv for seq, _ in chosen], ids, counts, keep[:0], Stage.PREFILL)
    for seq, n in chosen:
        seq.prefilled += n
    for seq, token in zip(done, first, strict=True):
        seq.pending = token
        seq.draft_pending = [token]
        emitted, reason = _finish_reason(seq, [token])
        seq.request.emit(emitted, [TokenKind.FIRST], reason)
    return done


# --------------------------------------------------------------------------
# Draft
# --------------------------------------------------------------------------


@dataclass
class DraftBlock:
    """Draft proposals for a group of sequences, waiting for verification."""

    seqs: list[Sequence]
    rows: SamplingRows
    lens: list[int]  # [B] tokens proposed per row; 0 = plain verifier step for that row
    tokens: torch.Tensor  # [B, Lmax] long; row b valid up to lens[b]
    probs: torch.Tensor  # [B, Lmax, V] draft distributions; zero rows beyond lens[b]
    fed: list[list[int]]  # [B] draft_pending tokens this block fed into the draft cache
    draft_len_before: list[int]  # [B] draft cache length before the block
    forwards: list[int]  # [B] draft forwards the row ran: lens[b], or lens[b] + 1 when the confidence gate stopped it
    ready_event: object | None = None  # CUDA event marking the block's tensors as written
    draft_s: float = 0.0  # wall time of the draft forwards
    emitted_before: int = 0  # tokens the rows had emitted before this block
    sources: list[DraftSource | None] = field(default_factory=list)  # [B] where each row's proposal came from
    checks: FiniteChecks = field(default_factory=FiniteChecks)  # the verify forward's logits, read at accept

    def tensors(self) -> tuple[torch.Tensor, ...]:
        """The device tensors the draft lane made for the block (the verify lane reads them)."""
        rows = self.rows
        return self.tokens, self.probs, rows.temperature, rows.top_p, rows.top_k


def draft_lengths(seqs: list[Sequence], draft_len: int) -> list[int]:
    """Per-row draft length: never propose past what max_new_tokens lets the row emit."""
    return [max(0, min(draft_len, seq.remaining - 1)) for seq in seqs]


def draft_block(
    draft: ModelRunner | None,
    seqs: list[Sequence],
    lens: list[int],
    rows: SamplingRows,
    confidence: float | None = None,
) -> DraftBlock:
    """Run the draft autoregressively: up to max(lens) batched forwards, one per draft position.

    ``confidence`` is an optional gate: a row stops at the first position where the
    draft's own top-1 probability (softmax of its logits, before temperature
    and truncation) is below it, and that position's token is not proposed.
    The gate looks only at the draft's distribution for the position, never at
    the token sampled from it, so which positions get proposed depends on the
    prefix alone and the acceptance rule stays exact. It costs one host sync per
    draft position; without it tokens stay on the device between positions.

    Mutates: the draft caches and ``draft_pending`` of rows with lens > 0.
    """
    batch, width = len(seqs), max(lens, default=0)
    lens, forwards = list(lens), [0] * batch
    device = rows.temperature.device
    # every row greedy: the argmax is the proposal and no distribution is kept (``verify_greedy`` needs none)
    vocab = draft.vocab_size if draft is not None and not rows.all_greedy else 0
    tokens = torch.zeros(batch, width, dtype=torch.long, device=device)
    probs = torch.zeros(batch, width, vocab, device=device)
    fed = [list(seq.draft_pending) if n > 0 else [] for seq, n in zip(seqs, lens, strict=True)]
    before = [seq.draft_kv.length if seq.draft_kv is not None else 0 for seq in seqs]
    for k in range(width):
        active = [b for b in range(batch) if lens[b] > k]
        if not active:
            break
        index = torch.tensor(active, device=device)
        if k == 0:
            counts = [len(fed[b]) for b in active]
            ids = torch.tensor([t for b in active for t in fed[b]], device=device)
        else:
            counts = [1] * len(active)
            ids = tokens[index, k - 1]
        keep = _keep_last(counts, device)
        logits = draft.forward([seqs[b].draft_kv for b in active], ids, counts, keep, Stage.DRAFT)
        checks = FiniteChecks()
        checks.add(logits, f"draft forward in {Stage.DRAFT}")
        if vocab:
            sub = rows if len(active) == batch else rows.select(active)
            p = probabilities(logits, sub)
            tokens[index, k] = sample(p, sub)
            probs[index, k] = p
        else:
            tokens[index, k] = logits.argmax(-1)
        for b in active:
            forwards[b] = k + 1
        # a draft forward that fails stops the block at that forward, so that the batch's retry row by row
        # finds the row it fails: one read per draft-model position, shared with the confidence gate's
        gate = [] if confidence is None else [torch.softmax(logits.float(), dim=-1).amax(dim=-1) >= confidence]
        flags, *sure = read_back(checks.flags(device), *gate)
        checks.raise_if_any(flags)
        if confidence is not None:
            for b, ok in zip(active, sure[0], strict=True):
                if not ok:
                    lens[b] = k
                    if vocab:
                        probs[b, k] = 0
    for seq, ran in zip(seqs, forwards, strict=True):
        if ran:
            seq.draft_pending = []
    emitted = sum(seq.request.num_output_tokens for seq in seqs)
    return DraftBlock(seqs, rows, lens, tokens, probs, fed, before, forwards, emitted_before=emitted)


# --------------------------------------------------------------------------
# Verify and accept
# --------------------------------------------------------------------------


def verify_block(verifier: ModelRunner, block: DraftBlock) -> torch.Tensor:
    """One verifier forward over [pending, d_1..d_L] of every row.

    Returns the verifier distributions [B, Lmax+1, V] (zero beyond lens[b]+1), or, when every row is greedy,
    its argmax tokens [B, Lmax+1] (0 beyond lens[b]+1): all the greedy rule needs (``verify_greedy``).
    Mutates: the verifier caches (rolled back by ``accept_block``).
    """
    batch, width = block.tokens.shape
    device = block.tokens.device
    counts = [n + 1 for n in block.lens]
    flat_host = [b * (width + 1) + j for b, n in enumerate(counts) for j in range(n)]
    row_host = [b for b, n in enumerate(counts) for _ in range(n)]
    packed = upload([seq.pending for seq in block.seqs] + flat_host + row_host, device)  # the step's one upload
    pending, flat, row_of_token = packed[:batch], packed[batch : batch + len(flat_host)], packed[-len(row_host) :]
    grid = torch.cat([pending.unsqueeze(1), block.tokens], dim=1).view(-1)  # [B * (Lmax+1)]
    keep = torch.arange(flat.shape[0], device=device)
    logits = verifier.forward([seq.verifier_kv for seq in block.seqs], grid[flat], counts, keep, Stage.VERIFY)
    block.checks.add(logits, f"verifier forward in {Stage.VERIFY}")
    if block.rows.all_greedy:
        target_tokens = torch.zeros(batch * (width + 1), dtype=torch.long, device=device)
        target_tokens[flat] = logits.argmax(-1)
        return target_tokens.view(batch, width + 1)
    p = probabilities(logits, block.rows.select(row_host, row_of_token))
    target = torch.zeros(batch * (width + 1), p.shape[-1], device=device)
    target[flat] = p
    return target.view(batch, width + 1, -1)


def accept_block(block: DraftBlock, target: torch.Tensor, record_steps: bool = True) -> list[Sequence]:
    """Apply the acceptance rule, emit tokens, roll back rejected positions.

    Mutates: every row's caches (truncated to the kept tokens), ``pending``,
    ``draft_pending`` and request (tokens, times, kinds, a ``StepRecord`` when
    ``record_steps``). Returns the sequences that finished in this step.
    """
    device = block.tokens.device
    lens = upload(block.lens, device)
    if block.rows.all_greedy:
        num_accepted, next_tokens = verify_greedy(block.tokens, target, lens)
    else:
        verdict = verify(block.tokens, block.probs, target, lens, uniforms(block.rows, block.tokens.shape[1], device))
        num_accepted, next_tokens = verdict.num_accepted, sample(verdict.next_probs, block.rows)
    # the one host wait of a step: the accept decision, the drafted tokens and the forwards' checks, in one copy
    accepted, nexts, flat_drafts, flags = read_back(num_accepted, next_tokens, block.tokens, block.checks.flags(device))
    block.checks.raise_if_any(flags)
    width = block.tokens.shape[1]
    drafts = [flat_drafts[b * width : (b + 1) * width] for b in range(len(block.seqs))]

    finished = []
    for b, seq in enumerate(block.seqs):
        n, drafted, nxt = accepted[b], block.lens[b], nexts[b]
        kept = drafts[b][:n]
        if drafted == 0:
            last_kind = TokenKind.DECODE
        else:
            last_kind = TokenKind.BONUS if n == drafted else TokenKind.CORRECTION
        # verifier cache holds [.., pending, d_1..d_L]; keep [.., pending, d_1..d_n]
        seq.verifier_kv.truncate(seq.verifier_kv.length - (drafted - n))
        ran = block.forwards[b]
        if seq.draft_kv is not None:
            if ran:
                # draft cache got fed + d_1..d_{ran-1}; keep what is still on the accepted path
                context = block.fed[b] + kept + [nxt]
                keep = len(block.fed[b]) + min(ran - 1, n)
                seq.draft_kv.truncate(block.draft_len_before[b] + keep)
                seq.draft_pending = context[keep:]
            else:  # the draft model did not run for this row (no proposal, or a lookup's): it lacks these tokens
                seq.draft_pending += kept + [nxt]
        seq.pending = nxt
        if record_steps:
            source = block.sources[b] if block.sources else None
            seq.request.steps.append(StepRecord(drafted, n, source if drafted else None))
        emitted, reason = _finish_reason(seq, kept + [nxt])
        kinds = [TokenKind.ACCEPTED] * n + [last_kind]
        seq.request.emit(emitted, kinds[: len(emitted)], reason)
        if reason is not None:
            finished.append(seq)
    return finished
