"""Every submitted request ends in exactly one final state; stop() joins every thread."""

import threading
import time

import pytest

from engine.config import ControllerConfig, EngineConfig, SamplingParams, StepChoice
from engine.request import Request, RequestStatus
from engine.schedulers import base
from engine.schedulers.handoff import VerifyQueue
from engine.schedulers.registry import make_engine
from tests.support.budget import record_budget_use
from tests.support.pdv_modes import count_modes
from tests.support.serve import wait_until

FINAL = {RequestStatus.OK, RequestStatus.FAILED, RequestStatus.CANCELLED, RequestStatus.REJECTED}


@pytest.mark.parametrize("engine", ["ar", "baseline", "pd", "pdv"])
def test_no_request_lost_when_stopped_mid_run_under_arrivals(tiny_pair, engine):
    eng = make_engine(engine, tiny_pair, EngineConfig(max_batch_size=4)).start()
    submitted: list[Request] = []

    def arrivals() -> None:
        for i in range(40):
            params = SamplingParams(max_new_tokens=10 + i % 30)
            submitted.append(eng.submit(Request(f"a{i}", tiny_pair.encode_prompt("arrival " * (1 + i % 5)), params)))
            time.sleep(0.003)

    feeder = threading.Thread(target=arrivals)
    feeder.start()
    # stop mid-run: once tokens flow, while arrivals may still come (stop raises if a lane is not joined in 5 s)
    assert wait_until(lambda: any(r.output_token_ids for r in list(submitted)), timeout=120)
    eng.stop(timeout=5.0)
    feeder.join()
    assert all(not lane.thread.is_alive() for lane in eng.lanes.values())
    counts = {s: sum(r.status == s for r in submitted) for s in FINAL}
    assert sum(counts.values()) == len(submitted) == 40
    assert all(r.done.is_set() for r in submitted)
    assert counts[RequestStatus.OK] + counts[RequestStatus.CANCELLED] > 0
    # requests that arrived after stop() are rejected with a reason, not dropped
    assert all(r.error for r in submitted if r.status in (RequestStatus.REJECTED, RequestStatus.CANCELLED))
    assert eng.stats().finished == 40


def test_invalid_requests_are_rejected_with_one_clear_error(tiny_pair):
    eng = make_engine("baseline", tiny_pair, EngineConfig(max_cache_tokens=600)).start()
    try:
        empty = eng.submit(Request("empty", []))
        too_long = eng.submit(Request("long", [1] * 10, SamplingParams(max_new_tokens=tiny_pair.max_context)))
        over_budget = eng.submit(Request("budget", [1] * 10, SamplingParams(max_new_tokens=700)))
        bad_token = eng.submit(Request("vocab", [tiny_pair.verifier.vocab_size + 5]))
        good = eng.submit(Request("good", [1, 2, 3], SamplingParams(max_new_tokens=5)))
        good.done.wait(30)
    finally:
        eng.stop()
    assert empty.status == "rejected" and "empty prompt" in empty.error
    assert too_long.status == "rejected" and "context" in too_long.error
    assert over_budget.status == "rejected" and "budget" in over_budget.error
    assert bad_token.status == "rejected" and "vocabulary" in bad_token.error
    assert good.status == "ok" and good.num_output_tokens == 5


def test_kv_budget_makes_requests_wait_instead_of_failing(tiny_pair):
    # each request reserves 3 + 40 + 1 = 44 tokens; a budget of 100 admits two at a time
    eng = make_engine("pd", tiny_pair, EngineConfig(max_cache_tokens=100))
    requests = [Request(f"b{i}", [5, 6, 7], SamplingParams(max_new_tokens=40, stop_token_ids=())) for i in range(6)]
    held = record_budget_use(eng)  # the budget's use after each reservation, where it peaks
    try:
        eng.generate(requests, timeout=60)
    finally:
        eng.stop()
    assert all(r.status == "ok" for r in requests)
    peak = max(held)
    assert 0 < peak <= 100
    assert eng.budget.used == 0


