"""Bench directories (``python -m workloads bench --out DIR``) and shareable reports, for the Runs page.

A bench directory holds the suite's ``bench.json``, ``summary.csv`` and
``goals.csv`` and, below it, ordinary run directories (``load-sweep/``,
``lanes/``). The Runs page lists it beside the run directories; opening it
opens the run directories below it and shows its goals, each met or missed
with the figure measured. Reports are ``workloads.report.html``'s page, the
one ``python -m workloads report`` writes.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from metrics.runs import RunDirInfo
from metrics.schema import RUN_JSON
from workloads.bench.common import GOALS_CSV, read_csv
from workloads.report.html import build_report

BENCH_JSON = "bench.json"  # written by every bench run, whichever parts it ran
GOAL_COLUMNS = ["part", "goal", "figure", "met"]


@dataclass(frozen=True)
class BenchDir:
    path: Path
    modified: float  # bench.json's (or goals.csv's) mtime
    run_dirs: tuple[RunDirInfo, ...]  # the run directories below it


def is_bench_dir(path: Path) -> bool:
    """A directory the bench wrote: its ``bench.json`` or ``goals.csv``, and no ``run.json`` of its own."""
    return not (path / RUN_JSON).exists() and ((path / BENCH_JSON).is_file() or (path / GOALS_CSV).is_file())


def find_bench_dirs(root: Path, run_dirs: Sequence[RunDirInfo], max_depth: int = 3) -> list[BenchDir]:
    """Bench directories at or below ``root`` (at most ``max_depth`` levels down), newest first."""
    if not root.is_dir():
        return []
    candidates = {root} | {p for depth in range(1, max_depth + 1) for p in root.glob("/".join(["*"] * depth))}
    found = []
    for path in candidates:
        if not path.is_dir() or not is_bench_dir(path):
            continue
        marker = path / BENCH_JSON if (path / BENCH_JSON).is_file() else path / GOALS_CSV
        below = tuple(info for info in run_dirs if path in info.path.parents)
        found.append(BenchDir(path, marker.stat().st_mtime, below))
    return sorted(found, key=lambda b: b.modified, reverse=True)


def goals_table(path: Path) -> pd.DataFrame:
    """The bench's goals (part, goal, figure, met or missed); an empty frame when it measured none."""
    return pd.DataFrame(read_csv(path / GOALS_CSV), columns=GOAL_COLUMNS)


def report_page(run_dirs: Sequence[Path], root: Path, title: str = "PD-Verify runs") -> bytes:
    """The self-contained HTML report of ``run_dirs``; its per-request CSV links are relative to ``root``."""
    return build_report(list(run_dirs), root / "report.html", title).encode()
