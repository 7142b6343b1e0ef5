"""Writing runs to the five files of a run directory (see ``metrics.schema``).

A run directory belongs to one benchmark invocation but may receive runs from
several: rows are appended, and ``run.json`` gains one entry per run. Before
anything is appended, every existing file's header is checked, so a directory
written with other columns is refused instead of mixed.

Numbers are written with up to 6 decimals (microseconds for ``*_s``,
nanoseconds for ``*_ms``); ``None`` is an empty cell; an infinite request rate
is ``inf``.
"""

from __future__ import annotations

import csv
import json
import logging
import math
import os
import tempfile
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from metrics.request_metrics import RequestMetrics
from metrics.run_key import RunKey
from metrics.schema import (
    OUTPUT_FIELDS,
    OUTPUTS_JSONL,
    REQUEST_COLUMNS,
    REQUESTS_CSV,
    RUN_JSON,
    SUMMARY_COLUMNS,
    SUMMARY_CSV,
    TIMESERIES_COLUMNS,
    TIMESERIES_CSV,
)
from metrics.summary import RunSummary
from metrics.timeseries import TimeseriesRow

log = logging.getLogger(__name__)

RUN_JSON_FORMAT = "pd-verify-runs/1"

Cell = str | int | float | None


class RunFilesError(ValueError):
    """A run directory that cannot take these runs; the message names the file."""


class ForeignRunFile(RunFilesError):
    """A run.json that is valid JSON but not a PD-Verify run file (another tool's)."""


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


@dataclass(frozen=True)
class RunRecord:
    """Everything written for one run. ``meta`` is its run.json entry (JSON-serialisable)."""

    key: RunKey
    requests: tuple[RequestMetrics, ...]
    timeseries: tuple[TimeseriesRow, ...]
    summary: RunSummary
    outputs: tuple[RequestOutput, ...]
    meta: dict[str, Any] = field(default_factory=dict)


# --------------------------------------------------------------------------
# Rows (tuples in column order): shared by the CSV writer and the live frames
# --------------------------------------------------------------------------


def request_rows(key: RunKey, metrics: Iterable[RequestMetrics]) -> list[tuple[Cell, ...]]:
    keyed = {"run_id", "engine", "concurrency", "request_rate"}
    return [tuple(getattr(key, c) if c in keyed else getattr(m, c) for c in REQUEST_COLUMNS) for m in metrics]


def timeseries_rows(key: RunKey, rows: Iterable[TimeseriesRow]) -> list[tuple[Cell, ...]]:
    keyed = {"run_id", "engine", "concurrency"}
    return [tuple(getattr(key, c) if c in keyed else getattr(r, c) for c in TIMESERIES_COLUMNS) for r in rows]


def summary_row(summary: RunSummary) -> tuple[Cell, ...]:
    values = asdict(summary)
    return tuple(values[c] for c in SUMMARY_COLUMNS)


def output_object(output: RequestOutput) -> dict[str, Any]:
    obj = asdict(output)
    obj["prompt_token_ids"] = list(output.prompt_token_ids)
    obj["output_token_ids"] = list(output.output_token_ids)
    return {name: obj[name] for name in OUTPUT_FIELDS}


# --------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------


def format_cell(value: Cell) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        raise TypeError("booleans have no CSV column")
    if isinstance(value, float):
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        if math.isnan(value):
            return ""
        return repr(round(value, 6))
    return str(value)


def _read_header(path: Path) -> tuple[str, ...] | None:
    if not path.exists() or path.stat().st_size == 0:
        return None
    with open(path, newline="", encoding="utf-8") as fh:
        return tuple(next(csv.reader(fh), []))


