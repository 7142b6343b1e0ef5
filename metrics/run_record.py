"""One round of one run as the run files hold it (``RunRecord``), and its rows in each file's column order.

The rows are shared by the CSV writer (``metrics.export``) and the live frames
(``metrics.frames``), so a live table and a saved one have the same columns.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields
from typing import Any

from engine.request import StepRecord
from metrics.host_noise import HostNoise
from metrics.recorded_steps import step_entries
from metrics.request_metrics import RequestMetrics
from metrics.run_key import RunKey
from metrics.schema import OUTPUT_FIELDS, REQUEST_COLUMNS, ROUND_COLUMNS, SUMMARY_COLUMNS, TIMESERIES_COLUMNS
from metrics.summary import RunSummary
from metrics.timeseries import TimeseriesRow

Cell = str | int | float | None




@dataclass(frozen=True)
class RequestOutput:
    """What one request produced (a line of outputs.jsonl)."""

    run_id: str
    engine: str
    request_id: str
    prompt: str | None
    prompt_token_ids: tuple[int, ...]
    output_token_ids: tuple[int, ...]
    text: str
    round: int = 1  # the comparison's round that produced it (1-based)
    # how each output token was produced (``engine.request.TokenKind`` values, one per output token), as
    # Inspect paints them; None where it is not known (a server's output, retokenized from its text)
    token_kinds: tuple[str, ...] | None = None
    # every verify step of the request (draft length, accepted, source), as Inspect draws them; None where
    # it is not known (a server's output: the server does not say how it drafted)
    steps: tuple[StepRecord, ...] | None = None


@dataclass(frozen=True)
class RunRecord:
    """Everything written for one round of one run (JSON-serialisable ``meta`` and ``round_meta``).

    ``meta`` is the run's run.json entry (plan, trace, models: alike in every round); ``round_meta``
    is what only this round knows (start, duration, outcomes, stop reason), kept in the entry's
    ``rounds`` list. ``summary`` is this round's; the run's summary over its rounds is written by
    ``write_summary`` once the comparison at its load point ends.
    """

    key: RunKey
    requests: tuple[RequestMetrics, ...]
    timeseries: tuple[TimeseriesRow, ...]
    summary: RunSummary
    outputs: tuple[RequestOutput, ...]
    meta: dict[str, Any] = field(default_factory=dict)
    round: int = 1  # 1-based; a run of one round is round 1
    round_meta: dict[str, Any] = field(default_factory=dict)
    noise: HostNoise | None = None  # what else the machine did during this round


# --------------------------------------------------------------------------
# Rows (tuples in column order): shared by the CSV writer and the live frames
# --------------------------------------------------------------------------


def request_rows(key: RunKey, metrics: Iterable[RequestMetrics], round_: int = 1) -> list[tuple[Cell, ...]]:
    keyed = {"run_id", "engine", "concurrency", "request_rate"}
    return [
        tuple(getattr(key, c) if c in keyed else round_ if c == "round" else getattr(m, c) for c in REQUEST_COLUMNS)
        for m in metrics
    ]


def timeseries_rows(key: RunKey, rows: Iterable[TimeseriesRow], round_: int = 1) -> list[tuple[Cell, ...]]:
    keyed = {"run_id", "engine", "concurrency"}
    return [
        tuple(getattr(key, c) if c in keyed else round_ if c == "round" else getattr(r, c) for c in TIMESERIES_COLUMNS)
        for r in rows
    ]


def summary_row(summary: RunSummary | Mapping[str, Any]) -> tuple[Cell, ...]:
    """A summary.csv row: a ``RunSummary`` (no ratios: empty cells) or a comparison row with its ratios."""
    values = asdict(summary) if isinstance(summary, RunSummary) else summary
    return tuple(values.get(c) for c in SUMMARY_COLUMNS)


def round_row(record: RunRecord) -> tuple[Cell, ...]:
    """A rounds.csv row: the round's own summary and the machine's noise during it."""
    noise = record.noise
    values = {
        **asdict(record.summary),
        "round": record.round,
        "others_cpu_share": None if noise is None else noise.others_share,
        "steal_share": None if noise is None else noise.steal_share,
        "load_1m": None if noise is None else noise.load_1m,
    }
    return tuple(values[c] for c in ROUND_COLUMNS)


def output_object(output: RequestOutput) -> dict[str, Any]:
    # field by field, not ``asdict``: its deep copy of every token id costs more than the rest of a run's writing
    obj = {f.name: getattr(output, f.name) for f in fields(output)}
    obj["prompt_token_ids"] = list(output.prompt_token_ids)
    obj["output_token_ids"] = list(output.output_token_ids)
    obj["token_kinds"] = None if output.token_kinds is None else list(output.token_kinds)
    obj["steps"] = None if output.steps is None else step_entries(output.steps)
    return {name: obj[name] for name in OUTPUT_FIELDS}
