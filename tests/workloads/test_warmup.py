"""A replay warms its engine at the run's own concurrency, so PDV's pipelined path is warm before the clock starts."""

import threading

from engine.config import SamplingParams
from engine.request import Request, RequestStatus
from tests.support.serve import wait_until
from workloads.drivers.replay import OPEN_LOOP_WARMUP, _warm_up, warmup_concurrency
from workloads.drivers.trace import TraceItem


def test_warm_up_runs_at_the_runs_concurrency_and_at_least_the_settings_count():
    assert warmup_concurrency(0, 16) == 0  # --warmup 0: none at all
    assert warmup_concurrency(1, 16) == 16
    assert warmup_concurrency(1, None) == OPEN_LOOP_WARMUP  # an open loop without a cap
    assert warmup_concurrency(10, 2) == 10


class HoldingEngine:
    """Keeps every request it is given until the test ends them."""

    def __init__(self) -> None:
        self.held: list[Request] = []

    def submit(self, request: Request) -> Request:
        self.held.append(request)
        return request


def test_warm_up_requests_are_in_flight_together_and_each_is_waited_for():
    items = [TraceItem(f"t{i}", f"prompt {i}", (1, 2, 3 + i), 32) for i in range(3)]
    engine, halt = HoldingEngine(), threading.Event()
    warm = threading.Thread(target=_warm_up, args=(engine, items, 5, SamplingParams(), halt))
    warm.start()
    assert wait_until(lambda: len(engine.held) == 5, timeout=10)  # all five at once, the trace's prompts repeated
    assert [r.prompt_token_ids for r in engine.held] == [[1, 2, 3], [1, 2, 4], [1, 2, 5], [1, 2, 3], [1, 2, 4]]
    assert all(r.params.max_new_tokens == 8 and not r.teaches_drafter for r in engine.held)
    for request in engine.held[:4]:
        request.fail(RequestStatus.CANCELLED, "ended by the test")
    assert warm.is_alive()  # the fifth is still running: the warm-up waits for every one
    engine.held[4].fail(RequestStatus.CANCELLED, "ended by the test")
    warm.join(10)
    assert not warm.is_alive()
