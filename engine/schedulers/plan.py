"""The engines' decisions as pure functions: a snapshot of state in, a plan out.

Threads only carry plans out; every choice an engine makes about what runs
next is here, testable without a thread or a model:

* ``choose_lane`` – which waiting lane gets the device next (decode > verify >
  prefill, verify promoted when its backlog runs ahead, a starved lane first,
  a prefill passed over for ``ArbiterRules.prefill_after`` turns next);
* ``plan_group`` – PDV's next group: how many ready sequences, and whether
  they run as one atomic step (draft + verify on the decode lane) or as a
  pipelined block (drafted here, verified on the verify lane while the next
  group drafts);
* ``pipelined_pays`` – that choice from step costs (``ModeCosts``);
* ``lane_budgets`` – how many lanes may compute at once and each one's
  intra-op thread count when lanes run at once on a CPU.

The draft length L is the controller's decision (``engine.controllers``).
"""

from __future__ import annotations

import math
from enum import StrEnum
from typing import NamedTuple

from engine.config import LaneCompute, StepChoice
from engine.profiling.cost_profile import CostProfile

PRIORITY = ("decode", "verify", "prefill")
STARVATION_S = 0.5  # about two decode steps of the default pair on a 2-core CPU


class ArbiterRules(NamedTuple):
    promote_margin: int  # verify outranks decode when its backlog exceeds decode's by more than this
    # a waiting prefill lane runs next once this many turns went to other lanes since its own last turn (None:
    # only the time-based starvation rule). Taking turns on one device, a request waiting for its prefill is a
    # row missing from every decode step meanwhile, and a row costs a decode step little. 1 is the colocated
    # loop's order: a prefill that began waiting during a decode step runs right after it, and a prefill with
    # more chunks to go alternates with the other lanes, one chunk per turn of theirs
    prefill_after: int | None = None


def choose_lane(
    waiting: dict[str, float],
    backlog: dict[str, int],
    rules: ArbiterRules,
    now: float = 0.0,
    passed: dict[str, int] | None = None,
) -> str | None:
    """Which waiting lane runs next.

    ``waiting`` maps each waiting lane to when it started waiting;
    ``backlog`` is the work queued per lane (sequences ready to draft for
    decode, sequences in queued verify blocks, requests waiting for prefill);
    ``passed`` the turns other lanes were granted since each lane's own last
    turn. A lane that has waited longer than ``STARVATION_S`` runs
    next whatever its priority: a decode lane always has work, and strict
    priority would otherwise starve prefill. Short of that, a prefill lane
    passed over ``rules.prefill_after`` times runs next.
    """
    starved = [lane for lane, since in waiting.items() if now - since > STARVATION_S]
    if starved:
        return min(starved, key=lambda lane: waiting[lane])
    after = rules.prefill_after
    if after is not None and "prefill" in waiting and (passed or {}).get("prefill", 0) >= after:
        return "prefill"
    order = list(PRIORITY)
    if backlog.get("verify", 0) > backlog.get("decode", 0) + rules.promote_margin:
        order = ["verify", "decode", "prefill"]
    for lane in order:
        if lane in waiting:
            return lane
    return next(iter(sorted(waiting)), None)


# --------------------------------------------------------------------------
# PDV: the next group, atomic or pipelined
# --------------------------------------------------------------------------


class StepMode(StrEnum):
    ATOMIC = "atomic"  # draft + verify + accept on the decode lane, as PD does
    PIPELINED = "pipelined"  # drafted on the decode lane, verified on the verify lane


class GroupState(NamedTuple):
    """What PDV's decode lane sees when it takes a group (read under the ready pool's lock)."""

    ready: int  # sequences waiting to be drafted
    in_flight: int  # sequences taken and not back yet: being drafted, queued for or in verification
    groups_out: int  # groups among ``in_flight``


class GroupRules(NamedTuple):
    micro_batches: int  # groups out at most
    hybrid_threshold: int | None  # below this many running sequences always atomic; None: never atomic
    choice: StepChoice  # at or above the threshold: from step costs, or always pipelined


class ModeCosts(NamedTuple):
    """Step costs at the current load, in seconds (from the machine's ``CostProfile``)."""

    atomic_s: float  # one atomic step over every running sequence: L draft positions + one verify
    draft_s: float  # drafting one group of the pipelined split (0 for drafters that run no model)
    verify_s: float  # verifying one group
    # a forward's time on one lane's share of the cores while another lane computes at once / its time alone
    # with every core (the profile's ``concurrent_slowdown``); read only when ``overlap``
    slowdown: float
    overlap: bool  # whether the draft and verify lanes compute at once (else they take turns)
    # a forward's time on one lane's share of the cores with no other lane computing / its time with every core
    # (the profile's ``budget_slowdown``): an atomic step's, at once; read only when ``overlap``
    alone_slowdown: float = 1.0


class GroupPlan(NamedTuple):
    size: int  # sequences to take from the ready pool
    mode: StepMode


def pipelined_period(costs: ModeCosts, groups: int) -> float:
    """Seconds for every group to advance one step when pipelined.

    In each phase the draft lane drafts one group while the verify lane
    verifies another. At once, each forward runs on its lane's share of the
    cores, ``slowdown`` times its time with every core, and the phase lasts
    as long as the longer of the two. Taking turns, the two run one after the
    other with every core: draft + verify.
    """
    if costs.overlap:
        return groups * max(costs.draft_s, costs.verify_s) * costs.slowdown
    return groups * (costs.draft_s + costs.verify_s)


def atomic_period(costs: ModeCosts) -> float:
    """Seconds for every sequence to advance one step atomically: on the decode lane's share of the cores when
    lanes run at once (``alone_slowdown`` times its time with every core: the verify lane has nothing to do),
    else with every core."""
    return costs.atomic_s * (costs.alone_slowdown if costs.overlap else 1.0)


