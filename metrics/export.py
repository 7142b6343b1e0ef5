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
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict
from pathlib import Path
from typing import Any

from metrics.run_record import Cell, RunRecord, output_object, request_rows, round_row, summary_row, timeseries_rows
from metrics.schema import (
    OUTPUTS_JSONL,
    REQUEST_COLUMNS,
    REQUESTS_CSV,
    ROUND_COLUMNS,
    ROUNDS_CSV,
    RUN_JSON,
    SUMMARY_COLUMNS,
    SUMMARY_CSV,
    TIMESERIES_COLUMNS,
    TIMESERIES_CSV,
)

log = logging.getLogger(__name__)

RUN_JSON_FORMAT = "pd-verify-runs/1"

class RunFilesError(ValueError):
    """A run directory that cannot take these runs; the message names the file."""


class ForeignRunFile(RunFilesError):
    """A run.json that is valid JSON but not a PD-Verify run file (another tool's)."""


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
        (ROUNDS_CSV, ROUND_COLUMNS),
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
    """Append one round of one run to ``out_dir`` (created if missing), all or nothing.

    Its requests, time series, outputs and its rounds.csv row are appended, and
    its run.json entry gains the round (``_merge_round``). run.json is written
    last, atomically; if anything fails before it is in place, the other files
    are cut back to where they were, so a directory never holds rows of a run
    that run.json does not list.
    """
    out = Path(out_dir)

    def append() -> None:
        key = record.key
        _append_csv(out / REQUESTS_CSV, REQUEST_COLUMNS, request_rows(key, record.requests, record.round))
        _append_csv(out / TIMESERIES_CSV, TIMESERIES_COLUMNS, timeseries_rows(key, record.timeseries, record.round))
        _append_csv(out / ROUNDS_CSV, ROUND_COLUMNS, [round_row(record)])
        with open(out / OUTPUTS_JSONL, "a", encoding="utf-8") as fh:
            fh.writelines(json.dumps(output_object(o), ensure_ascii=False) + "\n" for o in record.outputs)
        data = _run_json(out)
        entries = data["runs"]
        found = next((e for e in entries if e.get("run_id") == key.run_id), None)
        if found is None:
            found = {"run_id": key.run_id, "engine": key.engine, "concurrency": key.concurrency,
                     "request_rate": key.request_rate, **record.meta, "rounds": []}  # fmt: skip
            entries.append(found)
        _merge_round(found, record)
        entries[entries.index(found)] = jsonable(found)
        _write_json_atomically(out / RUN_JSON, data)

    _all_or_nothing(out, (REQUESTS_CSV, TIMESERIES_CSV, ROUNDS_CSV, OUTPUTS_JSONL), append)


def write_summary(out_dir: str | Path, rows: Sequence[Mapping[str, Any]], notes: Mapping[str, Any]) -> None:
    """Append the summary.csv rows of runs whose rounds have ended (one per run), all or nothing.

    ``rows`` are ``metrics.round_summary.ComparisonRow.row()`` values; ``notes`` (e.g. the load
    point's verdict and noise warning) go into each of those runs' run.json entries.
    """
    out = Path(out_dir)

    def append() -> None:
        _append_csv(out / SUMMARY_CSV, SUMMARY_COLUMNS, [summary_row(r) for r in rows])
        data = _run_json(out)
        ids = {str(r["run_id"]) for r in rows}
        data["runs"] = [jsonable({**e, **notes}) if e.get("run_id") in ids else e for e in data["runs"]]
        _write_json_atomically(out / RUN_JSON, data)

    _all_or_nothing(out, (SUMMARY_CSV,), append)


def _run_json(out: Path) -> dict[str, Any]:
    run_json = out / RUN_JSON
    return _read_run_json(run_json) if run_json.exists() else {"format": RUN_JSON_FORMAT, "runs": []}


def _merge_round(entry: dict[str, Any], record: RunRecord) -> None:
    """Add ``record``'s round to its run's run.json entry (mutates ``entry``).

    The entry's ``rounds`` lists every round's own meta and noise; at the top,
    figures that add up over rounds are summed (status counts, PDV's step
    modes, per-position acceptance counts, duration), and the first stop reason or engine error
    stays: a run that stopped early in any round is marked so.
    """
    noise = None if record.noise is None else asdict(record.noise)
    entry.setdefault("rounds", []).append({"round": record.round, **record.round_meta, "host_noise": noise})
    for name, value in record.round_meta.items():
        before = entry.get(name)
        if name in ("stop_reason", "engine_error") and before:
            continue
        if name == "duration_s" and isinstance(before, float | int):
            entry[name] = before + value
        elif name in ("status_counts", "step_modes") and isinstance(before, dict) and value is not None:
            entry[name] = {k: before.get(k, 0) + v for k, v in value.items()}
        elif name == "position_acceptance" and isinstance(before, list):
            entry[name] = _sum_positions(before, value)
        elif not (name == "started_at" and name in entry):  # the run started when its first round did
            entry[name] = value


def _sum_positions(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> list[dict[str, Any]]:
    by_position: dict[int, dict[str, Any]] = {}
    for p in (*a, *b):
        into = by_position.setdefault(
            p["position"], {"position": p["position"], "drafted": 0, "accepted": 0, "drafts": 0}
        )
        for k in ("drafted", "accepted", "drafts"):
            into[k] += p.get(k) or 0
    return [by_position[k] for k in sorted(by_position)]


def _all_or_nothing(out: Path, names: Sequence[str], append: Callable[[], None]) -> None:
    """Run ``append``; if it raises, cut the files ``names`` back to their sizes before it."""
    out.mkdir(parents=True, exist_ok=True)
    check_appendable(out)
    appended = [out / name for name in names]
    sizes = {path: path.stat().st_size if path.exists() else None for path in appended}
    try:
        append()
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


def jsonable(value: Any) -> Any:
    """JSON has no infinity: a non-finite float is written as the string ``inf``/``-inf``/``nan``."""
    if isinstance(value, float) and not math.isfinite(value):
        return format_cell(value) or "nan"
    if isinstance(value, dict):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [jsonable(v) for v in value]
    return value
