"""Replay accounting, progress, cancel and timeout, sweeps and jobs – against a fake engine.

The fake engine serves requests in order on one worker thread, emitting two
tokens per "verify step" (one accepted, one bonus, out of three drafted), and
rejects or fails requests whose id says so. Everything but timing is therefore
known in advance.
"""

from __future__ import annotations

import queue
import threading
import time

import pytest

from engine.config import EngineConfig, SamplingParams
from engine.models.tiny import tiny_tokenizer
from engine.request import Request, RequestStatus, StepRecord, TokenKind
from engine.schedulers.stats import Counters, EngineStats, LaneStats
from metrics.device_types import DeviceSample, ProbeInfo
from metrics.runs import load_run_dir
from metrics.schema import REQUEST_COLUMNS, RUN_FILES, SUMMARY_COLUMNS
from metrics.summary import SLO
from workloads.drivers.arrivals import ClosedLoop, OpenLoop
from workloads.drivers.live import LiveRun
from workloads.drivers.replay import replay
from workloads.drivers.run_result import StopReason
from workloads.drivers.run_spec import RunHooks, RunSettings, RunSpec, SweepProgress
from workloads.drivers.run_state import RunState
from workloads.drivers.sweep import SweepPlan, run_sweep
from workloads.drivers.trace import Trace, TraceItem


class FakeEngine:
    def __init__(self, name: str, config: EngineConfig, step_s: float = 0.001) -> None:
        self.name = name
        self.fatal_error: str | None = None
        self.config = config
        self.step_s = step_s
        self.inbox: queue.Queue[Request] = queue.Queue()
        self.live: list[Request] = []
        self.lock = threading.Lock()
        self.tokens = self.drafted = self.accepted = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._work, daemon=True)
        self.started = False

    def start(self) -> FakeEngine:
        self.started = True
        self.thread.start()
        return self

    def submit(self, request: Request) -> Request:
        assert self.started
        request.mark_arrived()
        if "reject" in request.request_id:
            request.fail(RequestStatus.REJECTED, "prompt exceeds the model context")
            return request
        with self.lock:
            self.live.append(request)
        self.inbox.put(request)
        return request

    def _work(self) -> None:
        while not self.stopping.is_set():
            try:
                request = self.inbox.get(timeout=0.01)
            except queue.Empty:
                continue
            request.mark_admitted()
            while not request.status.finished and not self.stopping.is_set():
                if "fail" in request.request_id and request.num_output_tokens >= 2:
                    request.fail(RequestStatus.FAILED, "RuntimeError: boom")
                    break
                time.sleep(self.step_s)
                request.steps.append(StepRecord(3, 1))
                done = request.num_output_tokens + 2 >= request.params.max_new_tokens
                request.emit([7, 8], [TokenKind.ACCEPTED, TokenKind.BONUS], "length" if done else None)
                with self.lock:
                    self.tokens += 2
                    self.drafted += 3
                    self.accepted += 1
            if request.status.finished:  # one cut short by stop is cancelled by stop()
                with self.lock:
                    self.live.remove(request)

    def stats(self) -> EngineStats:
        with self.lock:
            running = len(self.live)
            return EngineStats(self.name, time.perf_counter(), self.inbox.qsize(), running,
                               (LaneStats("prefill", 0, 0.0), LaneStats("decode", self.inbox.qsize(), 0.0)), 3,
                               Counters(self.tokens, self.drafted, self.accepted), running)  # fmt: skip

    def output_text(self, request: Request) -> str | None:
        return None

    def accounting_problems(self) -> list[str]:
        return []

    def describe(self) -> None:
        return None

    def stop(self, timeout: float = 5.0) -> None:
        self.stopping.set()
        self.thread.join(timeout)
        with self.lock:
            unfinished = list(self.live)
        while not self.inbox.empty():
            unfinished.append(self.inbox.get())
        for request in unfinished:
            request.fail(RequestStatus.CANCELLED, "engine stopped before the request finished")


class FakePair:
    tokenizer = tiny_tokenizer()
    device = "cpu"

    def encode_prompt(self, text: str, raw: bool = False) -> list[int]:
        return list(self.tokenizer.encode(text))


class QuietProbe:
    info = ProbeInfo("psutil", "cpu", False, "test probe")

    def sample(self) -> DeviceSample:
        return DeviceSample(None, None, None, None, None, 10.0, 100.0)

    def close(self) -> None:
        pass


def factory(step_s: float = 0.001):
    engines: list[FakeEngine] = []

    def make(name: str, pair, config: EngineConfig) -> FakeEngine:
        engines.append(FakeEngine(name, config, step_s))
        return engines[-1]

    make.engines = engines
    return make


def trace(n: int, special: dict[int, str] | None = None, max_new_tokens: int = 6) -> Trace:
    special = special or {}
    items = tuple(
        TraceItem(f"{special.get(i, 'req')}-{i}", f"prompt {i}", (1, 2, 3, i % 200), max_new_tokens) for i in range(n)
    )
    return Trace(items, "test", 0)


