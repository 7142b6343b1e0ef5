"""Engine.cancel ends one request from any thread and its lane frees the caches and budget it held."""

import threading
import time

import pytest

from engine.config import EngineConfig, SamplingParams
from engine.request import Request, RequestStatus
from engine.schedulers.registry import make_engine
from tests.support.serve import wait_until as _wait


def _long(rid: str, on_event=None, prompt=(5, 6, 7)) -> Request:
    return Request(rid, list(prompt), SamplingParams(max_new_tokens=1500, stop_token_ids=()), on_event=on_event)


@pytest.mark.parametrize("engine", ["ar", "baseline", "pd", "pdv"])
def test_cancelling_a_running_request_frees_its_budget_and_spares_the_others(tiny_pair, engine):
    eng = make_engine(engine, tiny_pair, EngineConfig(hybrid_threshold=None)).start()
    started = threading.Event()
    try:
        victim = eng.submit(_long("victim", on_event=lambda e: e.token_ids and started.set()))
        others = [eng.submit(Request(f"o{i}", [1, 2, 3, i], SamplingParams(max_new_tokens=30))) for i in range(3)]
        assert started.wait(30)
        eng.cancel(victim)
        assert victim.status == RequestStatus.CANCELLED and victim.done.is_set()
        assert all(r.done.wait(60) for r in others)
        assert _wait(lambda: eng.budget.used == 0), f"budget still holds {eng.budget.used} tokens"
    finally:
        eng.stop()
    assert victim.error == "cancelled by the client"
    assert 0 < victim.num_output_tokens < 1500
    assert all(r.status == RequestStatus.OK and r.num_output_tokens == 30 for r in others)
    assert eng.fatal_error is None and eng.stats().finished == 4


@pytest.mark.parametrize("engine", ["baseline", "pd"])
def test_a_request_cancelled_mid_prefill_gets_no_more_chunks_and_frees_its_budget(tiny_pair, engine, monkeypatch):
    eng = make_engine(engine, tiny_pair, EngineConfig(prefill_chunk_tokens=8))
    victim = _long("victim", prompt=[7] * 64)
    chunks = []
    original = eng._prefill

    def prefill_then_cancel(seqs):
        chunks.append([s.request.request_id for s in seqs if not s.finished])
        done = original(seqs)
        if len(chunks) == 2:
            eng.cancel(victim)  # from the lane itself: between two chunks of its prompt
        return done

    monkeypatch.setattr(eng, "_prefill", prefill_then_cancel)
    eng.start()
    try:
        eng.submit(victim)
        assert victim.done.wait(30)
        assert _wait(lambda: eng.budget.used == 0)
        later = eng.submit(Request("later", [1, 2], SamplingParams(max_new_tokens=4)))
        assert later.done.wait(30) and later.status == RequestStatus.OK
    finally:
        eng.stop()
    assert victim.status == RequestStatus.CANCELLED and victim.output_token_ids == []
    assert [c for c in chunks if "victim" in c] == [["victim"], ["victim"]]  # 2 of its 8 chunks ran


def test_cancelling_a_waiting_request_means_it_is_never_admitted(tiny_pair):
    eng = make_engine("baseline", tiny_pair, EngineConfig(max_batch_size=1)).start()
    try:
        first = eng.submit(_long("first"))
        queued = eng.submit(Request("queued", [1, 2, 3], SamplingParams(max_new_tokens=8)))
        eng.cancel(queued)
        eng.cancel(first)
        assert _wait(lambda: eng.budget.used == 0)
        after = eng.submit(Request("after", [1, 2, 3], SamplingParams(max_new_tokens=8)))
        assert after.done.wait(30)
    finally:
        eng.stop()
    assert queued.status == RequestStatus.CANCELLED and queued.admitted_time is None
    assert after.status == RequestStatus.OK and eng.stats().finished == 3


def test_cancelling_a_finished_request_changes_nothing(tiny_pair):
    eng = make_engine("pdv", tiny_pair).start()
    try:
        (done,) = eng.generate([Request("done", [1, 2, 3], SamplingParams(max_new_tokens=6))], timeout=30)
        eng.cancel(done)
        eng.cancel(done)
    finally:
        eng.stop()
    assert done.status == RequestStatus.OK and done.error is None and done.num_output_tokens == 6
    assert eng.stats().finished == 1 and eng.budget.used == 0


def test_cancels_racing_the_lanes_from_many_threads_leak_no_budget(tiny_pair):
    eng = make_engine("pdv", tiny_pair, EngineConfig(hybrid_threshold=None, max_batch_size=8)).start()
    requests = [_long(f"r{i}") for i in range(12)]
    try:
        for request in requests:
            eng.submit(request)

        def cancel_later(request: Request, delay: float) -> None:
            time.sleep(delay)
            eng.cancel(request)

        threads = [threading.Thread(target=cancel_later, args=(r, 0.01 * i)) for i, r in enumerate(requests)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert all(r.done.wait(30) for r in requests)
        assert _wait(lambda: eng.budget.used == 0), f"budget still holds {eng.budget.used} tokens"
    finally:
        eng.stop()
    assert all(r.status == RequestStatus.CANCELLED for r in requests)
    assert eng.fatal_error is None and eng.stats().finished == 12
