"""Prometheus series of a served engine, under vLLM's names where vLLM has one.

Definitions (every vLLM series carries ``model_name``):

* ``vllm:num_requests_running`` / ``vllm:num_requests_waiting`` – admitted and
  not finished / submitted and not admitted (``EngineStats``, read at scrape).
* ``vllm:kv_cache_usage_perc`` – KV budget reserved by admitted requests, 0..1.
* ``vllm:prompt_tokens_total`` – prompt tokens of requests that got a first token.
* ``vllm:generation_tokens_total`` – tokens handed back to requests, as the server reads them.
* ``vllm:request_success_total{finished_reason}`` – requests answered with finish reason stop or length.
* ``vllm:time_to_first_token_seconds`` – first token time minus the request's arrival in the engine.
* ``vllm:inter_token_latency_seconds`` – gap between successive emissions of a request: tokens one
  speculative step emits together count as one emission (one gap), as in vLLM.
* ``vllm:e2e_request_latency_seconds`` – end (or stop-string cut) minus arrival, for answered requests.
* ``vllm:spec_decode_num_drafts_total`` – verify steps of a request that had drafted tokens;
  ``..._num_draft_tokens_total`` and ``..._num_accepted_tokens_total`` their drafted and accepted
  tokens; ``..._num_accepted_tokens_per_pos_total{position}`` accepted tokens at draft position
  0, 1, ... So acceptance rate = accepted / draft tokens and mean acceptance length =
  1 + accepted / drafts (the bonus or correction token included), vLLM's definitions.
* ``pdverify:lane_queue_depth{lane}`` – work queued per lane; ``pdverify:draft_length`` – the
  controller's current draft length (absent for ``ar``); ``pdverify:lane_busy_seconds_total{lane}``;
  ``pdverify:lane_busy_fraction{lane}`` – busy share of wall time over the last ``BUSY_WINDOW_S``
  seconds or more: since the newest scrape at least that old (the engine's start at first).
* ``pdverify:requests_submitted_total`` – requests handed to the engine (refused ones included);
  ``pdverify:requests_ended_total{status}`` – ended ok, failed, cancelled or rejected;
  ``pdverify:requests_unfinished`` – waiting or running. submitted == ended + unfinished always
  holds: ``EngineStats.accounting_problem``. A request refused before it reaches the engine (bad
  JSON, an unknown model, a full waiting queue, ...) is answered with an error and counted in none.

Each app has its own registry, so several servers can live in one process.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from dataclasses import asdict

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from engine.request import Request, TokenEvent
from engine.schedulers.base import Engine

BUSY_WINDOW_S = 5.0  # short enough to follow a load change, long enough to span many steps
# vLLM's buckets, so dashboards built for it read these histograms unchanged
# fmt: off
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, 160.0, 640.0, 2560.0)
ITL_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0,
               80.0)
E2E_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0, 240.0, 480.0,
               960.0, 1920.0, 7680.0)
# fmt: on


class ServerMetrics:
    """The per-request series (fed by ``RequestMeter``s) and the engine's state (read at scrape)."""

    def __init__(self, engine: Engine, model_name: str) -> None:
        self.registry = CollectorRegistry()
        reg, label = self.registry, [model_name]

        def counter(name: str, doc: str) -> Counter:
            return Counter(name, doc, ["model_name"], registry=reg).labels(*label)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, doc, ["model_name"], registry=reg, buckets=buckets).labels(*label)

        self.prompt_tokens = counter("vllm:prompt_tokens", "Prompt tokens of requests that got a first token.")
        self.generation_tokens = counter("vllm:generation_tokens", "Tokens generated and handed back.")
        self.drafts = counter("vllm:spec_decode_num_drafts", "Verify steps with drafted tokens.")
        self.draft_tokens = counter("vllm:spec_decode_num_draft_tokens", "Drafted tokens.")
        self.accepted_tokens = counter("vllm:spec_decode_num_accepted_tokens", "Accepted drafted tokens.")
        self._per_pos = Counter(
            "vllm:spec_decode_num_accepted_tokens_per_pos",
            "Accepted drafted tokens by draft position.",
            ["model_name", "position"],
            registry=reg,
        )
        self._success = Counter(
            "vllm:request_success",
            "Requests answered, by finish reason.",
            ["model_name", "finished_reason"],
            registry=reg,
        )
        self.ttft = histogram("vllm:time_to_first_token_seconds", "Time to first token.", TTFT_BUCKETS)
        self.itl = histogram("vllm:inter_token_latency_seconds", "Time between emissions.", ITL_BUCKETS)
        self.e2e = histogram("vllm:e2e_request_latency_seconds", "Request latency, arrival to end.", E2E_BUCKETS)
        self.model_name = model_name
        if engine.speculative:  # every position the controller may draft shows, zeros included (as vLLM)
            for position in range(engine.config.controller.max_len):
                self.accepted_at(position)
        for reason in ("stop", "length"):
            self.succeeded(reason)
        reg.register(EngineCollector(engine, model_name))

    def accepted_at(self, position: int) -> Counter:
        return self._per_pos.labels(self.model_name, str(position))

    def succeeded(self, finish_reason: str) -> Counter:
        return self._success.labels(self.model_name, finish_reason)

    def meter(self, request: Request) -> RequestMeter:
        return RequestMeter(self, request)


