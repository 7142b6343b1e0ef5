"""Host counters, reported GPU or not: this process's CPU utilisation and resident memory (psutil)."""

from __future__ import annotations

from pathlib import Path

import psutil

from metrics.device_types import MIB, DeviceSample, ProbeInfo

CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")


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
    def __init__(self) -> None:
        self._process = psutil.Process()
        self._cores = _usable_cores()
        self._primed = False
        self._process.cpu_percent(interval=None)  # psutil measures from the previous call

    def read(self) -> tuple[float | None, float]:
        percent = self._process.cpu_percent(interval=None) / self._cores
        cpu = percent if self._primed else None
        self._primed = True
        return cpu, self._process.memory_info().rss / MIB


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