def test_a_failing_forward_fails_its_requests_and_the_engine_keeps_serving(tiny_pair, monkeypatch):
    eng = make_engine("baseline", tiny_pair).start()
    original = eng._step
    calls = {"n": 0}

    def flaky(seqs, verify_queue=0):
        calls["n"] += 1
        if calls["n"] == 1:
            raise RuntimeError("simulated device error")
        return original(seqs, verify_queue)

    monkeypatch.setattr(eng, "_step", flaky)
    try:
        first = eng.submit(Request("first", [1, 2, 3], SamplingParams(max_new_tokens=8)))
        first.done.wait(30)
        second = eng.submit(Request("second", [1, 2, 3], SamplingParams(max_new_tokens=8)))
        second.done.wait(30)
    finally:
        eng.stop()
    assert first.status == "failed" and "simulated device error" in first.error
    assert first.output_token_ids  # what it produced before failing is kept
    assert second.status == "ok"


@pytest.mark.parametrize("engine", ["baseline", "pdv"])
def test_the_controller_sees_every_rejection_the_requests_record(tiny_pair, engine):
    # the draft model at a fixed L: rejections every run (the cost controller, reading this machine's measured
    # costs, may choose not to speculate at all)
    config = EngineConfig(controller=ControllerConfig(kind="fixed"), drafter="model")
    eng = make_engine(engine, tiny_pair, config)
    seen = []
    observe = eng.controller.observe
    eng.controller.observe = lambda obs: (seen.append(obs), observe(obs))
    requests = [
        Request(f"r{i}", tiny_pair.encode_prompt(p), SamplingParams(max_new_tokens=24, stop_token_ids=()))
        for i, p in enumerate(["the cat sat", "hello world", "zzzz", "a b c d"])
    ]
    try:
        eng.generate(requests, timeout=120)
    finally:
        eng.stop()
    steps = [s for r in requests for s in r.steps]
    assert sum(o.rejected for o in seen) == sum(s.accepted < s.draft_len for s in steps) > 0
    assert sum(o.accepted for o in seen) == sum(s.accepted for s in steps)


@pytest.mark.parametrize("hybrid_threshold", [None, 100], ids=["pipelined", "hybrid"])
def test_pdv_never_holds_more_requests_than_the_batch_limit(tiny_pair, hybrid_threshold):
    config = EngineConfig(max_batch_size=3, micro_batches=2, hybrid_threshold=hybrid_threshold)
    eng = make_engine("pdv", tiny_pair, config)
    modes = count_modes(eng)
    submitted: list[Request] = []
    seen: list[int] = []

    def slowed(stage):
        def run(*args, **kwargs):
            time.sleep(0.05)  # the prefill lane admits every few ms meanwhile, if the limit lets it
            seen.append(sum(r.status == RequestStatus.RUNNING for r in list(submitted)))
            return stage(*args, **kwargs)

        return run

    eng._draft, eng._step = slowed(eng._draft), slowed(eng._step)
    eng.start()
    for i in range(10):
        submitted.append(eng.submit(Request(f"b{i}", tiny_pair.encode_prompt("limit " * (1 + i % 3)),
                                            SamplingParams(max_new_tokens=12))))  # fmt: skip
    assert all(r.done.wait(60) for r in submitted)
    eng.stop()
    assert all(r.status == RequestStatus.OK for r in submitted)
    assert seen and max(seen) <= 3
    if hybrid_threshold is None:
        assert modes.pipelined_blocks > 0
    else:
        assert modes.hybrid_steps > 0


@pytest.mark.parametrize("engine", ["baseline", "pd", "pdv"])
def test_a_request_whose_caches_cannot_be_made_fails_alone(tiny_pair, engine):
    eng = make_engine(engine, tiny_pair)
    original = eng._new_sequence

    def allocate(request, reserved):
        if request.request_id == "huge":
            raise RuntimeError("simulated out of memory")
        return original(request, reserved)

    eng._new_sequence = allocate
    eng.start()
    try:
        requests = [eng.submit(Request(rid, [1, 2, 3], SamplingParams(max_new_tokens=8))) for rid in ("a", "huge", "b")]
        assert all(r.done.wait(30) for r in requests)
        late = eng.submit(Request("c", [4, 5], SamplingParams(max_new_tokens=4)))
        assert late.done.wait(30)
    finally:
        eng.stop()
    a, huge, b = requests
    assert huge.status == "failed" and "simulated out of memory" in huge.error
    assert a.status == b.status == late.status == "ok"
    assert eng.budget.used == 0 and eng.fatal_error is None
    assert eng.stats().finished == 4


