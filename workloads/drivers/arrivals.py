"""When requests are sent: closed-loop concurrency or open-loop (bursty) Poisson arrivals.

Same knobs and meaning as ``vllm bench serve``:

* ``ClosedLoop(C)`` – C requests in flight; a new one is sent as soon as one
  finishes (``--max-concurrency C`` with an infinite request rate).
* ``OpenLoop(R, B, M)`` – requests arrive at mean rate R per second whatever
  the engine does (``--request-rate R --burstiness B``). Gaps between arrivals
  are Gamma(shape=B, scale=1/(R*B)): mean 1/R, coefficient of variation
  1/sqrt(B). B = 1 is a Poisson process, B < 1 is burstier, B > 1 steadier,
  B = inf evenly spaced. As in vLLM, every request, the first included, waits
  its gap, and the arrival times are then scaled so that the last one falls
  at exactly n / R: the offered rate is R for every seed, and only the
  spacing is random. R = inf sends everything at once. With
  ``max_concurrency`` M, a request whose arrival time has come waits until
  fewer than M are in flight (``--max-concurrency``); the schedule of later
  arrivals is not shifted by that wait.

``dispatch`` runs the policy against a ``submit`` function. It waits through a
``Clock``: ``RealClock`` in a replay, a fake one in tests, which therefore need
no real sleeping.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np


@dataclass(frozen=True)
class ClosedLoop:
    concurrency: int

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError(f"concurrency must be >= 1, got {self.concurrency}")

    @property
    def cap(self) -> int | None:
        return self.concurrency

    @property
    def request_rate(self) -> float | None:
        return None

    def describe(self) -> str:
        return f"closed loop, {self.concurrency} in flight"


@dataclass(frozen=True)
class OpenLoop:
    request_rate: float  # mean requests per second; inf = all at once
    burstiness: float = 1.0  # Gamma shape; 1 = Poisson
    max_concurrency: int | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if not self.request_rate > 0:
            raise ValueError(f"request rate must be > 0, got {self.request_rate}")
        if not self.burstiness > 0:
            raise ValueError(f"burstiness must be > 0 (inf = evenly spaced), got {self.burstiness}")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"max concurrency must be >= 1, got {self.max_concurrency}")

    @property
    def cap(self) -> int | None:
        return self.max_concurrency

    def describe(self) -> str:
        cap = "" if self.max_concurrency is None else f", at most {self.max_concurrency} in flight"
        return f"open loop, {self.request_rate:g} req/s, burstiness {self.burstiness:g}{cap}"

    def offsets(self, n: int) -> tuple[float, ...]:
        """Arrival times (seconds after the start) of ``n`` requests; seeded."""
        if n <= 0:
            return ()
        if math.isinf(self.request_rate):
            return (0.0,) * n
        if math.isinf(self.burstiness):
            gaps = np.full(n, 1.0 / self.request_rate)
        else:
            rng = np.random.default_rng(self.seed)
            gaps = rng.gamma(shape=self.burstiness, scale=1.0 / (self.request_rate * self.burstiness), size=n)
        times = np.cumsum(gaps)
        times *= (n / self.request_rate) / times[-1]
        return tuple(float(t) for t in times)


ArrivalPolicy = ClosedLoop | OpenLoop


class Clock(Protocol):
    def now(self) -> float: ...

    def wait(self, timeout: float) -> None:
        """Block for up to ``timeout`` seconds, or less when woken (a request finished)."""


class RealClock:
    """``perf_counter`` time; waits end early on ``wake()`` or on the cancel event."""

    MAX_WAIT_S = 0.1  # re-check the cancel event at least this often

    def __init__(self, cancel: threading.Event) -> None:
        self._cancel = cancel
        self._woken = threading.Event()

    def now(self) -> float:
        return time.perf_counter()

    def wake(self) -> None:
        self._woken.set()

    def wait(self, timeout: float) -> None:
        if self._cancel.is_set():
            return
        self._woken.wait(min(max(0.0, timeout), self.MAX_WAIT_S))
        self._woken.clear()


class Handle(Protocol):
    @property
    def done(self) -> threading.Event: ...


T = TypeVar("T")
H = TypeVar("H", bound=Handle)


def dispatch(
    items: Sequence[T],
    policy: ArrivalPolicy,
    submit: Callable[[T], H],
    clock: Clock,
    cancel: threading.Event,
    on_tick: Callable[[], None] | None = None,
) -> list[H]:
    """Submit ``items`` in order following ``policy``; returns what ``submit`` returned.

    Stops early (returning the handles submitted so far) once ``cancel`` is set.
    ``on_tick`` runs after every wait, for progress reporting.
    """
    offsets = policy.offsets(len(items)) if isinstance(policy, OpenLoop) else None
    cap = policy.cap
    in_flight: list[H] = []
    submitted: list[H] = []
    start = clock.now()
    for i, item in enumerate(items):
        if offsets is not None:
            while not cancel.is_set() and (left := start + offsets[i] - clock.now()) > 0:
                clock.wait(left)
                if on_tick:
                    on_tick()
        while cap is not None and not cancel.is_set():
            in_flight = [h for h in in_flight if not h.done.is_set()]
            if len(in_flight) < cap:
                break
            clock.wait(RealClock.MAX_WAIT_S)
            if on_tick:
                on_tick()
        if cancel.is_set():
            break
        handle = submit(item)
        submitted.append(handle)
        in_flight.append(handle)
    return submitted
