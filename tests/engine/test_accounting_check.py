"""``EngineStats.accounting_problem()`` fires when a request goes uncounted: the check every run's end relies on can
fail, it is not only ever ``None``."""

from __future__ import annotations

from engine.config import EngineConfig, SamplingParams
from engine.request import Request, RequestStatus
from engine.schedulers.registry import make_engine
from engine.schedulers.stats import Counters
from tests.support.serve import wait_until


def test_a_request_whose_end_goes_uncounted_makes_the_accounting_check_fire(tiny_pair, monkeypatch):
    eng = make_engine("baseline", tiny_pair, EngineConfig(max_batch_size=4))
    end = Counters.end

    def losing_cancels(self, status, submitted=False):  # a bug that loses cancelled requests from the totals
        if status != RequestStatus.CANCELLED:
            end(self, status, submitted)

    params = SamplingParams(max_new_tokens=4, stop_token_ids=())
    kept = [Request(f"k{i}", [3 + i, 7, 11], params) for i in range(3)]
    try:
        eng.generate(kept, timeout=60)
        assert wait_until(lambda: eng.stats().unfinished == 0)  # their lane has counted their ends
        assert eng.stats().accounting_problem() is None  # balanced before the bug
        monkeypatch.setattr(Counters, "end", losing_cancels)
        lost = eng.submit(Request("lost", [5, 6, 7], SamplingParams(max_new_tokens=2000, stop_token_ids=())))
        eng.cancel(lost)
        problem = eng.stats().accounting_problem()
    finally:
        eng.stop()
    assert lost.status == RequestStatus.CANCELLED
    assert problem is not None and "does not balance: 4 submitted" in problem, problem
    assert "3 ok + 0 failed + 0 cancelled + 0 rejected + 0 unfinished" in problem, problem
