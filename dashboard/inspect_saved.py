"""One request of a saved run, for the Inspect page's saved-run mode.

outputs.jsonl keeps each request's output ids and, since runs record it, how
each token was produced (``token_kinds``). The run's tokenizer (named by its
run.json entry's ``models``) cuts the output into the same coloured pieces as a
new prompt's; a file written before the record existed has no kinds, and the
view says so instead of painting anything. Its recorded verify steps and the
timings of its requests.csv row (found by run, round and request) give the
same tiles, step chart and proposals per source as a new prompt's
(``dashboard.request_figures``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd

from dashboard.request_figures import RequestFigures
from dashboard.token_view import TokenPiece, token_pieces
from metrics.recorded_steps import read_steps

NO_KINDS = "This run was written without a per-token record, so its tokens cannot be coloured; its text is shown plain."

Decode = Callable[[list[int]], str]


@dataclass(frozen=True)
class SavedRequest:
    """What the page shows of one saved request: its prompt, its output and (if recorded) its pieces."""

    run_id: str
    engine: str
    request_id: str
    round: int
    prompt: str
    text: str
    pieces: tuple[TokenPiece, ...] | None  # None: the file has no per-token record
    figures: RequestFigures  # its tiles and steps (None where the file has no per-step record)


def recorded_kinds(value: Any) -> tuple[str, ...] | None:
    """An outputs.jsonl ``token_kinds`` cell as read back: a list, or missing (None / NaN in an older file)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return tuple(str(k) for k in value)


def saved_request(row: Mapping[str, Any], decode: Decode, timing: Mapping[str, Any] | None = None) -> SavedRequest:
    """The view of one outputs.jsonl row; ``decode`` is the run's tokenizer (special tokens kept), ``timing``
    the request's requests.csv row (``request_row``; None: the file has none). Raises ``ValueError`` for a
    ``steps`` entry that is not a step."""
    kinds = recorded_kinds(row.get("token_kinds"))
    ids = [int(t) for t in row["output_token_ids"]]
    pieces = None if kinds is None else token_pieces(decode, ids, kinds)
    prompt = row.get("prompt")
    timing = timing or {}
    return SavedRequest(
        run_id=str(row["run_id"]),
        engine=str(row["engine"]),
        request_id=str(row["request_id"]),
        round=_round(row.get("round")),
        prompt=prompt if isinstance(prompt, str) else "",
        text=str(row["text"]),
        pieces=pieces,
        figures=RequestFigures.recorded(
            len(ids), read_steps(row.get("steps")), timing.get("ttft_ms"), timing.get("tpot_ms")
        ),
    )


def request_row(requests: pd.DataFrame, run_id: str, round_: int, request_id: str) -> dict[str, Any] | None:
    """The requests.csv row of one request of one round of a run (a file without rounds is round 1), or None."""
    if requests.empty:
        return None
    rounds = requests["round"].fillna(1).astype(int)
    found = requests[(requests["run_id"] == run_id) & (rounds == round_) & (requests["request_id"] == request_id)]
    return None if found.empty else found.iloc[0].to_dict()


def _round(value: Any) -> int:
    return 1 if value is None or pd.isna(value) else int(value)


def tokenizer_decode(models: Mapping[str, str]) -> Decode:
    """The decoder of the verifier a run used (run.json's ``models``); raises ``ValueError`` if it has none."""
    from engine.models.tiny import tiny_tokenizer

    if models.get("preset") == "tiny":
        tokenizer = tiny_tokenizer()
    else:
        name = models.get("verifier")
        if not name:
            raise ValueError("the run's run.json names no verifier, so its tokens cannot be decoded")
        from transformers import AutoTokenizer

        try:
            tokenizer = AutoTokenizer.from_pretrained(name)
        except OSError as exc:
            raise ValueError(f"cannot load the tokenizer of {name!r}: {exc}") from exc
    return lambda ids: tokenizer.decode(ids, skip_special_tokens=False)
