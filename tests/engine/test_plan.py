"""The engines' decisions as pure functions: group sizes, atomic or pipelined from given costs, priorities,
and the per-lane thread budgets. No thread, no model."""

import pytest

from engine.config import LaneCompute, StepChoice
from engine.profiling.cost_profile import CostProfile
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
    pipelined_pays,
    pipelined_period,
    plan_group,
)

COUNT = GroupRules(micro_batches=2, hybrid_threshold=3, choice=StepChoice.COUNT)
COST = GroupRules(micro_batches=2, hybrid_threshold=3, choice=StepChoice.COST)
NEVER_ATOMIC = GroupRules(micro_batches=2, hybrid_threshold=None, choice=StepChoice.COST)


def costs(atomic, draft, verify, slowdown=1.0, overlap=True, alone=None) -> ModeCosts:
    return ModeCosts(atomic, draft, verify, slowdown, overlap, slowdown if alone is None else alone)


# ---------------------------------------------------------------- group sizes


def test_a_group_is_an_equal_share_of_the_running_sequences_capped_by_what_is_ready():
    assert plan_group(GroupState(ready=8, in_flight=0, groups_out=0), COUNT, None) == GroupPlan(4, StepMode.PIPELINED)
    assert plan_group(GroupState(ready=5, in_flight=0, groups_out=0), COUNT, None) == GroupPlan(3, StepMode.PIPELINED)
    # 4 are out in the other group: this one gets the rest, 4 of 8
    assert plan_group(GroupState(ready=4, in_flight=4, groups_out=1), COUNT, None) == GroupPlan(4, StepMode.PIPELINED)
    # survivors trickle back: a share of the 8 running, but only 1 is ready
    assert plan_group(GroupState(ready=1, in_flight=7, groups_out=1), COUNT, None) == GroupPlan(1, StepMode.PIPELINED)


def test_no_group_goes_out_while_every_micro_batch_is_out_or_nothing_is_ready():
    assert plan_group(GroupState(ready=6, in_flight=4, groups_out=2), COUNT, None) is None
    assert plan_group(GroupState(ready=0, in_flight=4, groups_out=1), COUNT, None) is None
    assert plan_group(GroupState(ready=0, in_flight=0, groups_out=0), COST, costs(1, 1, 1)) is None


def test_below_the_threshold_every_ready_sequence_runs_in_one_atomic_step_whatever_the_costs():
    cheap_pipeline = costs(atomic=10.0, draft=0.1, verify=0.1)
    state = GroupState(ready=2, in_flight=0, groups_out=0)
    assert plan_group(state, COST, cheap_pipeline) == GroupPlan(2, StepMode.ATOMIC)
    assert plan_group(state, COUNT, None) == GroupPlan(2, StepMode.ATOMIC)


def test_without_a_threshold_groups_are_always_pipelined_and_no_costs_are_read():
    state = GroupState(ready=1, in_flight=0, groups_out=0)
    assert plan_group(state, NEVER_ATOMIC, None) == GroupPlan(1, StepMode.PIPELINED)


# ---------------------------------------------------------- atomic or pipelined


def test_pipelined_period_the_longer_lane_sets_the_pace_at_once_the_sum_in_turns():
    # at once: each forward on its share of the cores (slowdown), the longer of the two per phase, two groups
    assert pipelined_period(costs(0, draft=0.04, verify=0.06, slowdown=1.25), 2) == pytest.approx(2 * 0.06 * 1.25)
    assert pipelined_period(costs(0, draft=0.04, verify=0.06, overlap=False), 2) == pytest.approx(2 * 0.10)


def test_pipelined_when_draft_and_verify_cost_alike_and_the_lanes_overlap():
    state = GroupState(ready=8, in_flight=0, groups_out=0)
    balanced = costs(atomic=0.150, draft=0.045, verify=0.050, slowdown=1.4)  # 2 * 0.050 < 0.150, both slowed
    assert pipelined_pays(balanced, 2)
    assert plan_group(state, COST, balanced) == GroupPlan(4, StepMode.PIPELINED)


def test_atomic_when_drafting_costs_nothing_a_lookup_or_suffix_drafter():
    # two half-batch verifies cost more than one full-batch verify: nothing to overlap with
    state = GroupState(ready=8, in_flight=0, groups_out=0)
    lookups = costs(atomic=0.080, draft=0.0, verify=0.050, slowdown=1.2)
    assert not pipelined_pays(lookups, 2)
    assert plan_group(state, COST, lookups) == GroupPlan(8, StepMode.ATOMIC)


def test_atomic_when_the_lanes_take_turns_and_two_half_steps_cost_more_than_one():
    state = GroupState(ready=8, in_flight=0, groups_out=0)
    turns = costs(atomic=0.150, draft=0.045, verify=0.050, overlap=False)  # 2 * 0.095 = 0.19 > 0.15
    assert plan_group(state, COST, turns).mode is StepMode.ATOMIC
    cheap_halves = costs(atomic=0.150, draft=0.030, verify=0.040, overlap=False)  # 2 * 0.070 = 0.14 < 0.15
    assert plan_group(state, COST, cheap_halves).mode is StepMode.PIPELINED


