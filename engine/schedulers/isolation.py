"""One row's failure stays that row's: what a batched stage changed, and how to undo it for a re-run.

A stage (prefill chunk, draft, verify, accept) runs over every row of a
batch at once, so an error raised inside it does not say which row caused
it. When one does, the engine puts every row that emitted nothing in the
failed call back where it was before (``restore``) and runs each of them
again alone: a row that fails alone fails, the others go on. A row that did
emit tokens in the failed call had finished its step (emitting is a row's
last act in a stage), so it keeps what it emitted and goes on.

Undoing a stage needs little: caches are rolled back by moving their length
back (positions past it are never read), and the rest is a few host values.
Random numbers a failed call drew are not given back: the re-run draws fresh
ones, which keeps each row's output distribution the verifier's.
"""

from __future__ import annotations

from typing import NamedTuple

from engine.sequence import Sequence


class RowState(NamedTuple):
    """What a stage may change in one row, taken before the stage runs."""

    seq: Sequence
    prefilled: int
    pending: int | None
    draft_pending: tuple[int, ...]
    verifier_len: int
    draft_len: int | None  # None: the row has no draft cache
    emitted: int  # output tokens so far
    steps: int  # StepRecords so far


def snapshot(seqs: list[Sequence]) -> list[RowState]:
    """The state of ``seqs`` before a stage; reads only host values."""
    return [
        RowState(
            seq,
            seq.prefilled,
            seq.pending,
            tuple(seq.draft_pending),
            seq.verifier_kv.length if seq.verifier_kv is not None else 0,
            seq.draft_kv.length if seq.draft_kv is not None else None,
            seq.request.num_output_tokens,
            len(seq.request.steps),
        )
        for seq in seqs
    ]


class Restored(NamedTuple):
    """The rows of a failed call, sorted by what happens to them next."""

    again: list[Sequence]  # put back as before the call: to run again, alone
    moved_on: list[Sequence]  # emitted in the call (their step had finished) or ended meanwhile: keep as they are


def restore(states: list[RowState]) -> Restored:
    """Put every row that emitted nothing since ``states`` back as it was then.

    Mutates: those rows' ``prefilled``, ``pending``, ``draft_pending``, cache
    lengths and step records.
    """
    again, moved_on = [], []
    for state in states:
        seq = state.seq
        if seq.finished or seq.released or seq.request.num_output_tokens != state.emitted:
            moved_on.append(seq)
            continue
        seq.prefilled = state.prefilled
        seq.pending = state.pending
        seq.draft_pending = list(state.draft_pending)
        seq.verifier_kv.truncate(state.verifier_len)
        if seq.draft_kv is not None and state.draft_len is not None:
            seq.draft_kv.truncate(state.draft_len)
        del seq.request.steps[state.steps :]
        again.append(seq)
    return Restored(again, moved_on)
