"""Accounting under faults: submitted == ok + failed + cancelled + rejected, in the server's counters and in a run."""

import asyncio
from collections import Counter
from types import SimpleNamespace

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from engine.config import ControllerConfig
from engine.faults import Fault, FaultInjector
from engine.request import Request, RequestStatus
from tests.support.serve import served, uvicorn_thread, wait_until


def _counters(metrics_text: str) -> tuple[int, dict[str, int], int]:
    submitted, ended, unfinished = 0, {}, 0
    for family in text_string_to_metric_families(metrics_text):
        for sample in family.samples:
            if sample.name == "pdverify:requests_submitted_total":
                submitted = int(sample.value)
            elif sample.name == "pdverify:requests_ended_total":
                ended[sample.labels["status"]] = int(sample.value)
            elif sample.name == "pdverify:requests_unfinished":
                unfinished = int(sample.value)
    return submitted, ended, unfinished


async def _send(url: str, bodies: list[dict]) -> list[int]:
    async with httpx.AsyncClient(base_url=url, timeout=60) as http:
        answers = await asyncio.gather(*(http.post("/v1/completions", json=b) for b in bodies))
    return [a.status_code for a in answers]


def test_the_servers_counters_balance_under_failing_forwards_and_refusals(tiny_pair):
    injector = FaultInjector(tiny_pair)
    server = served(injector.pair, "pd", controller=ControllerConfig(kind="fixed"), drafter="model")
    good = [{"prompt": f"{i} apples", "max_tokens": 16, "temperature": 0, "ignore_eos": True} for i in range(24)]
    refused = [{"prompt": "x" * 3000}, {"prompt": "x", "max_tokens": 4000}]  # the engine's admission refuses these
    with uvicorn_thread(server.app) as url:
        # each fault's first hit fails a batch whose rows then run alone, and its second fails one of them: two
        # to four requests fail whatever the batches were (a first hit on a lone row fails that row alone)
        with injector.inject(Fault("verify", "raise", skip=3, times=2), Fault("prefill", "nan", times=2)) as hits:
            statuses = asyncio.run(_send(url, good + refused))
        statuses += asyncio.run(_send(url, good[:8]))  # after the faults: all served
        assert wait_until(lambda: server.engine.stats().unfinished == 0)
        submitted, ended, unfinished = _counters(httpx.get(f"{url}/metrics").text)
    assert hits.count == 4
    outcomes = Counter(str(r.status) for r in server.submitted)
    assert submitted == len(server.submitted) == len(good) + len(refused) + 8
    assert ended == {s: outcomes.get(s, 0) for s in ("ok", "failed", "cancelled", "rejected")}
    assert submitted == sum(ended.values()) and unfinished == 0
    assert 2 <= ended["failed"] <= 4 and ended["ok"] >= 8 + len(good) - 4 and ended["rejected"] == 2
    assert Counter(statuses) == {200: ended["ok"], 500: ended["failed"], 400: 2}


def test_a_run_whose_requests_do_not_add_up_raises():
    from workloads.drivers.replay import AccountingError, check_accounting
    from workloads.drivers.run_result import RunResult

    ended = Request("a", [1])
    ended.fail(RequestStatus.CANCELLED, "stopped")
    result = SimpleNamespace(run_id="r1", requests=(ended, Request("b", [1])))  # "b" never ended
    result.counts = lambda: RunResult.counts(result)
    engine_balanced = SimpleNamespace(accounting_problems=lambda: [])
    with pytest.raises(AccountingError, match="2 submitted"):
        check_accounting(result, eng=engine_balanced)
    balanced = SimpleNamespace(run_id="r2", requests=(ended,))
    balanced.counts = lambda: RunResult.counts(balanced)
    check_accounting(balanced, engine_balanced)  # every request ended: no error
    engine_off = SimpleNamespace(accounting_problems=lambda: ["ar engine accounting does not balance"])
    with pytest.raises(AccountingError, match="ar engine accounting does not balance"):
        check_accounting(balanced, engine_off)  # the engine's own counters are checked too
