"""Everything the simulator takes from the engine, in one place: its decisions, its records and its config.

The simulated engines run the real engines' policies – the plan functions
(which lane runs next, PDV's group and step mode, how many lanes compute at
once), the draft-length controllers, admission's KV reservation – and fill
the real ``Request`` records and ``EngineStats`` snapshots, so that every
metric is derived exactly as for a measured run. Only this module imports
``engine``; the rest of ``sim`` imports these names from here.
"""

from __future__ import annotations

from engine.config import ControllerConfig, EngineConfig, EngineName, LaneCompute, SamplingParams, StepChoice
from engine.controllers.base import DraftLengthController, LoadSignals, RowOption, RowOutcome, StepObservation
from engine.controllers.registry import make_controller
from engine.draft_source import MODEL
from engine.profiling.cost_profile import CostProfile
from engine.profiling.interference import Interference
from engine.request import FinishReason, Request, RequestStatus, StepRecord, TokenEvent, TokenKind
from engine.schedulers.admission import kv_reservation, request_problem
from engine.schedulers.handoff import Handoff, VerifyQueue
from engine.schedulers.plan import (
    ArbiterRules,
    GroupPlan,
    GroupRules,
    GroupState,
    ModeCosts,
    StepMode,
    choose_lane,
    lane_budgets,
    mode_costs,
    plan_group,
)
from engine.schedulers.stats import Counters, EngineStats, LaneStats, StepModes, p95_ms
from engine.stages import draft_lengths

__all__ = [
    "MODEL",
    "ArbiterRules",
    "ControllerConfig",
    "CostProfile",
    "Counters",
    "DraftLengthController",
    "EngineConfig",
    "EngineName",
    "EngineStats",
    "FinishReason",
    "GroupPlan",
    "GroupRules",
    "GroupState",
    "Handoff",
    "Interference",
    "LaneCompute",
    "LaneStats",
    "LoadSignals",
    "ModeCosts",
    "Request",
    "RequestStatus",
    "RowOption",
    "RowOutcome",
    "SamplingParams",
    "StepChoice",
    "StepMode",
    "StepModes",
    "StepObservation",
    "StepRecord",
    "TokenEvent",
    "TokenKind",
    "VerifyQueue",
    "choose_lane",
    "draft_lengths",
    "kv_reservation",
    "lane_budgets",
    "make_controller",
    "mode_costs",
    "p95_ms",
    "plan_group",
    "request_problem",
]
