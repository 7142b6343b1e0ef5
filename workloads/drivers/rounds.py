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

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from engine.config import ENGINES
from metrics.host_noise import HostReading, host_noise, read_host
from metrics.round_summary import LoadComparison, RoundRun, compare_load
from metrics.run_key import RunKey
from metrics.summary import SLO
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
class LoadPointComparison:
    policy: ArrivalPolicy
    comparison: LoadComparison
    rounds_done: int  # rounds in which every engine has run
    rounds_planned: int
    final: bool  # the load point's rounds have ended and its summary rows are written
    part: str = ""  # which comparison at this load when there are several (MT-Bench's "turn 2"); "" for one

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
        complete = result.stop_reason is None
        self._runs[result.engine].append(RoundRun(round_, result.summary, result.metrics, complete, noise))
        return result

    def comparison(self, final: bool) -> LoadPointComparison:
        done = min((len(rs) for rs in self._runs.values()), default=0)
        policy = self.policy

        def key_for(name: str) -> RunKey:
            return RunKey(self.run_ids[name], name, policy.cap, policy.request_rate)

        ran = {name: rs for name, rs in self._runs.items() if rs or not final}
        compared = compare_load(ran, key_for, self.slo, display_name)
        return LoadPointComparison(policy, compared, done, self.rounds, final, self.part)

    @property
    def any_run(self) -> bool:
        return any(self._runs.values())
