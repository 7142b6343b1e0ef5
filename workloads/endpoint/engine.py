"""An OpenAI-compatible server in the place of an engine: what lets one replay drive either.

``EndpointEngine`` implements ``workloads.drivers.engines.ReplayEngine``, the
protocol a replay drives in-process engines through. ``submit`` hands the request to
an asyncio loop in its own thread, which streams it from the server with
httpx (``workloads.endpoint.stream``) and fills the same ``Request`` an engine
fills; so every metric, run file and live view of an engine run works for an
endpoint run unchanged. What only an engine knows (queue wait, drafted and
accepted tokens per request, lanes) stays empty.

``stats`` scrapes the server's ``/metrics`` when the time series sampler asks
(``metrics.server_metrics``) and returns an ``EngineStats`` like an engine's:
running and waiting requests, KV cache usage and the speculative-decoding counters. A server whose ``/metrics`` does not
answer leaves them empty; its tokens per second are still counted here, from
the tokens received.

``start`` settles how prompts are sent (token ids, their text, or a chat
message: ``workloads.endpoint.probe``), before the warm-up; ``describe`` says
which, and why.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from collections import Counter
from typing import Any

import httpx

from engine.request import Request
from engine.schedulers.stats import Counters, EngineStats
from metrics.server_metrics import ServerMetrics, parse_server_metrics
from workloads.endpoint.probe import PromptChoice, choose_prompt
from workloads.endpoint.spec import EndpointSpec
from workloads.endpoint.stream import Streamed, stream_request

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 300.0  # between two chunks: a server under load may queue a request this long
SCRAPE_TIMEOUT_S = 1.0  # a scrape slower than this is skipped: the sampler must keep its rate
NO_METRICS = ServerMetrics(None, None, None, None, None, None, None)


class EndpointEngine:
    """Requests go to ``spec``'s server; ``name`` is its label, the engine column of its runs."""

    def __init__(self, spec: EndpointSpec, pair: Any) -> None:
        self.spec = spec
        self.name = spec.label
        self.fatal_error: str | None = None  # an engine's crash; a server's errors fail single requests
        self._tokenizer = pair.tokenizer
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._client: httpx.AsyncClient | None = None
        self._scraper: httpx.Client | None = None
        self._streamed: dict[str, Streamed] = {}
        self._sent: list[Request] = []
        self._tokens = 0
        self._scraped = False  # /metrics answered at least once
        self._scrape_error: str | None = None
        self.prompt: PromptChoice | None = None  # how prompts are sent: settled by ``start``

    def start(self) -> EndpointEngine:
        if self._thread is not None:
            return self
        loop = asyncio.new_event_loop()
        ready = threading.Event()

        def run() -> None:
            asyncio.set_event_loop(loop)
            timeout = httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)
            # no pool limit: the arrival policy, not the client, decides how many are in flight
            self._client = httpx.AsyncClient(timeout=timeout, limits=httpx.Limits(max_connections=None))
            ready.set()
            loop.run_forever()

        self._loop = loop
        self._thread = threading.Thread(target=run, name=f"endpoint-{self.name}", daemon=True)
        self._thread.start()
        ready.wait()
        self._scraper = httpx.Client(timeout=SCRAPE_TIMEOUT_S, headers=self.spec.headers)
        with httpx.Client(timeout=httpx.Timeout(READ_TIMEOUT_S, connect=CONNECT_TIMEOUT_S)) as client:
            self.prompt = choose_prompt(client, self.spec, self._tokenizer)
        if self.prompt.how == "probed":
            log.info("%s: prompts sent as %s", self.name, self.prompt.line())
        return self

    def submit(self, request: Request) -> Request:
        """Send ``request``; it is filled from the stream on the loop thread. Mutates ``request``."""
        if self._loop is None or self._client is None or self.prompt is None:
            raise RuntimeError("start the endpoint engine before submitting")
        streamed = self._streamed[request.request_id] = Streamed()
        self._sent.append(request)
        request.mark_arrived()
        coroutine = stream_request(
            self._client, self.spec, self.prompt.sent, request, self._tokenizer, streamed, self._count
        )
        asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return request

    def _count(self, tokens: int) -> None:
        self._tokens += tokens  # only the loop thread adds; readers see a whole int

    def stats(self) -> EngineStats:
        """Tokens as this client received them; the rest as the server's ``/metrics`` says (``None``: silent)."""
        scraped = self._scrape()
        # the server's draft tokens, cumulative (0 without spec-decode counters)
        counters = Counters(self._tokens, scraped.draft_tokens or 0, scraped.accepted_tokens or 0)
        return EngineStats(
            engine=self.name,
            time=time.perf_counter(),
            waiting=scraped.waiting,
            running=scraped.running,
            lanes=(),
            draft_len=scraped.draft_len,
            counters=counters,
            unfinished=sum(not r.done.is_set() for r in self._sent),
            kv_cache_usage=scraped.kv_cache_usage,
            drafts=scraped.drafts,
            suffix_tree=scraped.suffix_tree,
        )

    def _scrape(self) -> ServerMetrics:
        if self._scraper is None:
            return NO_METRICS
        try:
            response = self._scraper.get(self.spec.metrics_url)
            response.raise_for_status()
            scraped = parse_server_metrics(response.text)
        except (httpx.HTTPError, ValueError) as exc:
            if self._scrape_error is None:
                log.warning("%s: /metrics did not answer (%s); its series stay empty", self.name, exc)
            self._scrape_error = f"{type(exc).__name__}: {exc}"
            return NO_METRICS
        self._scraped = True
        return scraped

    def output_text(self, request: Request) -> str | None:
        """The text the server streamed for ``request`` (``None`` for one this engine never sent)."""
        streamed = self._streamed.get(request.request_id)
        return None if streamed is None else "".join(streamed.text)

    def accounting_problems(self) -> list[str]:
        """None to check here: a server keeps its request counts behind its ``/metrics``."""
        return []

    def describe(self) -> dict[str, Any]:
        """For run.json: the endpoint, how prompts were sent, how output tokens were counted, whether
        ``/metrics`` answered."""
        counts = Counter(str(s.count) for s in self._streamed.values())
        return {
            **self.spec.describe(),
            "prompt_sent": None if self.prompt is None else self.prompt.describe(),
            "output_tokens_from": dict(counts),
            # tokenizing streamed text counted this many more tokens than the server's total said
            "tokenized_over_final_usage": sum(s.over_usage for s in self._streamed.values()),
            "metrics_scraped": self._scraped,
            "metrics_error": None if self._scraped else self._scrape_error,
        }

    def stop(self, timeout: float = 5.0) -> None:
        """Cancel the streams still open (their requests end cancelled), close the clients, end the loop."""
        if self._loop is None or self._thread is None:
            return
        try:
            asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(timeout)
        finally:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout)
            if self._scraper is not None:
                self._scraper.close()
            # a snapshot after stop reports what this client counted, and nothing scraped
            self._scraper = None
            self._loop, self._thread = None, None

    async def _close(self) -> None:
        streams = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
        for task in streams:
            task.cancel()
        await asyncio.gather(*streams, return_exceptions=True)
        if self._client is not None:
            await self._client.aclose()