class RequestMeter:
    """Feeds one request's tokens, steps and latencies into the series as the server reads them."""

    def __init__(self, metrics: ServerMetrics, request: Request) -> None:
        self.metrics = metrics
        self.request = request
        self._steps = 0  # request.steps already counted
        self._last: float | None = None  # time of the previous emission

    def on_event(self, event: TokenEvent) -> None:
        m, request = self.metrics, self.request
        if event.token_ids:
            if self._last is None:
                m.prompt_tokens.inc(len(request.prompt_token_ids))
                m.ttft.observe(event.time - request.arrival_time)
            else:
                m.itl.observe(event.time - self._last)
            self._last = event.time
            m.generation_tokens.inc(len(event.token_ids))
        self._count_steps()

    def on_end(self, finish_reason: str | None) -> None:
        """The request is over (answered when ``finish_reason`` is set; else failed or abandoned)."""
        self._count_steps()
        if finish_reason is not None and self.request.finish_time is not None:
            self.metrics.e2e.observe(self.request.finish_time - self.request.arrival_time)
            self.metrics.succeeded(finish_reason).inc()

    def _count_steps(self) -> None:
        m = self.metrics
        steps = self.request.steps[self._steps :]  # appended by a lane before it emits the step's tokens
        self._steps += len(steps)
        for step in steps:
            if step.draft_len == 0:
                continue
            m.drafts.inc()
            m.draft_tokens.inc(step.draft_len)
            m.accepted_tokens.inc(step.accepted)
            for position in range(step.accepted):
                m.accepted_at(position).inc()


class EngineCollector(Collector):
    """Gauges read from ``Engine.stats()`` and the KV budget when Prometheus scrapes."""

    def __init__(self, engine: Engine, model_name: str) -> None:
        self.engine = engine
        self.model_name = model_name
        self._busy: deque[tuple[float, dict[str, float]]] = deque([(time.perf_counter(), {})])
        self._lock = threading.Lock()  # scrapes run on a thread pool, maybe two at once

    def collect(self):
        stats = self.engine.stats()
        model = [self.model_name]
        for name, doc, value in (
            ("vllm:num_requests_running", "Requests admitted and not finished.", stats.running),
            ("vllm:num_requests_waiting", "Requests submitted and not admitted.", stats.waiting),
            ("vllm:kv_cache_usage_perc", "KV budget reserved, 0..1.", self._kv_usage()),
        ):
            gauge = GaugeMetricFamily(name, doc, labels=["model_name"])
            gauge.add_metric(model, value)
            yield gauge
        depth = GaugeMetricFamily("pdverify:lane_queue_depth", "Work queued per lane.", labels=["lane"])
        busy = CounterMetricFamily("pdverify:lane_busy_seconds", "Seconds each lane was busy.", labels=["lane"])
        share = GaugeMetricFamily(
            "pdverify:lane_busy_fraction", f"Busy share of the last {BUSY_WINDOW_S:g}s or more.", labels=["lane"]
        )
        fractions = self._busy_fractions(stats.time, {lane.name: lane.busy_s for lane in stats.lanes})
        for lane in stats.lanes:
            depth.add_metric([lane.name], lane.queue_depth)
            busy.add_metric([lane.name], lane.busy_s)
            share.add_metric([lane.name], fractions[lane.name])
        yield from (depth, busy, share)
        yield CounterMetricFamily("pdverify:requests_submitted", "Requests submitted.", value=stats.submitted)
        ended = CounterMetricFamily("pdverify:requests_ended", "Requests ended, by status.", labels=["status"])
        for status, count in asdict(stats.outcomes).items():
            ended.add_metric([status], count)
        yield ended
        yield GaugeMetricFamily("pdverify:requests_unfinished", "Requests waiting or running.", value=stats.unfinished)
        if stats.draft_len is not None:
            yield GaugeMetricFamily("pdverify:draft_length", "Current draft length.", value=stats.draft_len)
        if stats.suffix_tree is not None:  # the one global tree the server's engine keeps across requests
            tree = GaugeMetricFamily("pdverify:suffix_tree_size", "What the global suffix tree holds.", labels=["unit"])
            for unit, value in stats.suffix_tree._asdict().items():
                tree.add_metric([unit], value)
            yield tree

    def _kv_usage(self) -> float:
        budget = self.engine.budget
        return budget.used / budget.capacity

    def _busy_fractions(self, now: float, busy: dict[str, float]) -> dict[str, float]:
        """Busy share per lane since the newest kept snapshot at least ``BUSY_WINDOW_S`` old."""
        with self._lock:
            return self._window(now, busy)

    def _window(self, now: float, busy: dict[str, float]) -> dict[str, float]:
        while len(self._busy) > 1 and self._busy[1][0] <= now - BUSY_WINDOW_S:
            self._busy.popleft()
        then, before = self._busy[0]
        self._busy.append((now, busy))
        span = now - then
        return {lane: min(1.0, (s - before.get(lane, 0.0)) / span) if span > 0 else 0.0 for lane, s in busy.items()}