def test_a_listener_that_raises_harms_neither_its_request_nor_the_batch(tiny_pair):
    eng = make_engine("baseline", tiny_pair).start()

    def broken(event):
        raise ValueError("listener bug")

    try:
        noisy = Request("noisy", [1, 2, 3], SamplingParams(max_new_tokens=8), on_event=broken)
        quiet = Request("quiet", [1, 2, 3], SamplingParams(max_new_tokens=8))
        eng.submit(noisy), eng.submit(quiet)
        assert noisy.done.wait(30) and quiet.done.wait(30)
    finally:
        eng.stop()
    assert noisy.status == quiet.status == "ok"
    assert noisy.output_token_ids == quiet.output_token_ids and len(quiet.output_token_ids) == 8


def test_a_request_submitted_after_stop_is_rejected_and_counted(tiny_pair):
    eng = make_engine("pd", tiny_pair).start()
    eng.stop()
    late = eng.submit(Request("late", [1, 2, 3], SamplingParams(max_new_tokens=4)))
    assert late.status == "rejected" and late.error == "engine is stopped" and late.done.is_set()
    assert eng.stats().finished == 1


def test_a_request_ended_by_another_thread_takes_no_more_tokens_and_ends_once():
    from engine.request import TokenKind

    events = []
    req = Request("r", [1, 2, 3], SamplingParams(max_new_tokens=8), on_event=events.append)
    req.emit([5], [TokenKind.FIRST], None)
    req.fail(RequestStatus.FAILED, "the verify lane crashed")
    # a lane still stepping the request finishes its step after the crash failed it
    req.emit([6, 7], [TokenKind.ACCEPTED, TokenKind.BONUS], "length")
    req.fail(RequestStatus.CANCELLED, "stopped")
    req.mark_admitted()  # a prefill lane admitting it just after the crash does not bring it back
    assert (req.status, req.error, req.finish_reason) == ("failed", "the verify lane crashed", None)
    assert req.output_token_ids == [5] and len(req.token_kinds) == len(req.token_times) == 1
    assert [(e.token_ids, e.finished) for e in events] == [((5,), False), ((), True)]