def pipelined_pays(costs: ModeCosts, groups: int) -> bool:
    """Whether ``groups`` pipelined groups advance every sequence sooner than one atomic step does.

    Both emit the same expected tokens per sequence (the same L, the same
    acceptance), so the shorter period wins; a tie goes to the atomic step,
    which adds no hand-off.
    """
    return groups > 1 and pipelined_period(costs, groups) < atomic_period(costs)


def plan_group(state: GroupState, rules: GroupRules, costs: ModeCosts | None) -> GroupPlan | None:
    """The next group to take, or None when none may go out (every group out, or nothing ready).

    Atomic: every ready sequence in one step. Pipelined: an equal share
    (running / micro_batches) so the groups keep the lanes evenly busy;
    sequences that become ready while every group is out wait and join the
    next group. ``costs`` is read only for ``StepChoice.COST`` at or above the
    threshold; it must be given then.
    """
    if state.groups_out >= rules.micro_batches or state.ready == 0:
        return None
    total = state.ready + state.in_flight
    threshold = rules.hybrid_threshold
    if threshold is None:
        mode = StepMode.PIPELINED
    elif total < threshold:
        mode = StepMode.ATOMIC
    elif rules.choice is StepChoice.COUNT:
        mode = StepMode.PIPELINED
    else:
        if costs is None:
            raise ValueError("the cost-based step choice needs the step costs")
        mode = StepMode.PIPELINED if pipelined_pays(costs, rules.micro_batches) else StepMode.ATOMIC
    size = state.ready if mode is StepMode.ATOMIC else math.ceil(total / rules.micro_batches)
    return GroupPlan(min(size, state.ready), mode)


# --------------------------------------------------------------------------
# Compute per lane
# --------------------------------------------------------------------------


class LaneBudgets(NamedTuple):
    slots: int  # lanes that may hold a device turn at once
    threads: dict[str, int | None]  # lane -> its intra-op threads; None: whatever the thread has (CUDA)
    elastic: bool = False  # each turn's threads from ``elastic_threads`` (``threads`` then: each lane's at start)


def lane_budgets(lanes: tuple[str, ...], cores: int, cuda: bool, compute: LaneCompute) -> LaneBudgets:
    """How many of ``lanes`` compute at once and with how many intra-op threads each.

    On CUDA every lane may run (their streams overlap) and threads do not
    matter. On a CPU taking turns, one lane at a time uses all ``cores``
    (each lane sets them itself: a thread otherwise starts with whatever
    count another thread set last). At once, as many lanes as there are
    cores run, each with an equal share of ``cores``; the share's remainder
    goes to the lanes first in priority (decode, verify, prefill), so the
    lanes at once use exactly ``cores`` threads. Elastic, as many lanes as
    there are cores may run, each turn with the threads ``elastic_threads``
    grants it.
    """
    if cores < 1:
        raise ValueError(f"cores must be >= 1, got {cores}")
    if cuda:
        return LaneBudgets(len(lanes), dict.fromkeys(lanes))
    if compute is LaneCompute.TURNS or len(lanes) == 1 or cores == 1:
        return LaneBudgets(1, dict.fromkeys(lanes, cores))
    if compute is LaneCompute.ELASTIC:
        return LaneBudgets(min(len(lanes), cores), dict.fromkeys(lanes, cores), elastic=True)
    slots = min(len(lanes), cores)
    share, extra = divmod(cores, slots)
    ranked = sorted(lanes, key=lambda lane: PRIORITY.index(lane) if lane in PRIORITY else len(PRIORITY))
    threads = {lane: share + (i < extra) for i, lane in enumerate(ranked)}
    return LaneBudgets(slots, {lane: threads[lane] for lane in lanes})


def elastic_threads(cores: int, busy: int, computing: int, contenders: int) -> int | None:
    """Intra-op threads for a lane taking a turn now with elastic lanes, or None: none free yet, wait.

    ``busy``: threads held by the ``computing`` lanes; ``contenders``: the
    other lanes that want a turn (waiting for one, or with work queued). A
    lane alone gets every core; a lane with others computing or about to
    gets an equal share of the cores (at least one), at most what is free,
    so lanes never hold more threads than there are cores.
    """
    if cores < 1 or busy < 0 or computing < 0 or contenders < 0:
        raise ValueError("cores must be >= 1 and busy, computing and contenders >= 0")
    free = cores - busy
    if free < 1:
        return None
    lanes = min(cores, 1 + computing + contenders)
    return min(free, max(1, cores // lanes))


def mode_costs(
    profile: CostProfile,
    rows: int,
    groups: int,
    draft_len: int,
    model_drafts: bool,
    overlap: bool,
    slowdown: float,
    alone_slowdown: float = 1.0,
) -> ModeCosts:
    """``ModeCosts`` for ``rows`` running sequences split into ``groups``, each proposing ``draft_len`` tokens.

    ``model_drafts``: the proposals come from the draft model, whose forwards the profile times (lookups in a
    request's context or the suffix tree run no forward, so drafting costs ~0 and the atomic step wins).
    """
    group = math.ceil(rows / groups)
    tokens = draft_len + 1

    def draft_s(batch: int) -> float:
        return draft_len * profile.draft_s(batch) if model_drafts else 0.0

    return ModeCosts(
        atomic_s=draft_s(rows) + profile.verify_s(rows, tokens),
        draft_s=draft_s(group),
        verify_s=profile.verify_s(group, tokens),
        slowdown=slowdown,
        overlap=overlap,
        alone_slowdown=alone_slowdown,
    )
