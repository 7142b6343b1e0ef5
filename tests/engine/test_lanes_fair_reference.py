"""The fair reference for lanes at once: AR and Baseline with the running batch split over two one-core lanes
(``colocated_lanes = 2``), lossless, each lane stepping its own half."""

import threading

import pytest

from engine.config import ControllerConfig, EngineConfig, LaneCompute, SamplingParams
from engine.request import Request
from engine.schedulers.handoff import Handoff, SplitHandoff
from engine.schedulers.registry import make_engine
from tests.support.greedy import generate_matches_verifier

PROMPTS = ["hello world", "a", "the quick brown fox jumps over", "xyz" * 12, "lorem ipsum", "q", "abc def", "zz"]


def halves_config(drafter: str = "model") -> EngineConfig:
    return EngineConfig(
        drafter=drafter,
        controller=ControllerConfig(kind="cost"),
        lane_compute=LaneCompute.AT_ONCE,
        colocated_lanes=2,
        intra_op_threads=2,
    )


def requests_for(pair) -> list[Request]:
    return [
        Request(f"r{i}", pair.encode_prompt(text), SamplingParams(max_new_tokens=4 + 3 * (i % 5), stop_token_ids=()))
        for i, text in enumerate(PROMPTS)
    ]


@pytest.mark.parametrize(("engine", "drafter"), [("ar", "suffix"), ("baseline", "model"), ("baseline", "suffix")])
def test_greedy_output_of_two_half_batches_matches_verifier_alone(tiny_pair, engine, drafter):
    requests = requests_for(tiny_pair)
    eng = make_engine(engine, tiny_pair, halves_config(drafter))
    steppers: dict[str, int] = {}  # lane thread -> sequences it stepped
    step = eng._step

    def counted(seqs, *args, **kwargs):
        name = threading.current_thread().name
        steppers[name] = steppers.get(name, 0) + len(seqs)
        return step(seqs, *args, **kwargs)

    eng._step = counted
    generate_matches_verifier(tiny_pair, eng, requests)
    assert set(steppers) == {f"{engine}-loop", f"{engine}-decode"}  # both halves stepped sequences
    assert eng.arbiter.slots == 2 and eng.budgets.threads == {"loop": 1, "decode": 1}


def test_a_split_handoff_gives_each_sequence_to_the_half_holding_fewest():
    halves = (Handoff(), Handoff())
    split = SplitHandoff(halves)
    split.put(["a", "b", "c"])  # type: ignore[list-item] - the hand-off only moves them
    assert [h.total() for h in halves] == [2, 1] and split.total() == 3
    halves[0].take_all()
    halves[0].finish(2)  # the first half's sequences ended
    split.put(["d", "e"])  # type: ignore[list-item]
    assert [h.total() for h in halves] == [2, 1]  # d to the emptied half, then e to the first of two equal
    assert split.total() == 3


@pytest.mark.parametrize(
    ("fields", "message"),
    [
        ({"colocated_lanes": 3}, "colocated_lanes must be 1 or 2, got 3"),
        ({"colocated_lanes": 2}, "needs lane_compute at-once"),
        ({"colocated_lanes": 2, "lane_compute": "turns"}, "needs lane_compute at-once"),
    ],
)
def test_two_colocated_lanes_taking_turns_or_three_are_refused(fields, message):
    with pytest.raises(ValueError, match=message):
        EngineConfig(**fields)
