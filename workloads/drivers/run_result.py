"""What one replay returns: its finished requests, everything derived from them, and why it stopped.

A ``RunResult`` is immutable once ``workloads.drivers.replay.replay`` returns it.
``RunResult.record`` is the files' view of the run (``metrics.run_record.RunRecord``);
the fields it adds to run.json (arrival, status counts, stop reason, device
probe, per-position acceptance) are spelled out here, once.
"""

from __future__ import annotations

import enum
import secrets
from dataclasses import asdict, dataclass, replace
from datetime import datetime
from typing import Any

from engine.devices import AllocatorMemory
from engine.request import Request, RequestStatus
from engine.schedulers.stats import Outcomes, StepModes
from engine.suffix_tree import TreeSize
from metrics.device_types import ProbeInfo
from metrics.host_noise import HostNoise
from metrics.request_metrics import RequestMetrics
from metrics.run_key import RunKey
from metrics.run_record import RequestOutput, RunRecord
from metrics.summary import PositionAcceptance, RunSummary
from metrics.timeseries import TimeseriesRow
from workloads.drivers.arrivals import ArrivalPolicy, ClosedLoop

# run.json's torch_memory_mb when the models ran on the CPU: PyTorch's CUDA allocator has nothing to report there
NO_ALLOCATOR = "absent: the models ran on the CPU, where PyTorch's CUDA allocator does not apply"

class StopReason(enum.StrEnum):
    """Why a run ended before its trace did; the value is what run.json's ``stop_reason`` holds."""

    CANCELLED = "cancelled"  # the caller set ``cancel`` (Stop in the dashboard, Ctrl-C in the CLI)
    TIMEOUT = "timeout"  # the run's measured time passed ``timeout_s``
    ENGINE_ERROR = "engine error"  # a lane crashed (``fatal_error``)
    ENGINE_DID_NOT_STOP = "engine did not stop"  # lane threads outlived ``stop``: the device may still be busy


@dataclass(frozen=True)
class RunResult:
    key: RunKey
    policy: ArrivalPolicy
    requests: tuple[Request, ...]  # every submitted request, finished, in submission order
    metrics: tuple[RequestMetrics, ...]
    timeseries: tuple[TimeseriesRow, ...]
    summary: RunSummary
    outputs: tuple[RequestOutput, ...]
    positions: tuple[PositionAcceptance, ...]
    probe: ProbeInfo
    started_at: str  # ISO 8601 wall-clock time of t0
    duration_s: float
    planned: int  # requests in the trace
    stop_reason: StopReason | None  # None: the run went to the end of its trace
    engine_error: str | None  # a lane crash reported by the engine
    endpoint: dict[str, Any] | None = None  # an endpoint run: the server and how its tokens were counted
    suffix_tree: TreeSize | None = None  # what the engine's global suffix tree held at the end (suffix drafters)
    step_modes: StepModes | None = None  # PDV: groups its step choice ran each way in the measured run (no warm-up)
    round: int = 1  # a comparison's round (1-based): the sweep sets it, with the machine's noise during it
    noise: HostNoise | None = None
    # PyTorch's own memory on a CUDA device at the run's end (peaks since the run began); None on the CPU
    allocator: AllocatorMemory | None = None

    @property
    def run_id(self) -> str:
        return self.key.run_id

    @property
    def engine(self) -> str:
        return self.key.engine

    @property
    def concurrency(self) -> int | None:
        return self.key.concurrency

    @property
    def request_rate(self) -> float | None:
        return self.key.request_rate

    def counts(self) -> Outcomes:
        statuses = [r.status for r in self.requests]
        return Outcomes(
            ok=statuses.count(RequestStatus.OK),
            failed=statuses.count(RequestStatus.FAILED),
            cancelled=statuses.count(RequestStatus.CANCELLED),
            rejected=statuses.count(RequestStatus.REJECTED),
        )

    def record(self, meta: dict[str, Any] | None = None) -> RunRecord:
        """The files' view of this round of the run; ``meta`` adds to its run.json entry."""
        run_meta = {
            "arrival": arrival_meta(self.policy),
            "planned_requests": self.planned,
            "device_probe": asdict(self.probe),
            **({"endpoint": self.endpoint} if self.endpoint is not None else {}),
            **(meta or {}),
        }
        round_meta = {
            "started_at": self.started_at,
            "duration_s": self.duration_s,
            "submitted_requests": len(self.requests),
            "status_counts": asdict(self.counts()),
            "stop_reason": None if self.stop_reason is None else str(self.stop_reason),
            "engine_error": self.engine_error,
            # beside NVML's device-wide figures (device_probe, the time series): what PyTorch itself holds
            "torch_memory_mb": self.allocator._asdict() if self.allocator is not None else NO_ALLOCATOR,
            "position_acceptance": [asdict(p) for p in self.positions],
            "suffix_tree": None if self.suffix_tree is None else self.suffix_tree._asdict(),
            "step_modes": None if self.step_modes is None else self.step_modes._asdict(),
        }
        # a server does not say how it produced its tokens (the client counts them all as decode): no kinds, no steps
        by_id = {} if self.endpoint is not None else {r.request_id: r for r in self.requests}
        outputs = tuple(_recorded(o, self.round, by_id.get(o.request_id)) for o in self.outputs)
        return RunRecord(
            self.key, self.metrics, self.timeseries, self.summary, outputs, run_meta, self.round, round_meta, self.noise
        )


def _recorded(output: RequestOutput, round_: int, request: Request | None) -> RequestOutput:
    """``output`` of ``round_`` with what its engine recorded: each token's kind and every verify step."""
    steps = None if request is None else tuple(request.steps)
    return replace(output, round=round_, token_kinds=_token_kinds(output, request), steps=steps)


def _token_kinds(output: RequestOutput, request: Request | None) -> tuple[str, ...] | None:
    """How each of ``output``'s tokens was produced, when its ids are the engine's own (not a server's text
    retokenized) and the engine recorded one kind per token."""
    if request is None or tuple(request.output_token_ids) != output.output_token_ids:
        return None
    if len(request.token_kinds) != len(output.output_token_ids):
        return None
    return tuple(str(k) for k in request.token_kinds)


def arrival_meta(policy: ArrivalPolicy) -> dict[str, Any]:
    kind = "closed" if isinstance(policy, ClosedLoop) else "open"
    return {"kind": kind, **asdict(policy)}


def load_label(policy: ArrivalPolicy) -> str:
    """Compact load name for run ids: ``c4``, ``r2.5``, ``rinf-c8``."""
    if isinstance(policy, ClosedLoop):
        return f"c{policy.concurrency}"
    cap = "" if policy.max_concurrency is None else f"-c{policy.max_concurrency}"
    return f"r{policy.request_rate:g}{cap}"


def new_run_id(engine: str, policy: ArrivalPolicy) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{stamp}-{engine}-{load_label(policy)}-{secrets.token_hex(2)}"
