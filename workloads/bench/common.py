"""What every part of the benchmark shares: its settings and context, the prompts, goals, CSV files.

A part's rows and their summary over rounds are ``workloads.bench.rows``'s.
"""

from __future__ import annotations

import argparse
import csv
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

from metrics.rounds import rotated as rotated  # the parts' run order: one rotation for every comparison
from workloads.bench.rows import Row, Summary
from workloads.drivers.trace import DatasetSpec, Trace, load_trace

# held-out ShareGPT prompts: never used to train or tune the draft, so every part measures on unseen text
HELD_OUT = Path(__file__).resolve().parents[1] / "datasets" / "data" / "sharegpt_heldout.json"
SUMMARY_CSV = "summary.csv"
GOALS_CSV = "goals.csv"
T = TypeVar("T")


@dataclass(frozen=True)
class BenchSettings:
    """How much each part measures; ``quick_settings()`` and ``full()`` are the two sizes the CLI offers."""

    rounds: int  # >= 3 for a figure worth quoting; 1 in --quick
    prompts: int  # held-out prompts of the single-stream parts
    max_new_tokens: int
    loads: tuple[int, ...]  # closed-loop concurrencies of the load sweep
    load_max_new_tokens: int  # shorter outputs in the load sweep: C = 64 is 64 requests per engine and round
    mixed_requests: int  # requests of the mixed-traffic part
    mixed_rate: float  # its Poisson arrival rate (requests/s)
    long_prompt_tokens: int  # the long prompts mixed into it
    quick: bool = False

    def __post_init__(self) -> None:
        if self.rounds < 1 or self.prompts < 1 or self.max_new_tokens < 1 or not self.loads:
            raise ValueError("rounds, prompts, max new tokens and loads must all be positive")

    @classmethod
    def full(cls) -> BenchSettings:
        return cls(3, 4, 64, (1, 2, 4, 8, 16, 32, 64), 32, 16, 1.5, 1024)

    @classmethod
    def quick_settings(cls) -> BenchSettings:
        # C = 16 stays in: the load sweep's goal is read there
        return cls(1, 2, 32, (1, 4, 16), 32, 8, 1.5, 512, quick=True)


@dataclass(frozen=True)
class Goal:
    part: str
    goal: str  # in words, e.g. "ar >= 0.95x transformers generate at C = 1"
    figure: str  # the measured figure, in words
    met: bool

    def row(self) -> dict[str, Any]:
        return {"part": self.part, "goal": self.goal, "figure": self.figure, "met": "met" if self.met else "missed"}


def held_out(ctx: BenchContext, n: int, max_new_tokens: int | None = None) -> Trace:
    """``n`` held-out ShareGPT prompts (never used to train or tune the draft), tokenised for the pair.

    Outputs are capped at ``max_new_tokens`` (the bench's by default), for the engines and transformers alike.
    """
    cap = max_new_tokens or ctx.settings.max_new_tokens
    return load_trace(DatasetSpec(str(HELD_OUT)), ctx.pair, n, 0, cap)


def first(trace: Trace, n: int) -> Trace:
    return Trace(trace.items[:n], trace.source, trace.seed)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """``rows`` as CSV (columns in first-seen order; empty cells for None)."""
    if not rows:
        return
    columns = list(dict.fromkeys(k for r in rows for k in r))
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=columns)
        writer.writeheader()
        writer.writerows({k: "" if r.get(k) is None else r.get(k) for k in columns} for r in rows)


def read_csv(path: Path) -> list[dict[str, str]]:
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        return list(csv.DictReader(fh))


class PartOptions(Protocol):
    """A part's own options: a frozen dataclass whose fields carry their flags (``engine.config.flag``)."""

    def quick(self) -> Self:
        """These options capped at ``--quick``'s sizes: seconds on the tiny pair."""
        ...


class Listed(tuple):
    """A tuple shown as the comma list that gives it on the command line (so ``--help`` shows defaults so)."""

    def __str__(self) -> str:
        return ",".join(str(getattr(v, "value", v)) for v in self) or "none"


def comma_list(convert: Callable[[str], T], name: str) -> Callable[[str], tuple[T, ...]]:
    """A flag's type: a comma list, each item converted (``int``, or a choice); ``none`` is the empty list."""

    def parse(text: str) -> tuple[T, ...]:
        if text.strip() == "none":
            return Listed()
        try:
            return Listed(convert(item.strip()) for item in text.split(",") if item.strip())
        except ValueError as exc:
            raise argparse.ArgumentTypeError(f"{text!r}: {exc}") from None

    parse.__name__ = name  # argparse names the type in its error messages
    return parse


def one_of(choices: tuple[str, ...]) -> Callable[[str], str]:
    def check(text: str) -> str:
        if text not in choices:
            raise ValueError(f"{text!r} is not one of {', '.join(choices)}")
        return text

    return check


@dataclass(frozen=True)
class BenchContext:
    pair: Any  # engine.models.ModelPair
    settings: BenchSettings
    out: Path  # the bench directory
    meta: dict[str, Any] = field(default_factory=dict)  # models, device, software: into every run.json entry
    part_options: tuple[PartOptions, ...] = ()  # the options of the parts that have their own, from the CLI

    def options(self, kind: type[T]) -> T:
        """The part options of type ``kind`` the command line gave (its defaults if none), quick-sized in --quick."""
        given = next((o for o in self.part_options if isinstance(o, kind)), None)
        chosen = given if given is not None else kind()
        return chosen.quick() if self.settings.quick else chosen  # type: ignore[attr-defined]


@dataclass(frozen=True)
class PartResult:
    name: str  # e.g. "1-overhead"
    title: str
    rows: Sequence[Row]  # one per round and competitor (and group), the part's own Row subclass
    summary: list[Summary]  # ``rows.ratio_summary``'s, or the part's own medians
    goals: list[Goal]
    notes: list[str]  # what the figures mean, in words built from them