def test_at_once_an_atomic_step_runs_on_the_decode_lanes_share_alone():
    state = GroupState(ready=8, in_flight=0, groups_out=0)
    # pipelined 2 * 0.06 * 1.4 = 0.168; atomic 0.150 * 1.2 = 0.18 on one lane's share with the others idle
    assert plan_group(state, COST, costs(0.150, 0.05, 0.06, slowdown=1.4, alone=1.2)).mode is StepMode.PIPELINED
    assert plan_group(state, COST, costs(0.150, 0.05, 0.06, slowdown=1.4, alone=1.1)).mode is StepMode.ATOMIC


def test_a_tie_and_a_single_group_go_atomic():
    assert not pipelined_pays(costs(atomic=0.4, draft=0.1, verify=0.1, overlap=False), 2)  # 2 * 0.2 == 0.4
    assert not pipelined_pays(costs(atomic=0.2, draft=0.05, verify=0.1, slowdown=1.5), 2)  # 0.3 == 0.3
    assert not pipelined_pays(costs(atomic=1.0, draft=0.0, verify=0.01), 1)


def test_the_cost_choice_refuses_to_decide_without_costs():
    with pytest.raises(ValueError, match="needs the step costs"):
        plan_group(GroupState(ready=8, in_flight=0, groups_out=0), COST, None)


def test_mode_costs_read_the_profile_at_the_full_batch_and_at_one_group():
    profile = CostProfile(
        batch_sizes=(1, 4, 8),
        tokens=(1, 5),
        verify_ms=((10.0, 12.0), (20.0, 30.0), (30.0, 50.0)),
        draft_ms=(2.0, 4.0, 6.0),
        machine={},
    )
    model = mode_costs(profile, rows=8, groups=2, draft_len=4, model_drafts=True, overlap=True, slowdown=1.3)
    assert model.atomic_s == pytest.approx(4 * 0.006 + 0.050)
    assert (model.draft_s, model.verify_s) == (pytest.approx(4 * 0.004), pytest.approx(0.030))
    assert (model.slowdown, model.overlap, model.alone_slowdown) == (1.3, True, 1.0)
    lookup = mode_costs(profile, rows=8, groups=2, draft_len=4, model_drafts=False, overlap=False, slowdown=1.0)
    assert (lookup.atomic_s, lookup.draft_s) == (pytest.approx(0.050), 0.0)


# ------------------------------------------------------------------ priorities


def test_decode_outranks_verify_outranks_prefill_when_they_wait_together():
    waiting = dict.fromkeys(("prefill", "verify", "decode"), 0.0)
    assert choose_lane(waiting, {"decode": 4, "verify": 4, "prefill": 9}, ArbiterRules(2)) == "decode"
    assert choose_lane({"prefill": 0.0, "verify": 0.0}, {}, ArbiterRules(2)) == "verify"
    assert choose_lane({"prefill": 0.0, "loop": 0.0}, {}, ArbiterRules(2)) == "prefill"


# --------------------------------------------------------------- thread budgets


def test_taking_turns_on_a_cpu_is_one_lane_at_a_time_with_every_core():
    budgets = lane_budgets(("prefill", "decode", "verify"), cores=2, cuda=False, compute=LaneCompute.TURNS)
    assert budgets.slots == 1
    assert budgets.threads == {"prefill": 2, "decode": 2, "verify": 2}


def test_at_once_on_two_cores_each_lane_gets_one_core_and_two_run_at_once():
    three = lane_budgets(("prefill", "decode", "verify"), cores=2, cuda=False, compute=LaneCompute.AT_ONCE)
    assert three.slots == 2 and three.threads == {"prefill": 1, "decode": 1, "verify": 1}
    two = lane_budgets(("prefill", "decode"), cores=2, cuda=False, compute=LaneCompute.AT_ONCE)
    assert two.slots == 2 and two.threads == {"prefill": 1, "decode": 1}


@pytest.mark.parametrize("cores", [2, 3, 4, 7, 8, 16])
def test_at_once_budgets_of_the_lanes_running_together_sum_to_the_cores(cores):
    lanes = ("prefill", "decode", "verify")
    budgets = lane_budgets(lanes, cores=cores, cuda=False, compute=LaneCompute.AT_ONCE)
    assert budgets.slots == min(3, cores)
    ranked = sorted(budgets.threads.values(), reverse=True)
    assert sum(ranked[: budgets.slots]) == cores  # the busiest slots lanes at once use every core, no more
    assert min(ranked) >= 1 and max(ranked) - min(ranked) <= 1
    # a remainder goes to the lanes a user's next token waits on first
    assert budgets.threads["decode"] >= budgets.threads["verify"] >= budgets.threads["prefill"]


def test_one_lane_gets_every_core_and_cuda_lanes_no_thread_budget():
    assert lane_budgets(("loop",), cores=2, cuda=False, compute=LaneCompute.AT_ONCE) == (1, {"loop": 2}, False)
    cuda = lane_budgets(("prefill", "decode", "verify"), cores=2, cuda=True, compute=LaneCompute.TURNS)
    assert cuda.slots == 3 and set(cuda.threads.values()) == {None}
    with pytest.raises(ValueError, match="cores must be >= 1"):
        lane_budgets(("prefill", "decode"), cores=0, cuda=False, compute=LaneCompute.AT_ONCE)
