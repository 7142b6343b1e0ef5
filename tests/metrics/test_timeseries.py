"""Time series rows from engine snapshots, and the sampler thread."""

from __future__ import annotations

import itertools
import threading
import time

import pytest

from engine.schedulers.stats import Counters, EngineStats, LaneStats
from metrics.device_types import DeviceSample, ProbeInfo
from metrics.frames import timeseries_frame
from metrics.timeseries import TimeseriesSampler, make_row


def Stats(  # noqa: N802 - reads as the snapshot it builds
    time: float,
    lanes: tuple[LaneStats, ...],
    tokens_emitted: int = 0,
    drafted: int = 0,
    accepted: int = 0,
    waiting: int = 0,
    running: int = 0,
    draft_len: int | None = 4,
    engine: str = "pdv",
) -> EngineStats:
    return EngineStats(engine, time, waiting, running, lanes, draft_len, Counters(tokens_emitted, drafted, accepted), 0)


DEVICE = DeviceSample(None, None, None, None, None, 12.5, 300.0)


class StaticProbe:
    info = ProbeInfo("psutil", "cpu", False, "test")

    def sample(self) -> DeviceSample:
        return DEVICE

    def close(self) -> None:
        pass


PDV_LANES = ("prefill", "decode", "verify")


def lanes(names, queues=(0, 0, 0), busy=(0.0, 0.0, 0.0)):
    return tuple(LaneStats(n, q, b) for n, q, b in zip(names, queues, busy, strict=False))


def test_row_rates_come_from_deltas_over_the_window():
    prev = Stats(10.0, lanes(PDV_LANES, busy=(1.0, 2.0, 3.0)), tokens_emitted=100, drafted=40, accepted=20)
    cur = Stats(
        10.5,
        lanes(PDV_LANES, queues=(2, 1, 5), busy=(1.25, 2.5, 3.0)),
        tokens_emitted=150,
        drafted=60,
        accepted=35,
        running=6,
        waiting=3,
        draft_len=3,
    )
    row = make_row(prev, cur, DEVICE, t0=9.0)
    assert row.t_s == pytest.approx(1.5) and row.window_s == pytest.approx(0.5)
    assert row.tokens_per_s == pytest.approx(100.0)
    assert row.acceptance_rate == pytest.approx(15 / 20)
    assert (row.queue_prefill, row.queue_decode, row.queue_verify) == (2, 1, 5)
    assert row.busy_prefill == pytest.approx(0.5) and row.busy_decode == pytest.approx(1.0)
    assert row.busy_verify == 0.0 and row.busy_loop is None
    assert (row.running, row.waiting, row.draft_len) == (6, 3, 3)
    assert row.cpu_util == 12.5 and row.gpu_util is None


def test_lanes_an_engine_lacks_are_empty_not_zero():
    prev = Stats(0.0, lanes(("loop",)), draft_len=None)
    cur = Stats(0.25, lanes(("loop",), queues=(4,), busy=(0.25,)), draft_len=None, tokens_emitted=5)
    row = make_row(prev, cur, DEVICE, t0=0.0)
    assert row.queue_prefill is None and row.queue_decode is None and row.queue_verify is None
    assert row.busy_loop == pytest.approx(1.0)
    assert row.draft_len is None
    assert row.acceptance_rate is None  # nothing drafted in the window


def test_a_row_carries_what_the_suffix_tree_holds_at_the_windows_end_and_nothing_without_one():
    from dataclasses import replace

    from engine.suffix_tree import TreeSize

    prev = Stats(0.0, lanes(("loop",)))
    cur = replace(Stats(0.5, lanes(("loop",))), suffix_tree=TreeSize(tokens=640, sequences=9, nodes=801))
    assert make_row(prev, cur, DEVICE, t0=0.0).suffix_tree_tokens == 640
    assert make_row(prev, Stats(0.5, lanes(("loop",))), DEVICE, t0=0.0).suffix_tree_tokens is None


def test_empty_window_gives_no_row():
    s = Stats(1.0, lanes(PDV_LANES))
    assert make_row(s, s, DEVICE, t0=0.0) is None


class CountingEngine:
    """Emits 10 tokens per stats() call, with real timestamps."""

    def __init__(self) -> None:
        self.tokens = 0
        self.lock = threading.Lock()

    def stats(self) -> Stats:
        with self.lock:
            self.tokens += 10
            return Stats(time.perf_counter(), lanes(("prefill", "decode")), tokens_emitted=self.tokens)


def test_sampler_thread_produces_rows_at_the_requested_rate_readable_while_running():
    engine = CountingEngine()
    sampler = TimeseriesSampler(engine.stats, StaticProbe(), t0=time.perf_counter(), hz=20.0)
    sampler.start()
    deadline = time.perf_counter() + 5.0
    while len(sampler.rows) < 5 and time.perf_counter() < deadline:
        time.sleep(0.01)
    snapshot = sampler.rows  # read from this thread while the sampler appends
    rows = sampler.stop()
    assert len(snapshot) >= 5
    assert rows[: len(snapshot) - 1] == snapshot[:-1]  # only the last row may still change (at stop)
    gaps = [b.t_s - a.t_s for a, b in itertools.pairwise(rows)]
    assert max(gaps[:4]) < 0.5  # about 1/20 s each; far below the 2 Hz floor
    assert all(r.queue_verify is None and r.queue_prefill == 0 for r in rows)
    assert sampler.latest is not None
    # the rows cover the whole run: every token from the first snapshot to the last is in some window
    covered = sum(r.tokens_per_s * r.window_s for r in rows)
    assert covered == pytest.approx(sampler.latest.tokens_emitted - 10)


def test_sampler_refuses_rates_below_two_hertz():
    with pytest.raises(ValueError, match="2"):
        TimeseriesSampler(CountingEngine().stats, StaticProbe(), t0=0.0, hz=1.0)


def test_live_rows_become_a_numeric_frame_with_every_field():
    prev = Stats(0.0, lanes(("loop",)), draft_len=None)
    row = make_row(prev, Stats(0.5, lanes(("loop",), busy=(0.25,)), tokens_emitted=10, draft_len=None), DEVICE, 0.0)
    frame = timeseries_frame([row, row])
    assert len(frame) == 2 and frame["busy_loop"].tolist() == [0.5, 0.5]
    assert frame["queue_verify"].isna().all() and frame["tokens_per_s"].iloc[0] == 20.0
    assert list(timeseries_frame([]).columns) == list(frame.columns)


def test_a_short_final_window_folded_into_the_last_row_averages_its_utilisation_by_time():
    times = iter([0.0, 1.0, 1.1])
    cpu = iter([50.0, 80.0, 0.0])  # the last reading covers the 0.1 s tail only

    class Probe(StaticProbe):
        def sample(self) -> DeviceSample:
            return DeviceSample(None, None, None, None, None, next(cpu), 300.0 + len(rows))

    rows: list = []
    sampler = TimeseriesSampler(lambda: Stats(next(times), lanes(PDV_LANES)), Probe(), t0=0.0, hz=4.0)
    rows.append(sampler.sample())  # the baseline: no row
    rows.append(sampler.sample())  # 0 -> 1.0 s, CPU 80 %
    last = sampler._take(extend_last=True)  # what stop() does with a final window under half a period
    assert rows[0] is None and sampler.rows == (last,)
    assert last.window_s == pytest.approx(1.1)
    assert last.cpu_util == pytest.approx((80.0 * 1.0 + 0.0 * 0.1) / 1.1)  # not the tail's 0
    assert last.rss_mb == 302.0  # a level, not a rate: the latest reading
