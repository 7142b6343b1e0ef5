"""What a device probe reports (``metrics.device`` defines the counters)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

MIB = 1024 * 1024


@dataclass(frozen=True)
class DeviceSample:
    gpu_util: float | None
    gpu_mem_util: float | None
    gpu_mem_used_mb: float | None
    sm_occupancy: float | None
    dram_bw_util: float | None
    cpu_util: float | None  # None until a window of at least 0.1 s since the first sample has closed
    rss_mb: float


@dataclass(frozen=True)
class ProbeInfo:
    """Which counters a probe reports, and why (recorded in run.json)."""

    source: str  # "nvml" or "psutil"
    device: str  # e.g. "NVIDIA A100-SXM4-40GB (cuda:0)" or "cpu"
    gpm: bool  # SM occupancy and DRAM bandwidth available
    reason: str


class DeviceProbe(Protocol):
    @property
    def info(self) -> ProbeInfo: ...

    def sample(self) -> DeviceSample: ...

    def close(self) -> None: ...
