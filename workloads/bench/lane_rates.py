"""Forward rates of one lane with every thread against two lanes at once with half each: does overlap pay on a CPU?

For each shape (rows x new tokens per row)
the verifier of the pair (the engine's own ``ModelRunner`` and KV pool) runs
the same forward over and over for ``seconds`` (128 cached tokens per row,
as the step-cost profile times its forwards):

* **one lane** – one Python thread whose intra-op budget is every thread
  torch has (2 on this machine);
* **two lanes** – two Python threads at once, each with an even share of
  them (1 each here) and each on its own runner over the same weights; the
  figure is the sum of both lanes' forwards per second, counted only while
  both ran (``engine.profiling.concurrency``).

Each lane thread takes its budget with ``engine.profiling.lane_threads.
use_intra_op_threads``: in this torch build ``torch.set_num_threads`` is per
thread but also writes a process-wide value that a thread adopts lazily, so
a lane must initialise its own count (``torch.get_num_threads()``) before
setting it, or another thread's setting may replace it; checked by
counting the OS threads that work (that module's docstring). The two
lanes need a runner each because ``ModelRunner.forward`` holds its KV pool's
lock for the whole forward: two lanes on one runner take turns.

Rounds interleave: every round measures every shape, both settings back to
back, the first of the two alternating round by round; a round's ratio is
two lanes' rate over one lane's, and the summary is the median ratio over
rounds with its min–max (``common.ratio_summary``).

``python -m workloads bench --parts lane-rates`` (rounds: ``--rounds``)
appends its rows to ``--lane-rates-csv`` (``<out>/lane-rates/lane-rates.csv``
by default) and rewrites ``summary.csv`` beside it from every row there, so
several calls (a few shapes each, to keep one call short) make one table;
docs/results.md renders that summary.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import torch

from engine.config import flag
from engine.models.pair import ModelPair
from engine.profiling.concurrency import Lane, PreparedForward, lane_runner, prepare_forward, run_lanes
from engine.profiling.lane_threads import lane_budget
from workloads.bench.common import BenchContext, PartResult, ratio_summary, read_csv, write_csv

NAME = "10-lane-rates"
DIRECTORY = "lane-rates"
TITLE = "Forward rates: one lane with two threads against two lanes with one"
SUMMARY = "summary.csv"
MIN_FORWARDS = 3  # per lane and setting, however long a forward takes


class Shape(NamedTuple):
    rows: int
    tokens: int  # new tokens per row

    def __str__(self) -> str:
        return f"{self.rows} x {self.tokens}"


def shape_list(text: str) -> tuple[Shape, ...]:
    """The ``--lane-rates-shapes`` type: a comma list of ROWSxTOKENS, e.g. ``1x1,8x5``."""
    shapes = []
    for item in (t.strip() for t in text.split(",") if t.strip()):
        rows, _, tokens = item.lower().partition("x")
        if not (rows.isdigit() and tokens.isdigit()) or int(rows) < 1 or int(tokens) < 1:
            raise argparse.ArgumentTypeError(f"{item!r} is not ROWSxTOKENS with both at least 1, e.g. 8x5")
        shapes.append(Shape(int(rows), int(tokens)))
    if not shapes:
        raise argparse.ArgumentTypeError("no shape given")
    return tuple(shapes)


shape_list.__name__ = "shapes"  # argparse names the type in its error messages
ALL_SHAPES = shape_list("1x1,1x5,4x1,8x1,16x1,8x5,16x5,32x1")


@dataclass(frozen=True)
class LaneRatesOptions:
    """Which shapes, and how long each setting runs per shape and round (the rounds are the bench's ``--rounds``)."""

    shapes: tuple[Shape, ...] = field(
        default=ALL_SHAPES, metadata=flag("--lane-rates-shapes", shape_list, "comma list of ROWSxTOKENS")
    )
    seconds: float = field(default=3.0, metadata=flag("--lane-rates-seconds", float, "per setting, shape and round"))
    csv: Path | None = field(
        default=None, metadata=flag("--lane-rates-csv", Path, "CSV to append to; off: <out>/lane-rates/lane-rates.csv")
    )

    def __post_init__(self) -> None:
        if not self.shapes or self.seconds <= 0:
            raise ValueError("shapes must not be empty and seconds must be positive")

    def quick(self) -> LaneRatesOptions:
        # two shapes, short runs: the part runs end to end in seconds on the tiny pair
        return replace(self, shapes=self.shapes[:2], seconds=min(self.seconds, 0.1))


class Settings(NamedTuple):
    """The two ways of spending the same threads, named with this machine's numbers."""

    threads: int  # torch's intra-op threads: one lane's budget
    per_lane: int  # each of two lanes' budget

    @property
    def one_lane(self) -> str:
        return f"1 lane x {self.threads} threads"

    @property
    def two_lanes(self) -> str:
        return f"2 lanes x {self.per_lane} thread{'s' if self.per_lane > 1 else ''} (sum)"


def measure(pair: ModelPair, options: LaneRatesOptions, rounds: int) -> list[dict[str, Any]]:
    """One row per round, shape and setting: forwards per second (and each lane's, for two lanes)."""
    threads = torch.get_num_threads()
    settings = Settings(threads, lane_budget(threads, 2))
    first = pair.verifier
    second = lane_runner(first, f"{first.name} (second lane)")
    prepared: dict[Shape, tuple[PreparedForward, PreparedForward]] = {
        s: (prepare_forward(first, s.rows, s.tokens, seed=0), prepare_forward(second, s.rows, s.tokens, seed=1))
        for s in options.shapes
    }
    load_start = os.getloadavg()[0]
    rows = []
    for round_ in range(rounds):
        for shape, (a, b) in prepared.items():
            runs = {
                settings.one_lane: [Lane(first, a, settings.threads)],
                settings.two_lanes: [Lane(first, a, settings.per_lane), Lane(second, b, settings.per_lane)],
            }
            order = list(runs) if round_ % 2 == 0 else list(reversed(runs))  # neither always runs first
            for label in order:
                times = run_lanes(runs[label], options.seconds, MIN_FORWARDS)
                rows.append(
                    {"group": str(shape), "round": round_, "label": label, "rows": shape.rows,
                     "tokens": shape.tokens, "forwards_per_s": sum(t.rate for t in times),
                     "lane_rates": "/".join(f"{t.rate:.2f}" for t in times),
                     "forwards": sum(len(t.durations) for t in times), "seconds": options.seconds,
                     "threads": settings.threads, "load_1min_start": load_start}
                )  # fmt: skip
    load_end = os.getloadavg()[0]
    return [{**r, "load_1min_end": load_end} for r in rows]


def summarise(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``ratio_summary`` of forwards per second, each setting against one lane with every thread."""
    numeric = [{**r, "round": int(r["round"]), "forwards_per_s": float(r["forwards_per_s"])} for r in rows]
    one_lane = next(r["label"] for r in numeric if r["label"].startswith("1 lane"))
    return ratio_summary(numeric, "forwards_per_s", one_lane, NAME)


def table(summary: list[dict[str, Any]]) -> list[dict[str, str]]:
    """The docs table: one row per shape, both settings' median rates, and the ratio's median and min–max."""
    out = []
    for group in dict.fromkeys(s["group"] for s in summary):
        one, two = (s for s in summary if s["group"] == group and s["label"].startswith(("1 lane", "2 lanes")))
        if two["label"].startswith("1 lane"):
            one, two = two, one
        out.append(
            {"rows × tokens per forward": group.replace(" x ", " × "),
             f"{one['label']} (forwards/s)": f"{one['median']:.2f}",
             f"{two['label']} (forwards/s)": f"{two['median']:.2f}",
             "two lanes ÷ one lane": f"{two['ratio_median']:.2f}",
             "min–max": f"{two['ratio_min']:.2f}–{two['ratio_max']:.2f}", "rounds": two["rounds"]}
        )  # fmt: skip
    return out


def notes(summary: list[dict[str, Any]]) -> list[str]:
    two = [s for s in summary if s["label"].startswith("2 lanes")]
    above = [s["group"] for s in two if s["ratio_min"] > 1]
    below = [s["group"] for s in two if s["ratio_max"] < 1]
    rest = [s["group"] for s in two if s["group"] not in above + below]
    return [
        f"Two lanes did more forwards than one lane in every round at: {', '.join(above) or 'no shape'}; "
        f"fewer in every round at: {', '.join(below) or 'no shape'}; "
        f"more in some rounds and fewer in others at: {', '.join(rest) or 'no shape'}."
    ]


def record(csv_path: Path, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Append ``rows`` to ``csv_path``; rewrite the summary beside it from every row there. The summary.

    A shape measured again by a later call gets round numbers after the ones already there, so its rounds
    stay apart.
    """
    before = read_csv(csv_path)
    groups = {r["group"] for r in rows}
    offset = 1 + max((int(r["round"]) for r in before if r["group"] in groups), default=-1)
    every = before + [{**r, "round": r["round"] + offset} for r in rows]
    write_csv(csv_path, every)
    summary = summarise(every)
    write_csv(csv_path.parent / SUMMARY, table(summary))
    return summary


def run(ctx: BenchContext) -> PartResult:
    options = ctx.options(LaneRatesOptions)
    rows = measure(ctx.pair, options, ctx.settings.rounds)
    summary = record(options.csv or ctx.out / DIRECTORY / "lane-rates.csv", rows)
    return PartResult(NAME, TITLE, rows, summary, [], notes(summary))