def test_racing_ends_of_one_request_publish_exactly_one_final_event():
    from engine.request import TokenKind

    def end_twice_at_once(i: int) -> tuple[Request, list]:
        finals = []
        req = Request(f"r{i}", [1], on_event=lambda e: e.finished and finals.append(e))
        start = threading.Barrier(2)

        def finish():
            start.wait()
            req.emit([4], [TokenKind.DECODE], "stop")

        def crash():
            start.wait()
            req.fail(RequestStatus.FAILED, "crash")

        threads = [threading.Thread(target=finish), threading.Thread(target=crash)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        return req, finals

    for i in range(200):
        req, finals = end_twice_at_once(i)
        assert len(finals) == 1
        assert (req.status == "ok") == (req.output_token_ids == [4])


def _pdv_signals(tiny_pair, config: EngineConfig, n: int, before_verify, before_draft=lambda: None, seen=None):
    """Run ``n`` requests through PDV, calling ``before_verify`` before each verify stage (to hold it back) and
    ``before_draft`` before each draft.

    Returns ``seen`` (appended to as drafts are decided): for every draft, whether it was a hybrid step and the
    controller's inputs.
    """
    eng = make_engine("pdv", tiny_pair, config)
    modes = count_modes(eng)
    seen = [] if seen is None else seen
    decide = eng.controller.next_length
    hybrid_steps = [0]

    def recording(signals):
        hybrid = modes.hybrid_steps > hybrid_steps[0]  # a hybrid step counts itself before it drafts
        hybrid_steps[0] = modes.hybrid_steps
        seen.append((hybrid, signals))
        return decide(signals)

    def held(stage, before):
        def run(*args, **kwargs):
            before()
            return stage(*args, **kwargs)

        return run

    eng.controller.next_length, eng._verify = recording, held(eng._verify, before_verify)
    eng.drafter.propose = held(eng.drafter.propose, before_draft)
    # every request waits before the lanes start, so the first admission takes them all at once (started
    # first, a busy machine could admit them one by one and run hybrid throughout)
    reqs = [eng.submit(Request(f"q{i}", tiny_pair.encode_prompt(f"queue {i}"),
                               SamplingParams(max_new_tokens=10 + 6 * i))) for i in range(n)]  # fmt: skip
    eng.start()
    assert all(r.done.wait(60) for r in reqs)
    eng.stop()
    assert all(r.status == RequestStatus.OK for r in reqs)
    return seen


def test_pdv_tells_the_controller_how_many_blocks_are_ahead_in_the_verify_lane(tiny_pair):
    config = EngineConfig(
        drafter="model", controller=ControllerConfig(kind="fixed"), micro_batches=3, hybrid_threshold=None
    )
    # the first verify waits until the third group's draft length is decided: the other two groups' blocks are
    # then ahead of it in the verify lane (queued or being verified), and no more than micro_batches - 1 can be
    seen = []
    _pdv_signals(tiny_pair, config, 6, before_verify=lambda: wait_until(lambda: len(seen) >= 3, timeout=60), seen=seen)
    ahead = [s.verify_queue for _, s in seen]
    assert max(ahead) == 2

    blocks = VerifyQueue()  # the count itself: queued blocks and the one being verified
    blocks.put("being verified", []), blocks.put("queued", []), blocks.take()
    assert blocks.ahead() == 2


def test_pdv_decode_p95_never_mixes_hybrid_and_pipelined_steps(tiny_pair, monkeypatch):
    # four requests of different lengths: pipelined while three or more run, hybrid after
    config = EngineConfig(
        drafter="model", controller=ControllerConfig(kind="fixed"), micro_batches=2, hybrid_threshold=3,
        step_choice=StepChoice.COUNT,
    )
    # a clock per lane thread that only the stages move: a draft takes 1 ms and a verify 50 ms, whatever the
    # machine does meanwhile
    clock = LaneClock()
    monkeypatch.setattr(base, "time", clock)
    seen = _pdv_signals(tiny_pair, config, 4, lambda: clock.advance(0.05), lambda: clock.advance(0.001))
    hybrid = [s.decode_p95_ms for is_hybrid, s in seen if is_hybrid]
    pipelined = [s.decode_p95_ms for is_hybrid, s in seen if not is_hybrid]
    assert hybrid and pipelined
    assert all(p < 50 for p in pipelined)  # drafts alone: the verify is not in them
    assert all(p == 0 or p >= 50 for p in hybrid)  # empty after the switch, then draft + verify steps


class LaneClock:
    """Stands in for ``time`` in ``engine.schedulers.base``: ``perf_counter`` is a per-thread count of the seconds
    ``advance`` added on that thread, so what one lane measures never includes another lane's work."""

    def __init__(self) -> None:
        self._now = threading.local()

    def perf_counter(self) -> float:
        return getattr(self._now, "value", 0.0)

    def advance(self, seconds: float) -> None:
        self._now.value = self.perf_counter() + seconds

    @staticmethod
    def monotonic() -> float:  # stop()'s and generate()'s timeouts stay real
        return time.monotonic()


def test_pdv_warns_when_the_feedback_queue_target_cannot_be_reached(tiny_pair, caplog):
    from engine.config import ControllerConfig

    feedback = ControllerConfig(kind="feedback", target_verify_queue=2)
    for micro_batches, warned in ((2, True), (4, False)):
        caplog.clear()
        config = EngineConfig(controller=feedback, micro_batches=micro_batches)
        make_engine("pdv", tiny_pair, config).start().stop()
        assert any("can never be exceeded" in r.getMessage() for r in caplog.records) == warned
