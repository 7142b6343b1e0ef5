"""Injected faults (``engine.faults``): a failing forward fails only the rows that fail alone; stop never hangs; runs
keep rows."""

import json
import threading
import time

import pytest

from engine.config import ControllerConfig, EngineConfig, SamplingParams
from engine.faults import Fault, FaultInjector
from engine.request import Request, RequestStatus
from engine.schedulers.registry import make_engine
from tests.support.serve import wait_until

PARAMS = SamplingParams(temperature=0.0, max_new_tokens=12, stop_token_ids=())
FIXED = ControllerConfig(kind="fixed")  # always drafts with the draft model, so every stage runs


def _config(engine: str, **kw) -> EngineConfig:
    return EngineConfig(controller=FIXED, drafter="model", hybrid_threshold=None, **kw)


def _requests(prefix: str, n: int) -> list[Request]:
    return [Request(f"{prefix}{i}", [3 + i, 7, 11, 5 + i], PARAMS) for i in range(n)]


def _assert_idle_and_balanced(eng) -> None:
    # a request's done event is set when its last token is emitted; its lane releases it right after
    wait_until(lambda: eng.stats().unfinished == 0 and eng.budget.used == 0, timeout=10)
    stats = eng.stats()
    assert stats.accounting_problem() is None and stats.unfinished == 0
    assert eng.budget.used == 0, f"{eng.budget.used} KV tokens still held"


@pytest.mark.parametrize("kind", ["raise", "nan", "inf"])
@pytest.mark.parametrize(
    ("engine", "stage"),
    [("ar", "prefill"), ("ar", "verify"), ("baseline", "prefill"), ("baseline", "draft"), ("baseline", "verify")]
    + [("pd", s) for s in ("prefill", "draft", "verify")]
    + [("pdv", s) for s in ("prefill", "draft", "verify")],
)
def test_a_failing_forward_fails_only_a_row_that_fails_alone_and_the_engine_serves_on(tiny_pair, engine, stage, kind):
    injector = FaultInjector(tiny_pair)
    eng = make_engine(engine, injector.pair, _config(engine, max_batch_size=4))
    try:
        # the first hit fails a batch, whose rows then run one by one: the second hit fails the first of them
        # alone (or, when the first hit fell on a lone row, that row and the first of another forward's)
        with injector.inject(Fault(stage, kind, times=2)) as hits:
            first = eng.generate(_requests("a", 6), timeout=60)
        later = eng.generate(_requests("b", 3), timeout=60)
        threads_alive = all(lane.thread.is_alive() for lane in eng.lanes.values())
        _assert_idle_and_balanced(eng)
    finally:
        eng.stop()
    assert hits.count == 2 and all(hit.startswith(stage) for hit in hits.stages)
    failed = [r for r in first if r.status == RequestStatus.FAILED]
    expected = "injected fault" if kind == "raise" else "non-finite logits"
    assert 1 <= len(failed) <= 2, [r.status for r in first]  # one row per hit at most
    assert all(expected in r.error for r in failed), [r.error for r in failed]
    assert all(r.status == RequestStatus.OK for r in first if r not in failed)  # nothing dropped or hung
    assert [r.status for r in later] == [RequestStatus.OK] * 3 and threads_alive
    assert eng.fatal_error is None


@pytest.mark.parametrize(("engine", "stage"), [("baseline", "prefill"), ("pd", "draft"), ("pdv", "verify")])
def test_stop_during_a_stage_returns_within_5s_with_every_thread_joined(tiny_pair, engine, stage):
    injector = FaultInjector(tiny_pair)
    eng = make_engine(engine, injector.pair, _config(engine))
    eng.start()
    with injector.inject(Fault(stage, "stall", times=None, seconds=0.5)) as hits:
        requests = [eng.submit(r) for r in _requests("s", 4)]
        assert hits.entered.wait(30), f"no {stage} forward ran"
        start = time.monotonic()
        eng.stop()
        took = time.monotonic() - start
    assert took < 5.0, f"stop took {took:.1f}s"
    assert not any(lane.thread.is_alive() for lane in eng.lanes.values())
    assert all(r.done.is_set() for r in requests) and {r.status for r in requests} <= {
        RequestStatus.CANCELLED,
        RequestStatus.OK,
    }
    assert RequestStatus.CANCELLED in {r.status for r in requests}
    _assert_idle_and_balanced(eng)
    assert not [t for t in threading.enumerate() if t.name.startswith(f"{engine}-") and t.is_alive()]


