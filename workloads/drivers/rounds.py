"""A load point's comparison as its rounds finish: what ``run_sweep`` tells its caller and writes at the end.

At each load point ``run_sweep`` replays the trace on every engine once per
round, in a balanced order (a Williams design, ``metrics.rounds``); each engine keeps one run id
over its rounds. ``LoadPointRounds`` collects those runs, reads the machine's
state around each (``metrics.host_noise``), and after every run gives the
comparison so far (``metrics.round_summary``: pooled summaries, × AR
intervals, verdict, noise warning) as a ``LoadPointComparison`` – a page shows
it live. When the load point's rounds end (or the sweep stops), ``finish``
writes its summary.csv rows and puts the verdict and the noise warning into
its runs' run.json entries.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from engine.config import ENGINES
from metrics.host_noise import HostReading, host_noise, read_host
from metrics.round_summary import REFERENCE, LoadComparison, RoundRun, compare_load
from metrics.run_key import RunKey
from metrics.summary import SLO
from metrics.verdict import MIN_ROUNDS, SAME_MARGIN
from workloads.drivers.arrivals import ArrivalPolicy
from workloads.drivers.run_result import RunResult, new_run_id

# Five rounds: the min–max of n rounds holds the median of the per-round ratios with probability 1 − 2·0.5^n
# (0.94 for 5), and the interval every comparison shows widens it to where a repeat run's median falls
# (metrics.rounds.IntervalKind.REPEAT_RUN), whose width shrinks about as 1/√n.
DEFAULT_ROUNDS = 5


def display_name(name: str) -> str:
    """An engine as people write it ("AR", "PDV", "Baseline"); an endpoint's label as given."""
    if name not in ENGINES:
        return name
    return name.capitalize() if name == "baseline" else name.upper()


@dataclass(frozen=True)
class Precision:
    """Rounds added until every engine's tok/s × AR interval is narrow enough, within a time budget.

    A sweep with a precision runs at least ``min_rounds`` rounds at each load point and then stops after the
    first round at which every engine's interval lies within ±``within`` of its median – or, with a budget,
    before a round that would not end within ``budget_s`` of the load point's start (judged by its rounds so
    far); its plan's ``rounds`` is then the most it runs.
    """

    within: float = SAME_MARGIN  # ±10 %: narrow enough for the verdict to say "the same" of an engine at 1.0×
    min_rounds: int = DEFAULT_ROUNDS
    budget_s: float | None = None

    def __post_init__(self) -> None:
        if not 0 < self.within < 1:
            raise ValueError(f"the interval's half width must be a fraction between 0 and 1, got {self.within}")
        if self.min_rounds < MIN_ROUNDS:
            raise ValueError(f"at least {MIN_ROUNDS} rounds are needed for a verdict, got {self.min_rounds}")
        if self.budget_s is not None and not 0 < self.budget_s < math.inf:
            raise ValueError(f"the time budget must be a positive number of seconds, got {self.budget_s}")

    def reached(self, point: LoadPointComparison) -> bool:
        """Every engine but the reference has a tok/s × AR interval within ±``within`` of its median."""
        ratios = [row.ratios.get("tok_s") for row in point.comparison.rows if row.summary.engine != REFERENCE]
        return bool(ratios) and all(
            r is not None and r.rounds >= self.min_rounds
            and r.lo >= r.median * (1 - self.within) and r.hi <= r.median * (1 + self.within)
            for r in ratios
        )  # fmt: skip

    def describe(self) -> str:
        budget = f" within {self.budget_s:.0f} s" if self.budget_s is not None else ""
        return f"at least {self.min_rounds} rounds, more until every interval is within ±{self.within:.0%}{budget}"


@dataclass(frozen=True)
class LoadPointComparison:
    policy: ArrivalPolicy
    comparison: LoadComparison
    rounds_done: int  # rounds in which every engine has run
    rounds_planned: int
    final: bool  # the load point's rounds have ended and its summary rows are written
    part: str = ""  # which comparison at this load when there are several (MT-Bench's "turn 2"); "" for one
    ended_by: str = ""  # why its rounds ended before ``rounds_planned``, in words (a precision reached, a budget)

    @property
    def load(self) -> str:
        """``C=4`` or ``R=2/s (C<=8)``, with the part when there is one (``C=4, turn 2``)."""
        label = RunKey("load point", "any", self.policy.cap, self.policy.request_rate).load_label
        return f"{label}, {self.part}" if self.part else label

    def verdict_line(self) -> str:
        return self.comparison.verdict.line(display_name)


ComparisonFn = Callable[[LoadPointComparison], None]


class LoadPointRounds:
    """The runs of one load point, round by round; not thread-safe (the sweep's thread owns it)."""

    def __init__(
        self, names: Sequence[str], policy: ArrivalPolicy, rounds: int, slo: SLO | None, part: str = ""
    ) -> None:
        self.policy = policy
        self.part = part
        self.rounds = rounds
        self.slo = slo
        self.run_ids = {name: new_run_id(name, policy) for name in names}  # one id per engine over its rounds
        self._runs: dict[str, list[RoundRun]] = {name: [] for name in names}
        self._before: HostReading | None = None

    def starting(self) -> None:
        """A run is about to start: read the machine's counters."""
        self._before = read_host()

    def ended(self, result: RunResult, round_: int) -> RunResult:
        """``result`` (0-based ``round_``) has ended: return it with its round (1-based) and noise set."""
        noise = host_noise(self._before, read_host()) if self._before is not None else None
        result = replace(result, round=round_ + 1, noise=noise)
        # only a round that went to the end of its trace with every request answered is compared: a round cut
        # short (Stop, a timeout, a crash, a server going away) or with failed requests measured something else
        complete = result.stop_reason is None and result.summary.completed == result.planned
        self._runs[result.engine].append(RoundRun(round_, result.summary, result.metrics, complete, noise))
        return result

    def comparison(self, final: bool, ended_by: str = "") -> LoadPointComparison:
        done = min((len(rs) for rs in self._runs.values()), default=0)
        policy = self.policy

        def key_for(name: str) -> RunKey:
            return RunKey(self.run_ids[name], name, policy.cap, policy.request_rate)

        ran = {name: rs for name, rs in self._runs.items() if rs or not final}
        compared = compare_load(ran, key_for, self.slo, display_name)
        return LoadPointComparison(policy, compared, done, self.rounds, final, self.part, ended_by)

    @property
    def any_run(self) -> bool:
        return any(self._runs.values())