def test_every_submitted_request_is_accounted_for_with_its_error():
    t = trace(25, {3: "reject", 11: "reject", 7: "fail"})
    progress: list[tuple[int, int]] = []
    make = factory()
    run = RunSpec("pdv", ClosedLoop(4), RunSettings(EngineConfig(), SamplingParams(max_new_tokens=6), sample_hz=50))
    hooks = RunHooks(progress=lambda p: progress.append((p.finished, p.total)), probe=QuietProbe(), engine_factory=make)
    result = replay(FakePair(), t, run, hooks)
    counts = result.counts()
    assert (counts.ok, counts.failed, counts.cancelled, counts.rejected) == (22, 1, 0, 2)
    assert counts.total == len(result.requests) == len(t) == result.planned
    assert result.summary.completed + result.summary.failed == result.summary.num_requests == 25
    rejected = [m for m in result.metrics if m.status == "rejected"]
    assert {m.error for m in rejected} == {"prompt exceeds the model context"}
    assert [m.request_id for m in result.metrics] == [i.request_id for i in t.items]
    assert progress[-1] == (25, 25) and [p[0] for p in progress] == sorted(p[0] for p in progress)
    assert result.stop_reason is None
    assert result.summary.acceptance_rate == pytest.approx(1 / 3)
    assert result.summary.mean_acceptance_length == pytest.approx(2.0)
    assert result.positions[0].rate == pytest.approx(1.0) and result.positions[1].rate == 0.0
    assert make.engines[0].name == "pdv"


def test_identical_sampling_for_every_request_with_per_request_seeds():
    make = factory()
    params = SamplingParams(max_new_tokens=100, seed=10, temperature=0.7)
    run = RunSpec("pd", ClosedLoop(2), RunSettings(EngineConfig(), params, warmup=0))
    result = replay(FakePair(), trace(5, max_new_tokens=4), run, RunHooks(probe=QuietProbe(), engine_factory=make))
    assert [r.params.seed for r in result.requests] == [10, 11, 12, 13, 14]
    assert {r.params.max_new_tokens for r in result.requests} == {4}  # the trace's capped length
    assert {r.params.temperature for r in result.requests} == {0.7}


def test_time_series_is_sampled_while_the_run_goes_and_lanes_it_lacks_are_empty():
    make = factory(step_s=0.01)
    live = LiveRun()
    run = RunSpec("pd", ClosedLoop(2), RunSettings(EngineConfig(), SamplingParams(), sample_hz=20))
    result = replay(FakePair(), trace(12), run, RunHooks(live=live, probe=QuietProbe(), engine_factory=make))
    rows = result.timeseries
    assert len(rows) >= 3
    assert all(r.queue_verify is None and r.queue_decode is not None for r in rows)
    assert sum(r.tokens_per_s * r.window_s for r in rows) == pytest.approx(12 * 6, abs=2)
    snap = live.snapshot()
    assert snap.state == RunState.DONE and snap.timeseries == rows and snap.finished == 12
    assert snap.requests == result.requests and snap.metrics == result.metrics and snap.summary == result.summary


def test_the_live_snapshot_carries_the_finished_requests_with_the_runs_own_metrics():
    live = LiveRun()
    seen, points = [], (3, 7)

    def progress(p: SweepProgress) -> None:  # on the replay's thread, while the run goes on
        if len(seen) < len(points) and p.finished >= points[len(seen)]:
            seen.append(live.snapshot())

    t = trace(10, {4: "reject"})
    slo = SLO(ttft_ms=60_000.0)
    settings = RunSettings(EngineConfig(), SamplingParams(max_new_tokens=6), slo, warmup=1)
    hooks = RunHooks(progress=progress, live=live, probe=QuietProbe(), engine_factory=factory(step_s=0.005))
    result = replay(FakePair(), t, RunSpec("pdv", ClosedLoop(2), settings), hooks)
    final = {m.request_id: m for m in result.metrics}
    for snap in seen:
        assert snap.state == RunState.RUNNING and snap.total == 10
        assert snap.finished == len(snap.requests) == len(snap.metrics) < 10
        assert all(r.done.is_set() for r in snap.requests)  # warm-up requests are not part of the run
        assert [m.request_id for m in snap.metrics] == [r.request_id for r in snap.requests]
        # the same time origin as the run's result: a request's figures do not change when the run ends
        assert all(m == final[m.request_id] for m in snap.metrics)
        s = snap.summary
        assert (s.run_id, s.num_requests, s.completed + s.failed) == (result.run_id, snap.finished, snap.finished)
        assert s.duration_s == max(m.finish_s for m in snap.metrics)
        assert s.goodput_req_s is not None  # with the run's SLO
    assert [s.finished >= p for s, p in zip(seen, points, strict=True)] == [True, True]
    assert seen[0].metrics == seen[1].metrics[: seen[0].finished]  # finished requests keep their place


