"""What a Start on the Live run or Sweep page asks for: engines, endpoints, load points, prompts, settings.

``widgets.forms.replay_form`` builds a ``ReplaySpec`` from the sidebar; the run
manager hands it to a ``dashboard.replay_launch.ReplayLaunch``.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.config import EngineConfig, SamplingParams
from metrics.summary import SLO
from workloads.drivers.arrivals import ArrivalPolicy
from workloads.drivers.rounds import DEFAULT_ROUNDS, Precision
from workloads.drivers.run_spec import RunSettings, RunSpec
from workloads.drivers.sweep import SweepPlan
from workloads.drivers.trace import DatasetSpec
from workloads.endpoint.spec import EndpointSpec


@dataclass(frozen=True)
class ReplaySpec:
    kind: str  # "live" | "sweep": the page that started it
    preset: str
    engines: tuple[str, ...]
    policies: tuple[ArrivalPolicy, ...]
    dataset: DatasetSpec
    num_requests: int
    config: EngineConfig
    params: SamplingParams
    slo: SLO | None = None
    simultaneous: bool = False  # one sweep per engine, all at once: they share the device
    seed: int = 0
    device: str = "auto"
    endpoints: tuple[EndpointSpec, ...] = ()  # OpenAI-compatible servers, run after the engines
    rounds: int = DEFAULT_ROUNDS  # each engine runs the trace once per round, in a balanced order
    precision: Precision | None = None  # rounds added until the intervals are narrow enough; ``rounds`` the most

    def __post_init__(self) -> None:
        if self.rounds < 1:
            raise ValueError("the number of rounds must be at least 1")
        if not (self.engines or self.endpoints):
            raise ValueError("choose at least one engine or endpoint")
        if not self.policies:
            raise ValueError("give at least one load point")
        if self.num_requests < 1:
            raise ValueError("the number of requests must be at least 1")
        if self.precision is not None and self.rounds < self.precision.min_rounds:
            raise ValueError(f"at most {self.rounds} rounds is fewer than the {self.precision.min_rounds} a "
                             "precise comparison starts with")  # fmt: skip

    @property
    def settings(self) -> RunSettings:
        """What every run of the launch shares."""
        return RunSettings(self.config, self.params, self.slo)

    def plan(self, engines: tuple[str, ...], endpoints: tuple[EndpointSpec, ...] = ()) -> SweepPlan:
        return SweepPlan(engines, self.policies, self.settings, endpoints, self.rounds, self.precision)

    def job_groups(self) -> list[tuple[tuple[str, ...], tuple[EndpointSpec, ...]]]:
        """The (engines, endpoints) of each sweep: one sweep for all, or one each when simultaneous."""
        if self.simultaneous:
            return [((e,), ()) for e in self.engines] + [((), (e,)) for e in self.endpoints]
        return [(self.engines, self.endpoints)]

    def run_order(self) -> list[RunSpec]:
        """Every run of the launch, load point by load point, every engine and then every endpoint at each."""
        return self.plan(self.engines, self.endpoints).runs()
