"""Time series of a running engine: a sampler thread turning snapshots into rows.

Every ``1/hz`` seconds (default 4 Hz; at least 2 Hz) the sampler reads
``engine.stats()`` and the device probe. Each row describes the window since
the previous snapshot (``t_s`` is the window's end, seconds since the run's start):

* **tokens_per_s** – output tokens emitted in the window / window length
  (delta of the cumulative ``tokens_emitted``).
* **running**, **waiting** – requests in the engine at the window's end.
* **queue_prefill / queue_decode / queue_verify** – work items queued at each
  lane at the window's end; ``None`` for a lane the engine does not have (AR
  and Baseline run a single ``loop`` lane, PD has no verify lane).
* **draft_len** – the controller's current draft length (``None`` for AR).
* **acceptance_rate** – accepted / drafted tokens within the window; ``None``
  when nothing was drafted in it.
* **mean_acceptance_length** – 1 + accepted / drafts within the window (vLLM's
  definition: drafts are steps that drafted, the bonus token included), from
  sources that count drafts (an endpoint's ``/metrics``); otherwise ``None``.
* **kv_cache_usage** – KV cache in use, 0..1, from sources that report it (an
  endpoint's ``vllm:kv_cache_usage_perc``); otherwise ``None``.
* **suffix_tree_tokens** – tokens the engine's global suffix tree holds at the
  window's end (a level, bounded by ``suffix_tree_tokens`` in the engine's
  config); ``None`` for an engine that drafts without one.
* **busy_<lane>** – share of the window the lane's thread spent working (delta
  of ``busy_s`` / window length), ``None`` for a missing lane.
* device counters – see ``metrics.device``.

Rows are immutable and the row list is only ever read as a tuple snapshot, so
the dashboard can poll ``rows`` from another thread while the sampler appends.
Rows are made from ``engine.schedulers.stats.EngineStats``, the one snapshot
type of engines and of servers driven as engines; that module imports nothing
heavy, so this one loads no torch.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

from engine.schedulers.stats import EngineStats
from metrics.device_types import DeviceProbe, DeviceSample

log = logging.getLogger(__name__)

LANES = ("prefill", "decode", "verify", "loop")
MIN_HZ = 2.0
DEFAULT_HZ = 4.0


@dataclass(frozen=True)
class TimeseriesRow:
    t_s: float
    window_s: float
    tokens_per_s: float
    running: int | None  # None: the source did not say (an endpoint whose /metrics does not answer)
    waiting: int | None
    queue_prefill: int | None
    queue_decode: int | None
    queue_verify: int | None
    draft_len: int | None
    acceptance_rate: float | None
    busy_prefill: float | None
    busy_decode: float | None
    busy_verify: float | None
    busy_loop: float | None
    gpu_util: float | None
    gpu_mem_util: float | None
    sm_occupancy: float | None
    dram_bw_util: float | None
    cpu_util: float | None
    rss_mb: float
    kv_cache_usage: float | None = None
    mean_acceptance_length: float | None = None
    suffix_tree_tokens: int | None = None


def _server_fields(prev: EngineStats, cur: EngineStats) -> tuple[float | None, float | None]:
    """(kv_cache_usage, mean_acceptance_length) of the window, from a source that counts drafts (a server)."""
    length = None
    if cur.drafts is not None and prev.drafts is not None and cur.drafts > prev.drafts:
        length = 1 + (cur.accepted - prev.accepted) / (cur.drafts - prev.drafts)
    return cur.kv_cache_usage, length


def make_row(prev: EngineStats, cur: EngineStats, device: DeviceSample, t0: float) -> TimeseriesRow | None:
    """The row for the window ``prev -> cur``; ``None`` if the window is empty."""
    window = cur.time - prev.time
    if window <= 0:
        return None
    lanes = {lane.name: lane for lane in cur.lanes}
    before = {lane.name: lane for lane in prev.lanes}

    def queue(name: str) -> int | None:
        return lanes[name].queue_depth if name in lanes else None

    def busy(name: str) -> float | None:
        if name not in lanes:
            return None
        spent = lanes[name].busy_s - (before[name].busy_s if name in before else 0.0)
        # busy_s and time are read a moment apart, so a saturated lane can show 1.01
        return min(1.0, max(0.0, spent / window))

    drafted = cur.drafted - prev.drafted
    kv_cache_usage, mean_acceptance_length = _server_fields(prev, cur)
    return TimeseriesRow(
        t_s=cur.time - t0,
        window_s=window,
        tokens_per_s=(cur.tokens_emitted - prev.tokens_emitted) / window,
        running=cur.running,
        waiting=cur.waiting,
        queue_prefill=queue("prefill"),
        queue_decode=queue("decode"),
        queue_verify=queue("verify"),
        draft_len=cur.draft_len,
        acceptance_rate=(cur.accepted - prev.accepted) / drafted if drafted > 0 else None,
        busy_prefill=busy("prefill"),
        busy_decode=busy("decode"),
        busy_verify=busy("verify"),
        busy_loop=busy("loop"),
        gpu_util=device.gpu_util,
        gpu_mem_util=device.gpu_mem_util,
        sm_occupancy=device.sm_occupancy,
        dram_bw_util=device.dram_bw_util,
        cpu_util=device.cpu_util,
        rss_mb=device.rss_mb,
        kv_cache_usage=kv_cache_usage,
        mean_acceptance_length=mean_acceptance_length,
        suffix_tree_tokens=None if cur.suffix_tree is None else cur.suffix_tree.tokens,
    )


AVERAGED_DEVICE_FIELDS = ("gpu_util", "sm_occupancy", "dram_bw_util", "cpu_util")


def _with_device_over_both(last: TimeseriesRow, merged: TimeseriesRow) -> TimeseriesRow:
    """``merged`` (the last row extended by a short final window) with utilisations over its whole window.

    The device reading taken at the end covers only the short tail; the last
    row's covers the rest, so the two are averaged by the time each covers.
    Memory readings (RSS, GPU memory) are levels, not rates: the latest stands.
    """
    tail = merged.window_s - last.window_s
    if tail <= 0:
        return merged
    averaged = {}
    for name in AVERAGED_DEVICE_FIELDS:
        before, after = getattr(last, name), getattr(merged, name)
        if before is not None and after is not None:
            averaged[name] = (before * last.window_s + after * tail) / merged.window_s
    return replace(merged, **averaged)


class TimeseriesSampler:
    """Samples ``stats()`` and ``probe`` at ``hz`` in a daemon thread.

    ``t0`` is the run's start (perf_counter seconds). ``sample()`` takes one
    sample immediately (the thread calls it; tests call it directly).
    """

    def __init__(
        self,
        stats: Callable[[], EngineStats],
        probe: DeviceProbe,
        t0: float,
        hz: float = DEFAULT_HZ,
    ) -> None:
        if not (MIN_HZ <= hz < float("inf")):  # also refuses nan
            raise ValueError(f"sampling rate must be a finite number >= {MIN_HZ} Hz, got {hz}")
        self._stats = stats
        self._probe = probe
        self._t0 = t0
        self._period = 1.0 / hz
        self._lock = threading.Lock()
        self._rows: list[TimeseriesRow] = []
        self._prev: EngineStats | None = None
        self._last_start: EngineStats | None = None  # where the last row's window began
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._failures = 0

    @property
    def rows(self) -> tuple[TimeseriesRow, ...]:
        with self._lock:
            return tuple(self._rows)

    @property
    def latest(self) -> EngineStats | None:
        """The most recent engine snapshot (``None`` before the first one)."""
        with self._lock:
            return self._prev

    def sample(self) -> TimeseriesRow | None:
        return self._take(extend_last=False)

    def _take(self, extend_last: bool) -> TimeseriesRow | None:
        cur = self._stats()
        device = self._probe.sample()
        with self._lock:
            if extend_last and self._rows and self._last_start is not None:
                # a short final window is folded into the last row: no rate spike, no lost tokens
                row = make_row(self._last_start, cur, device, self._t0)
                if row is not None:
                    row = _with_device_over_both(self._rows[-1], row)
                    self._rows[-1] = row
                self._prev = cur
                return row
            prev, self._prev = self._prev, cur
            row = None if prev is None else make_row(prev, cur, device, self._t0)
            if row is not None:
                self._rows.append(row)
                self._last_start = prev
        return row

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("sampler already started")
        self.sample()  # the baseline snapshot the first window is measured from
        self._thread = threading.Thread(target=self._run, name="metrics-sampler", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        deadline = time.perf_counter() + self._period
        while not self._stop.wait(max(0.0, deadline - time.perf_counter())):
            try:
                self.sample()
            except Exception:  # a failing stats() must not end the series without a word
                self._failures += 1
                if self._failures == 1:
                    log.exception("time series sample failed; retrying every period")
            # a late tick is not made up for: windows stay about one period long
            deadline = max(deadline + self._period, time.perf_counter())

    def stop(self) -> tuple[TimeseriesRow, ...]:
        """Stop the thread, take a last sample, and return every row.

        The rows then cover the whole run: summed ``tokens_per_s * window_s``
        equals the tokens emitted between ``start`` and ``stop``.
        """
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        prev = self.latest
        short = prev is not None and time.perf_counter() - prev.time < self._period / 2
        self._take(extend_last=short)
        return self.rows
