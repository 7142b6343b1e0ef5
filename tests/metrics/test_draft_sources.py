"""Proposals per draft source, from a request's step records."""

from __future__ import annotations

import pytest

from engine.draft_source import MODEL, DraftSource, SourceKind
from engine.request import StepRecord
from metrics.draft_sources import SourceTally, source_tallies


def test_steps_are_tallied_per_source_kind_whatever_the_match_length():
    steps = [
        StepRecord(3, 2, DraftSource(SourceKind.GLOBAL, 2)),
        StepRecord(0, 0, None),
        StepRecord(4, 1, MODEL),
        StepRecord(2, 2, DraftSource(SourceKind.GLOBAL, 5)),
        StepRecord(1, 0, DraftSource(SourceKind.REQUEST, 1)),
    ]
    tallies = source_tallies(steps)
    assert tallies == (
        SourceTally("suffix-global", steps=2, drafted=5, accepted=4),
        SourceTally("model", steps=1, drafted=4, accepted=1),
        SourceTally("suffix-request", steps=1, drafted=1, accepted=0),
    )
    assert tallies[0].acceptance == pytest.approx(0.8)


def test_a_request_that_never_drafted_has_no_tally():
    assert source_tallies([StepRecord(0, 0), StepRecord(0, 0)]) == ()
