"""PD and PDV run their CUDA paths on the fake backend, every lane at once: outputs stay the verifier's, and
no operator of one lane's stream touches memory another lane's stream still uses. Skip one wait and it shows."""

import pytest

from engine.config import ControllerConfig, EngineConfig, SamplingParams, StepChoice
from engine.devices import LaneStream
from engine.request import Request, RequestStatus
from engine.schedulers.registry import make_engine
from tests.support.fake_cuda import Hazard, fake_cuda, on_fake  # noqa: F401 - fake_cuda is a fixture
from tests.support.greedy import hf_greedy

PROMPTS = ["the cat sat on the mat and the cat", "one two three four", "a b a b a b", "hello there", "x y z"]
LANES = {"pd": 2, "pdv": 3}


def _config(engine: str, drafter: str) -> EngineConfig:
    return EngineConfig(
        drafter=drafter,
        controller=ControllerConfig(kind="fixed"),
        hybrid_threshold=None,  # PDV pipelines from the first group: the verify lane runs beside the decode lane
        step_choice=StepChoice.COUNT,  # and always: not when this machine's step costs say it pays
        concurrent_lanes=LANES[engine],  # every lane may hold the device at once, as on a GPU
    )


def _run(pair, engine: str, drafter: str, max_new_tokens: int = 10) -> list[Request]:
    params = SamplingParams(max_new_tokens=max_new_tokens, stop_token_ids=())
    requests = [Request(f"f{i}", pair.encode_prompt(p), params) for i, p in enumerate(PROMPTS)]
    eng = make_engine(engine, pair, _config(engine, drafter))
    try:
        eng.generate(requests, timeout=120)
    finally:
        eng.stop()
    return requests


@pytest.mark.parametrize("drafter", ["model", "ngram"])
@pytest.mark.parametrize("engine", ["pd", "pdv"])
def test_lanes_at_once_on_the_fake_are_lossless_and_every_access_is_ordered(
    tiny_pair, fake_cuda, monkeypatch, engine, drafter  # noqa: F811
):
    on_fake(tiny_pair, fake_cuda, monkeypatch)
    requests = _run(tiny_pair, engine, drafter)
    for r in requests:
        assert r.status == "ok", r.error
        assert r.output_token_ids == hf_greedy(tiny_pair.verifier.model, r.prompt_token_ids, 10)
    assert len(fake_cuda.streams) == 1 + LANES[engine]  # the default stream and one per lane
    assert all(s.clock[s.name] > 0 for s in fake_cuda.streams[1:])  # every lane ran kernels on its stream
    assert fake_cuda.pinned >= 1  # uploads went through the lanes' staging buffers
    assert fake_cuda.findings == []


def test_a_lane_that_skips_its_wait_on_the_other_lanes_event_is_caught(tiny_pair, fake_cuda, monkeypatch):  # noqa: F811
    on_fake(tiny_pair, fake_cuda, monkeypatch)
    monkeypatch.setattr(LaneStream, "wait", lambda self, event: None)  # the test double: a lane that never waits
    requests = _run(tiny_pair, "pd", "model")
    assert all(r.status == "ok" for r in requests)  # on the CPU the outputs cannot show it
    assert Hazard.UNORDERED in {f.hazard for f in fake_cuda.findings}, fake_cuda.findings


@pytest.mark.parametrize("engine", ["pd", "pdv"])
def test_a_cuda_error_in_a_lane_stops_the_engine_with_one_error_and_fails_no_row_alone(
    tiny_pair, fake_cuda, monkeypatch, caplog, engine  # noqa: F811
):
    on_fake(tiny_pair, fake_cuda, monkeypatch)
    fake_cuda.fail_kernels()  # sticky, as a real CUDA error: every kernel from now on fails
    eng = make_engine(engine, tiny_pair, _config(engine, "model")).start()
    params = SamplingParams(max_new_tokens=6)
    requests = [eng.submit(Request(f"c{i}", tiny_pair.encode_prompt(p), params)) for i, p in enumerate(PROMPTS)]
    assert all(r.done.wait(60) for r in requests)
    eng.stop()
    assert eng.fatal_error.startswith("engine.devices.DeviceFailure: the device failed"), eng.fatal_error
    assert "CUDA error: an illegal memory access was encountered" in eng.fatal_error
    # the first prefill fails at once: requests submitted after that are refused, every other one fails alike
    failed = [r for r in requests if r.status is RequestStatus.FAILED]
    refused = [r for r in requests if r.status is RequestStatus.REJECTED]
    assert failed and len(failed) + len(refused) == len(requests)
    assert {r.error for r in failed} == {f"engine crashed: {eng.fatal_error}"}  # one error, not one per row
    assert {r.error for r in refused} <= {"engine is stopped"}
    assert "one by one" not in caplog.text and "failing 1 request" not in caplog.text  # no row was retried alone
    late = eng.submit(Request("late", tiny_pair.encode_prompt("late"), params))
    assert late.status is RequestStatus.REJECTED