def test_a_lane_crash_fails_every_live_request_with_the_reason(tiny_pair):
    injector = FaultInjector(tiny_pair)
    eng = make_engine("pd", injector.pair, _config("pd"))
    eng.start()
    try:
        with injector.inject(Fault("draft", "crash")):
            requests = [eng.submit(r) for r in _requests("c", 5)]
            assert all(r.done.wait(30) for r in requests)
        late = eng.submit(_requests("late", 1)[0])
    finally:
        eng.stop()
    assert "injected lane crash" in eng.fatal_error
    assert {r.status for r in requests} <= {RequestStatus.OK, RequestStatus.FAILED}
    assert all("engine crashed" in r.error for r in requests if r.status == RequestStatus.FAILED)
    assert late.status == RequestStatus.REJECTED
    _assert_idle_and_balanced(eng)


def test_a_run_whose_engine_crashes_keeps_its_finished_requests_in_the_run_files(tiny_pair, tmp_path):
    from metrics.runs import load_run_dir
    from workloads.datasets.synthetic import LengthSpec
    from workloads.drivers.arrivals import ClosedLoop
    from workloads.drivers.replay import replay
    from workloads.drivers.run_spec import RunSettings, RunSpec
    from workloads.drivers.sweep import RunWriter
    from workloads.drivers.trace import DatasetSpec, load_trace

    spec = DatasetSpec("synthetic", LengthSpec(16), LengthSpec(8))
    trace = load_trace(spec, tiny_pair, num_requests=16, seed=1)

    # the warm-up request and a few run requests go through; then the lane crashes mid-run
    injector = FaultInjector(tiny_pair)
    with injector.inject(Fault("verify", "crash", skip=20)):
        baseline = RunSpec("baseline", ClosedLoop(2), RunSettings(_config("baseline"), PARAMS))
        result = replay(injector.pair, trace, baseline)
    RunWriter(tmp_path).write(result, {})
    run = json.loads((tmp_path / "run.json").read_text())["runs"][0]
    assert run["stop_reason"] == "engine error" and "injected lane crash" in run["engine_error"]
    counts = run["status_counts"]
    assert counts["ok"] >= 1 and counts["failed"] >= 1
    assert sum(counts.values()) == run["submitted_requests"] <= 16
    frames = load_run_dir(tmp_path).frames
    assert len(frames.requests) == run["submitted_requests"] == len(frames.outputs)


def test_the_servers_health_says_whether_the_engine_serves(tiny_pair):
    from fastapi.testclient import TestClient

    from tests.support.serve import served

    injector = FaultInjector(tiny_pair)
    server = served(injector.pair, "pd", controller=FIXED, drafter="model")
    body = {"prompt": "hello", "max_tokens": 8, "temperature": 0}
    with TestClient(server.app) as client:
        with injector.inject(Fault("verify", "raise")):
            failed = client.post("/v1/completions", json=body)
        after_failure = client.get("/health")
        served_after = client.post("/v1/completions", json=body)
        with injector.inject(Fault("draft", "crash")):
            crashed = client.post("/v1/completions", json=body)
        after_crash = client.get("/health")
    assert failed.status_code == 500 and "injected fault" in failed.json()["error"]["message"]
    assert after_failure.status_code == 200 and served_after.status_code == 200  # one failed batch: still serving
    assert crashed.status_code == 503 and after_crash.status_code == 503
    assert "the engine has crashed: " in after_crash.json()["error"]["message"]
    assert "injected lane crash" in after_crash.json()["error"]["message"]


def test_armed_faults_touch_only_the_wrapped_pair(tiny_pair):
    injector = FaultInjector(tiny_pair)
    assert injector.pair.verifier.model is tiny_pair.verifier.model  # a wrapper, not a second model
    with injector.inject(Fault("verify", "raise", times=None), Fault("prefill", "nan", times=None)) as hits:
        plain = make_engine("baseline", tiny_pair, _config("baseline"))
        try:
            requests = plain.generate(_requests("p", 3), timeout=60)
        finally:
            plain.stop()
    assert hits.count == 0 and [r.status for r in requests] == [RequestStatus.OK] * 3


@pytest.mark.parametrize(
    ("fields", "message"),
    [(("decode", "raise"), "unknown stage"), (("verify", "explode"), "unknown fault kind")],
)
def test_a_fault_with_an_unknown_stage_or_kind_is_refused_with_the_choices(fields, message):
    with pytest.raises(ValueError, match=message):
        Fault(*fields)
