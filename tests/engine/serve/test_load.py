"""Load: an exhausted KV budget makes requests wait, and a waiting-queue limit refuses the excess with a reason."""

import asyncio

import httpx

from engine.config import EngineConfig, SamplingParams
from engine.faults import Fault, FaultInjector
from engine.request import Request, RequestStatus
from engine.schedulers.registry import make_engine
from tests.support.budget import record_budget_use
from tests.support.serve import served, uvicorn_thread, wait_until

PROMPT = [5, 9, 13, 2]
MAX_NEW = 20
NEED = len(PROMPT) + MAX_NEW + 1  # KV tokens each request reserves


def test_requests_beyond_the_kv_budget_wait_and_all_finish_within_it(tiny_pair):
    budget = 3 * NEED  # room for three requests at once
    eng = make_engine("pd", tiny_pair, EngineConfig(max_cache_tokens=budget, max_batch_size=16))
    params = SamplingParams(temperature=0.0, max_new_tokens=MAX_NEW, stop_token_ids=())
    held = record_budget_use(eng)  # the budget's use after each reservation, where it peaks
    # all queued before the lanes start, so that the first admission finds three to take (submitted while the
    # lanes run, a busy machine could finish each request before the next one arrives)
    requests = [eng.submit(Request(f"r{i}", PROMPT, params)) for i in range(12)]
    try:
        eng.start()
        assert all(r.done.wait(120) for r in requests)
    finally:
        eng.stop()
    assert [r.status for r in requests] == [RequestStatus.OK] * 12
    assert max(held) == budget  # the budget was full (three requests at once), never exceeded
    assert max(r.admitted_time for r in requests) > min(r.finish_time for r in requests)  # some waited for others


def test_with_max_waiting_the_excess_gets_a_429_with_the_reason_and_the_rest_are_served(tiny_pair):
    injector = FaultInjector(tiny_pair)
    server = served(injector.pair, "baseline", max_cache_tokens=NEED, max_batch_size=1)  # one request at a time
    server.app.state.server.max_waiting = 2
    body = {"prompt": [5, 9, 13, 2], "max_tokens": MAX_NEW, "temperature": 0, "ignore_eos": True}

    async def send_all() -> list[httpx.Response]:
        async with httpx.AsyncClient(base_url=url, timeout=60) as http:
            return await asyncio.gather(*(http.post("/v1/completions", json=body) for _ in range(8)))

    with uvicorn_thread(server.app) as url:
        with injector.inject(Fault("verify", "stall", times=None, seconds=0.05)):
            answers = asyncio.run(send_all())
        assert wait_until(lambda: server.engine.stats().unfinished == 0)
    codes = sorted(a.status_code for a in answers)
    refused = [a.json()["error"] for a in answers if a.status_code == 429]
    assert codes.count(200) >= 2 and refused and codes.count(200) + len(refused) == 8
    assert all("already waiting" in e["message"] and e["type"] == "rate_limit_error" for e in refused)
    assert all(r.status == RequestStatus.OK for r in server.submitted) and len(server.submitted) == codes.count(200)
