"""What every part of the benchmark shares: its settings, the prompts, ratios with their spread, goals.

A part runs its competitors one after another on the same prompts, round after
round (the order rotates each round), so that a slow spell of this shared
machine hits them alike. Each round a competitor's figure is divided by the
reference's figure *of the same round*; the summary is the median ratio over
rounds with its min and max. Raw rows (one per round and competitor) and
summaries are plain dicts written as CSV, which is what the docs and figures
are rendered from.
"""

from __future__ import annotations

import argparse
import csv
import statistics
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, Self, TypeVar

from metrics.rounds import ratio_intervals
from metrics.rounds import rotated as rotated  # the parts' run order: one rotation for every comparison
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


def ratio_summary(
    rows: list[dict[str, Any]], metric: str, reference: str, part: str, lower_is_better: bool = False
) -> list[dict[str, Any]]:
    """Per (group, label): the median of ``metric`` and of its ratio to ``reference`` in the same round and group.

    The ratios and their min–max are ``metrics.rounds``'s, the arithmetic every comparison shares.
    """
    by_round: dict[str, dict[Any, dict[str, float | None]]] = {}
    table: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in rows:
        table.setdefault((r["group"], r["label"]), []).append(r)
        by_round.setdefault(r["group"], {}).setdefault(r["round"], {})[r["label"]] = r[metric]
    intervals = {group: ratio_intervals(list(rounds.values()), reference) for group, rounds in by_round.items()}
    out = []
    for (group, label), rs in table.items():
        values = [r[metric] for r in rs if r[metric] is not None]
        ratio = intervals[group].get(label)
        out.append(
            {
                "part": part,
                "group": group,
                "label": label,
                "metric": metric,
                "reference": reference,
                "median": statistics.median(values) if values else None,
                "min": min(values) if values else None,
                "max": max(values) if values else None,
                "ratio_median": None if ratio is None else ratio.median,
                "ratio_min": None if ratio is None else ratio.lo,
                "ratio_max": None if ratio is None else ratio.hi,
                "rounds": len(values),
                "better": "lower" if lower_is_better else "higher",
            }
        )
    return out


def find(summary: list[dict[str, Any]], group: str, label: str, metric: str) -> dict[str, Any] | None:
    return next((s for s in summary if (s["group"], s["label"], s["metric"]) == (group, label, metric)), None)


def spread(s: dict[str, Any] | None) -> str:
    """``1.23x (1.10-1.31)``: a summary row's median ratio with its min-max."""
    if s is None or s["ratio_median"] is None:
        return "not measured"
    return f"{s['ratio_median']:.2f}x ({s['ratio_min']:.2f}-{s['ratio_max']:.2f})"


def same_output_note(rows: list[dict[str, Any]], key: str, reference: str = "ar") -> str:
    """Whether every row's ``key`` says its outputs equalled ``reference``'s, naming the rows that did not."""
    different = sorted({f"{r['label']} ({r['group']}, round {r['round']})" for r in rows if not r[key]})
    listed = f" Different: {', '.join(different)}." if different else ""
    return f"Every output equal to {reference}'s: {not different}.{listed}"


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


def after_rounds(before: list[dict[str, Any]], rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``before`` then ``rows``, a load point both measured getting ``rows``' rounds after every round ``before``
    has of it, so the two calls' rounds stay apart. Rows carry ``group`` and an int ``round``."""
    groups = {r["group"] for r in rows}
    offset = 1 + max((r["round"] for r in before if r["group"] in groups), default=-1)
    return before + [{**r, "round": r["round"] + offset} for r in rows]


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
    rows: list[dict[str, Any]]  # one per round and competitor (and group)
    summary: list[dict[str, Any]]  # ``ratio_summary`` rows
    goals: list[Goal]
    notes: list[str]  # what the figures mean, in words built from them
