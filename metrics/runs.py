"""Finding and reading run directories (the dashboard's "Runs" page).

A run directory is any directory holding ``run.json``; ``list_run_dirs`` finds
them under a root (default ``runs/``), newest first, and ``load_run_dir`` reads
the five files into ``RunFrames`` plus the run.json entries. A file that is
missing (a sweep cancelled before its first run finished) reads as an empty
frame with the right columns.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from metrics.export import ForeignRunFile, RunFilesError, _read_run_json
from metrics.frames import RunFrames, normalize
from metrics.run_key import RunKey
from metrics.schema import (
    ADDED_COLUMNS,
    OUTPUT_FIELDS,
    OUTPUTS_JSONL,
    REQUEST_COLUMNS,
    REQUESTS_CSV,
    RUN_JSON,
    SUMMARY_COLUMNS,
    SUMMARY_CSV,
    TEXT_COLUMNS,
    TIMESERIES_COLUMNS,
    TIMESERIES_CSV,
)

DEFAULT_ROOT = Path("runs")


@dataclass(frozen=True)
class RunDirInfo:
    path: Path
    modified: float  # mtime of run.json, seconds since the epoch
    run_ids: tuple[str, ...]
    engines: tuple[str, ...]  # distinct, in first-run order
    problem: str | None = None  # why its run.json cannot be read (a corrupted or hand-edited file)


@dataclass(frozen=True)
class RunDirectory:
    path: Path
    runs: tuple[dict[str, Any], ...]  # run.json entries: configuration, models, device, versions
    frames: RunFrames


def list_run_dirs(root: str | Path = DEFAULT_ROOT, max_depth: int = 3) -> list[RunDirInfo]:
    """Run directories at or below ``root`` (at most ``max_depth`` levels down), newest first."""
    root = Path(root)
    found: list[RunDirInfo] = []
    if not root.is_dir():
        return found
    candidates = [root / RUN_JSON]
    for depth in range(1, max_depth + 1):
        candidates.extend(root.glob("/".join(["*"] * depth) + "/" + RUN_JSON))
    for run_json in candidates:
        if not run_json.is_file():
            continue
        try:
            runs = _read_run_json(run_json)["runs"]
        except ForeignRunFile:
            continue  # another tool's run.json: not a run directory
        except RunFilesError as exc:  # ours but corrupted or edited by hand: listed, and opening it says why
            found.append(RunDirInfo(run_json.parent, run_json.stat().st_mtime, (), (), str(exc)))
            continue
        run_ids = tuple(str(r.get("run_id")) for r in runs)
        engines = tuple(dict.fromkeys(str(r.get("engine")) for r in runs))
        found.append(RunDirInfo(run_json.parent, run_json.stat().st_mtime, run_ids, engines))
    return sorted(found, key=lambda info: info.modified, reverse=True)


def read_csv(path: Path, columns: tuple[str, ...]) -> pd.DataFrame:
    """A run CSV as written (empty frame with ``columns`` if the file is missing)."""
    if not path.exists() or path.stat().st_size == 0:
        return normalize(pd.DataFrame(columns=list(columns)), columns)
    # "" is the only missing value: an id such as "NA" or "null" must stay text
    df = pd.read_csv(
        path,
        dtype={c: str for c in TEXT_COLUMNS if c in columns},
        keep_default_na=False,
        na_values=[""],
    )
    missing = columns[len(df.columns) :]
    added = {c for later in ADDED_COLUMNS.values() for c in later}
    if tuple(df.columns) == columns[: len(df.columns)] and set(missing) <= added:
        df = df.assign(**{c: float("nan") for c in missing})  # written before these columns existed
    if tuple(df.columns) != columns:
        raise RunFilesError(f"{path} does not have the expected columns")
    return normalize(df, columns)


def read_outputs(path: Path) -> pd.DataFrame:
    if not path.exists():
        return pd.DataFrame(columns=list(OUTPUT_FIELDS))
    with open(path, encoding="utf-8") as fh:
        rows = [json.loads(line) for line in fh if line.strip()]
    return pd.DataFrame(rows, columns=list(OUTPUT_FIELDS))


def load_run_dir(path: str | Path) -> RunDirectory:
    """Everything in one run directory; raises ``RunFilesError`` if it is not one."""
    path = Path(path)
    run_json = path / RUN_JSON
    if not run_json.is_file():
        raise RunFilesError(f"{path} is not a run directory (no {RUN_JSON})")
    runs = tuple(_read_run_json(run_json)["runs"])
    frames = RunFrames(
        requests=read_csv(path / REQUESTS_CSV, REQUEST_COLUMNS),
        timeseries=read_csv(path / TIMESERIES_CSV, TIMESERIES_COLUMNS),
        summary=read_csv(path / SUMMARY_CSV, SUMMARY_COLUMNS),
        outputs=read_outputs(path / OUTPUTS_JSONL),
    )
    return RunDirectory(path, runs, frames)


@dataclass(frozen=True)
class LoadPointVerdict:
    load: str  # e.g. ``C=4``
    verdict: str  # the comparison's one line (``metrics.verdict``)
    noise_warning: str | None


def load_point_verdicts(runs: tuple[dict[str, Any], ...]) -> list[LoadPointVerdict]:
    """The verdict of each load point of a directory, as its run.json entries keep it, in run order.

    Runs written before comparisons had rounds keep none: they give no line.
    """
    found: dict[str, LoadPointVerdict] = {}
    for run in runs:
        if not run.get("verdict"):
            continue
        rate = run.get("request_rate")
        rate = float(rate) if isinstance(rate, str | int | float) else None  # "inf" in JSON
        key = RunKey("verdict", str(run.get("engine")), run.get("concurrency"), rate)
        found.setdefault(key.load_label, LoadPointVerdict(key.load_label, run["verdict"], run.get("noise_warning")))
    return list(found.values())