def check_appendable(out_dir: str | Path) -> None:
    """Raise ``RunFilesError`` if ``out_dir`` holds files these columns cannot be appended to."""
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise RunFilesError(f"{out} exists and is not a directory")
    # the directory, or the nearest part of its path that exists, must be a directory this process can write in
    existing = next(p for p in (out, *out.parents) if p.exists())
    if not existing.is_dir():
        raise RunFilesError(f"{out} cannot be created: {existing} is not a directory")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise RunFilesError(f"{out} cannot be written: no write permission in {existing}")
    for name, columns in (
        (REQUESTS_CSV, REQUEST_COLUMNS),
        (TIMESERIES_CSV, TIMESERIES_COLUMNS),
        (SUMMARY_CSV, SUMMARY_COLUMNS),
    ):
        header = _read_header(out / name)
        if header is not None and header != columns:
            raise RunFilesError(f"{out / name} has other columns than this version writes; write to a new directory")
    run_json = out / RUN_JSON
    if run_json.exists():
        _read_run_json(run_json)


def _append_csv(path: Path, columns: Sequence[str], rows: Iterable[Sequence[Cell]]) -> None:
    new = _read_header(path) is None
    with open(path, "a", newline="", encoding="utf-8") as fh:
        writer = csv.writer(fh)
        if new:
            writer.writerow(columns)
        for row in rows:
            if len(row) != len(columns):
                raise ValueError(f"{path.name}: row has {len(row)} cells, expected {len(columns)}")
            writer.writerow([format_cell(v) for v in row])


def _read_run_json(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise RunFilesError(f"{path}: not readable JSON ({exc})") from exc
    if not isinstance(data, dict) or data.get("format") != RUN_JSON_FORMAT or not isinstance(data.get("runs"), list):
        raise ForeignRunFile(f"{path}: not a PD-Verify run file (format {RUN_JSON_FORMAT})")
    if not all(isinstance(run, dict) for run in data["runs"]):
        raise RunFilesError(f"{path}: its runs are not all JSON objects (edited by hand?)")
    return data


def _write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", dir=path.parent)
    try:
        os.chmod(tmp, 0o644)  # mkstemp makes the file private; run.json is as readable as the CSVs
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=1, default=str, allow_nan=False)
            fh.write("\n")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_run(out_dir: str | Path, record: RunRecord) -> None:
    """Append one run to the five files in ``out_dir`` (created if missing), all or nothing.

    run.json is written last, atomically; if anything fails before it is in
    place, the other four files are cut back to where they were, so a
    directory never holds rows of a run that run.json does not list.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    check_appendable(out)
    appended = [out / name for name in (REQUESTS_CSV, TIMESERIES_CSV, SUMMARY_CSV, OUTPUTS_JSONL)]
    sizes = {path: path.stat().st_size if path.exists() else None for path in appended}
    try:
        _append_run(out, record)
    except BaseException:
        for path, size in sizes.items():
            try:
                if size is None:
                    path.unlink(missing_ok=True)
                else:
                    os.truncate(path, size)
            except OSError as exc:
                log.error("could not undo a partly written run in %s: %s", path, exc)
        raise


def _append_run(out: Path, record: RunRecord) -> None:
    _append_csv(out / REQUESTS_CSV, REQUEST_COLUMNS, request_rows(record.key, record.requests))
    _append_csv(out / TIMESERIES_CSV, TIMESERIES_COLUMNS, timeseries_rows(record.key, record.timeseries))
    _append_csv(out / SUMMARY_CSV, SUMMARY_COLUMNS, [summary_row(record.summary)])
    with open(out / OUTPUTS_JSONL, "a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(output_object(o), ensure_ascii=False) + "\n" for o in record.outputs)
    run_json = out / RUN_JSON
    data = _read_run_json(run_json) if run_json.exists() else {"format": RUN_JSON_FORMAT, "runs": []}
    key = record.key
    entry = {
        "run_id": key.run_id,
        "engine": key.engine,
        "concurrency": key.concurrency,
        "request_rate": key.request_rate,
        **record.meta,
    }
    data["runs"].append(jsonable(entry))
    _write_json_atomically(run_json, data)


def jsonable(value: Any) -> Any:
    """JSON has no infinity: a non-finite float is written as the string ``inf``/``-inf``/``nan``."""
    if isinstance(value, float) and not math.isfinite(value):
        return format_cell(value) or "nan"
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value
