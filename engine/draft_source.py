"""Where a row's draft proposal comes from: one typed value shared by the drafters, the controller and the stats.

The ``cost`` controller keeps acceptance per source, the verify step records
each row's source in its ``StepRecord``, and Inspect counts proposals per
source. A lookup's or suffix match's length is part of the source because a
longer match is usually a better guess; matches of ``MAX_MATCH_GROUP`` tokens
or more share one group, so the controller's search stays small.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

MAX_MATCH_GROUP = 6  # longer suffix matches are rare and about as reliable as one of 6 tokens


class SourceKind(enum.StrEnum):
    MODEL = "model"  # the draft model, run autoregressively
    LOOKUP = "lookup"  # prompt lookup: the latest earlier occurrence of the context's suffix
    REQUEST = "suffix-request"  # suffix drafting over the request's own prompt and output
    GLOBAL = "suffix-global"  # suffix drafting over the global tree of completed requests' outputs


@dataclass(frozen=True, order=True)
class DraftSource:
    kind: SourceKind
    match: int = 0  # tokens the lookup or suffix matched, capped at MAX_MATCH_GROUP; 0 for the draft model

    def __post_init__(self) -> None:
        if self.kind is SourceKind.MODEL and self.match:
            raise ValueError("the draft model matches no tokens")
        if self.kind is not SourceKind.MODEL and not 1 <= self.match <= MAX_MATCH_GROUP:
            raise ValueError(f"a {self.kind} source needs a match of 1..{MAX_MATCH_GROUP} tokens, got {self.match}")

    @classmethod
    def matched(cls, kind: SourceKind, match: int) -> DraftSource:
        """The source of a proposal that matched ``match`` tokens (grouped above ``MAX_MATCH_GROUP``)."""
        return cls(kind, min(match, MAX_MATCH_GROUP))

    def __str__(self) -> str:
        return str(self.kind) if self.kind is SourceKind.MODEL else f"{self.kind}{self.match}"

    @classmethod
    def parse(cls, text: str) -> DraftSource:
        """The source whose ``str`` is ``text`` (as run files keep it); raises ``ValueError`` for any other text."""
        for kind in SourceKind:
            if text == kind.value:
                return cls(kind)
            match = text.removeprefix(kind.value)
            if match != text and match.isdigit():
                return cls(kind, int(match))
        raise ValueError(f"{text!r} is not a draft source")


MODEL = DraftSource(SourceKind.MODEL)
