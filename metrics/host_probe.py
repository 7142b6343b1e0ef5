"""Host counters, reported GPU or not: this process's CPU utilisation and resident memory (psutil)."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import psutil

from metrics.device_types import MIB, DeviceSample, ProbeInfo

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")
# A process's CPU time moves in clock ticks (10 ms on Linux, per thread), so over a window of a few
# milliseconds one tick reads as thousands of percent: a reading needs at least this much wall time.
MIN_WINDOW_S = 0.1


def _cgroup_cpus(path: Path = CGROUP_CPU_MAX) -> float | None:
    """The CPU quota of this process's cgroup (v2 ``cpu.max``: "quota period", or "max"), in cores."""
    try:
        quota, period = path.read_text().split()[:2]
    except (OSError, ValueError):
        return None
    if quota == "max":
        return None
    try:
        cores = int(quota) / int(period)
    except (ValueError, ZeroDivisionError):
        return None
    return cores if cores > 0 else None


def _usable_cores(cpu_max: Path = CGROUP_CPU_MAX) -> float:
    """Cores this process may use: its affinity (e.g. a container's cpuset), capped by a cgroup CPU
    quota (e.g. ``docker --cpus``); not every core of the host."""
    try:
        cores: float = len(psutil.Process().cpu_affinity()) or 1
    except (AttributeError, NotImplementedError, psutil.Error):  # macOS has no affinity
        cores = psutil.cpu_count() or 1
    quota = _cgroup_cpus(cpu_max)
    return min(cores, quota) if quota is not None else cores


class HostCounters:
    """This process's CPU utilisation since the previous reading, and its resident memory.

    CPU utilisation is CPU time / (wall time x usable cores) over the window since the previous reading,
    capped at 100 (the ticks' rounding); the first read opens the first window and gives ``None``. A read
    less than ``MIN_WINDOW_S`` after the window opened repeats the previous reading (``None`` before the
    first) and leaves the window open, so the next read covers the whole of it.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._process = psutil.Process()
        self._cores = _usable_cores()
        self._clock = clock
        self._mark: tuple[float, float] | None = None  # (wall, CPU seconds) where the window opened
        self._cpu: float | None = None

    def _now(self) -> tuple[float, float]:
        times = self._process.cpu_times()
        return self._clock(), times.user + times.system

    def read(self) -> tuple[float | None, float]:
        wall, busy = now = self._now()
        if self._mark is None:
            self._mark = now
        elif (window := wall - self._mark[0]) >= MIN_WINDOW_S:
            share = (busy - self._mark[1]) / (window * self._cores) * 100
            self._cpu, self._mark = min(100.0, max(0.0, share)), now
        return self._cpu, self._process.memory_info().rss / MIB


class HostProbe:
    """CPU utilisation and RSS of this process; GPU counters are ``None``."""

    def __init__(self, reason: str) -> None:
        self._host = HostCounters()
        self._info = ProbeInfo(source="psutil", device="cpu", gpm=False, reason=reason)

    @property
    def info(self) -> ProbeInfo:
        return self._info

    def sample(self) -> DeviceSample:
        cpu, rss = self._host.read()
        return DeviceSample(None, None, None, None, None, cpu, rss)

    def close(self) -> None:
        pass
