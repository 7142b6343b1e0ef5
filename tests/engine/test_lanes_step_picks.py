"""PDV reports what its step choice picked: groups run atomically and pipelined, as the run's report shows."""

import pytest

from engine.config import ControllerConfig, EngineConfig, SamplingParams
from engine.request import Request
from engine.schedulers.plan import StepMode
from engine.schedulers.registry import make_engine
from tests.support.pdv_modes import count_modes


@pytest.mark.parametrize("threshold", [None, 100])  # never atomic; always atomic (fewer than 100 running)
def test_pdv_counts_the_groups_it_ran_in_each_mode(tiny_pair, threshold):
    config = EngineConfig(drafter="model", controller=ControllerConfig(kind="fixed"), hybrid_threshold=threshold)
    eng = make_engine("pdv", tiny_pair, config)
    modes = count_modes(eng)
    requests = [Request(f"p{i}", [1, 2, 3 + i], SamplingParams(max_new_tokens=6)) for i in range(4)]
    try:
        eng.generate(requests, timeout=60)
    finally:
        eng.stop()
    assert all(r.status == "ok" for r in requests)
    picked = eng.drafting.picked
    assert picked == {StepMode.ATOMIC: modes.hybrid_steps, StepMode.PIPELINED: modes.pipelined_blocks}
    assert picked[StepMode.PIPELINED if threshold is None else StepMode.ATOMIC] > 0