def test_cancel_stops_sending_and_cancels_what_is_in_flight():
    cancel = threading.Event()

    def progress(p: SweepProgress) -> None:
        if p.finished >= 3:
            cancel.set()

    hooks = RunHooks(cancel, progress, probe=QuietProbe(), engine_factory=factory(step_s=0.005))
    result = replay(FakePair(), trace(40, max_new_tokens=40), RunSpec("baseline", ClosedLoop(2)), hooks)
    counts = result.counts()
    assert result.stop_reason == StopReason.CANCELLED
    assert len(result.requests) < 40 and result.planned == 40
    assert counts.total == len(result.requests)
    assert counts.cancelled >= 1 and counts.ok >= 3
    assert all(r.status.finished for r in result.requests)


def test_timeout_ends_a_run_that_takes_too_long():
    run = RunSpec("pd", OpenLoop(float("inf")), RunSettings(EngineConfig(), SamplingParams(), timeout_s=0.3, warmup=0))
    hooks = RunHooks(probe=QuietProbe(), engine_factory=factory(step_s=0.01))
    result = replay(FakePair(), trace(10, max_new_tokens=400), run, hooks)
    assert result.stop_reason == StopReason.TIMEOUT
    assert result.counts().cancelled == 10 and result.summary.failed == 10
    assert result.duration_s < 5


def test_sweep_writes_every_engine_and_load_on_the_same_trace(tmp_path):
    plan = SweepPlan(("ar", "pdv"), (ClosedLoop(1), OpenLoop(50.0, 0.5, max_concurrency=3, seed=1)),
                     RunSettings(params=SamplingParams(max_new_tokens=6), warmup=0))  # fmt: skip
    meta = {"models": {"preset": "fake"}}
    t = trace(8, {2: "reject"})
    results = run_sweep(FakePair(), t, plan, tmp_path, meta, RunHooks(engine_factory=factory()))
    assert [(r.engine, r.concurrency, r.request_rate) for r in results] == [
        ("ar", 1, None), ("pdv", 1, None), ("ar", 3, 50.0), ("pdv", 3, 50.0)
    ]  # fmt: skip
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(RUN_FILES)
    loaded = load_run_dir(tmp_path)
    assert tuple(loaded.frames.requests.columns) == REQUEST_COLUMNS
    assert tuple(loaded.frames.summary.columns) == SUMMARY_COLUMNS
    summary = loaded.frames.summary
    assert list(summary["run_id"]) == [r.run_id for r in results]
    assert (summary["completed"] + summary["failed"] == summary["num_requests"]).all()
    prompts = loaded.frames.outputs.groupby("run_id")["prompt_token_ids"].apply(list)
    assert all(p == prompts.iloc[0] for p in prompts)  # every run replayed the identical trace
    run = loaded.runs[2]
    assert run["arrival"] == {"kind": "open", "request_rate": 50.0, "burstiness": 0.5, "max_concurrency": 3,
                              "seed": 1}  # fmt: skip
    assert run["models"] == {"preset": "fake"} and run["device_probe"]["source"] in ("psutil", "nvml")
    assert run["status_counts"]["rejected"] == 1


def test_a_sweep_cancelled_during_warm_up_records_no_empty_run(tmp_path):
    cancel = threading.Event()
    make = factory()

    def cancelling(name, pair, config):
        engine = make(name, pair, config)
        submit = engine.submit

        def first_submit_cancels(request):  # the warm-up request: Stop is pressed while it runs
            cancel.set()
            return submit(request)

        engine.submit = first_submit_cancels
        return engine

    plan = SweepPlan(("ar", "pd"), (ClosedLoop(1),), RunSettings(params=SamplingParams(max_new_tokens=4), warmup=1))
    results = run_sweep(FakePair(), trace(4), plan, tmp_path, hooks=RunHooks(cancel, engine_factory=cancelling))
    assert results == [] and list(tmp_path.iterdir()) == []
    assert len(make.engines) == 1 and make.engines[0].stopping.is_set()  # the next engine was never built


def test_a_sweep_stops_after_an_engine_whose_lanes_did_not_stop(tmp_path):
    make = factory()

    def stuck(name, pair, config):
        engine = make(name, pair, config)
        stop = engine.stop

        def stop_fails(timeout=5.0):
            stop(timeout)
            raise RuntimeError("lane threads did not stop within 5.0s: verify")

        engine.stop = stop_fails
        return engine

    plan = SweepPlan(("ar", "pd"), (ClosedLoop(1),), RunSettings(params=SamplingParams(max_new_tokens=4), warmup=0))
    results = run_sweep(FakePair(), trace(3), plan, tmp_path, hooks=RunHooks(engine_factory=stuck))
    assert [r.engine for r in results] == ["ar"]  # pd would have shared the device with ar's leftover lanes
    assert results[0].stop_reason == StopReason.ENGINE_DID_NOT_STOP
    assert "did not stop" in results[0].engine_error
    assert load_run_dir(tmp_path).runs[0]["stop_reason"] == "engine did not stop"
