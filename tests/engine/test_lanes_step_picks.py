"""PDV reports what its step choice picked: groups run atomically and pipelined, as the run's report shows."""

import pytest

from engine.config import ControllerConfig, EngineConfig
from engine.schedulers.plan import StepMode
from engine.schedulers.registry import make_engine
from engine.schedulers.stats import StepModes
from tests.support.pdv_modes import count_modes
from tests.support.short_requests import run_short_requests


@pytest.mark.parametrize("threshold", [None, 100])  # never atomic; always atomic (fewer than 100 running)
def test_pdv_counts_the_groups_it_ran_in_each_mode(tiny_pair, threshold):
    config = EngineConfig(drafter="model", controller=ControllerConfig(kind="fixed"), hybrid_threshold=threshold)
    eng = make_engine("pdv", tiny_pair, config)
    modes = count_modes(eng)
    run_short_requests(eng, max_new_tokens=6)
    picked = eng.drafting.picked
    assert picked == {StepMode.ATOMIC: modes.hybrid_steps, StepMode.PIPELINED: modes.pipelined_blocks}
    assert eng.stats().step_modes == StepModes(modes.hybrid_steps, modes.pipelined_blocks)  # what run files record
    assert picked[StepMode.PIPELINED if threshold is None else StepMode.ATOMIC] > 0
