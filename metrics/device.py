"""Device utilisation probes: NVML on a GPU, psutil otherwise – and always saying which.

Counters (percentages are 0..100):

* **gpu_util** – NVML ``utilization.gpu``: share of the last sample period in
  which at least one kernel ran on the GPU ("SM utilisation" in nvidia-smi).
* **gpu_mem_util** – device memory used / total (NVML ``memory_info``).
* **sm_occupancy** – GPM ``SM_OCCUPANCY``: active warps / the theoretical
  maximum, between two consecutive samples (Hopper and newer only).
* **dram_bw_util** – GPM ``DRAM_BW_UTIL``: DRAM bandwidth used / peak, same window.
* **cpu_util** – CPU time of this process / (wall time x logical cores) since the
  previous sample: 100 means every core was busy running this process.
* **rss_mb** – resident memory of this process in MiB.

``open_probe`` picks the source. Models on the CPU, NVML missing or failing,
or GPM unsupported each leave the GPU counters ``None`` and are recorded in
``ProbeInfo.reason`` (and logged) – a fallback is never silent. Every NVML call
goes through ``NvmlApi``, which wraps a pynvml-shaped module, so the probe is
tested against a fake module.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import psutil

log = logging.getLogger(__name__)

MIB = 1024 * 1024


@dataclass(frozen=True)
class DeviceSample:
    gpu_util: float | None
    gpu_mem_util: float | None
    gpu_mem_used_mb: float | None
    sm_occupancy: float | None
    dram_bw_util: float | None
    cpu_util: float | None  # None on the very first sample: psutil needs a previous reading
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


# --------------------------------------------------------------------------
# Host counters (always reported, GPU or not)
# --------------------------------------------------------------------------


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


class _HostCounters:
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
        self._host = _HostCounters()
        self._info = ProbeInfo(source="psutil", device="cpu", gpm=False, reason=reason)

    @property
    def info(self) -> ProbeInfo:
        return self._info

    def sample(self) -> DeviceSample:
        cpu, rss = self._host.read()
        return DeviceSample(None, None, None, None, None, cpu, rss)

    def close(self) -> None:
        pass


# --------------------------------------------------------------------------
# NVML
# --------------------------------------------------------------------------


@dataclass(frozen=True)
class GpmReading:
    sm_occupancy: float | None
    dram_bw_util: float | None


class NvmlApi:
    """The few NVML calls the probe makes, over a pynvml-shaped module."""

    def __init__(self, module: Any) -> None:
        self._m = module
        self.error_type: type[BaseException] = getattr(module, "NVMLError", Exception)

    def init(self) -> None:
        self._m.nvmlInit()

    def shutdown(self) -> None:
        self._m.nvmlShutdown()

    def device_count(self) -> int:
        return int(self._m.nvmlDeviceGetCount())

    def handle(self, index: int) -> Any:
        return self._m.nvmlDeviceGetHandleByIndex(index)

    def handle_by_pci(self, bus_id: str) -> Any:
        return self._m.nvmlDeviceGetHandleByPciBusId(bus_id)

    def name(self, handle: Any) -> str:
        name = self._m.nvmlDeviceGetName(handle)
        return name.decode() if isinstance(name, bytes) else str(name)

    def sm_util(self, handle: Any) -> float:
        return float(self._m.nvmlDeviceGetUtilizationRates(handle).gpu)

    def memory(self, handle: Any) -> tuple[int, int]:
        info = self._m.nvmlDeviceGetMemoryInfo(handle)
        return int(info.used), int(info.total)

    def gpm_supported(self, handle: Any) -> bool:
        return bool(self._m.nvmlGpmQueryDeviceSupport(handle).isSupportedDevice)

    def gpm_sample(self, handle: Any) -> Any:
        sample = self._m.nvmlGpmSampleAlloc()
        try:
            return self._m.nvmlGpmSampleGet(handle, sample)
        except BaseException:
            self._m.nvmlGpmSampleFree(sample)
            raise

    def gpm_free(self, sample: Any) -> None:
        self._m.nvmlGpmSampleFree(sample)

    def gpm_metrics(self, first: Any, second: Any) -> GpmReading:
        m = self._m
        request = m.c_nvmlGpmMetricsGet_t()
        request.version = m.NVML_GPM_METRICS_GET_VERSION
        request.sample1 = first
        request.sample2 = second
        wanted = (m.NVML_GPM_METRIC_SM_OCCUPANCY, m.NVML_GPM_METRIC_DRAM_BW_UTIL)
        request.numMetrics = len(wanted)
        for slot, metric_id in enumerate(wanted):
            request.metrics[slot].metricId = metric_id
        result = m.nvmlGpmMetricsGet(request)
        values: dict[int, float | None] = {}
        for slot in range(len(wanted)):
            metric = result.metrics[slot]
            # each metric carries its own return code: one unsupported metric must not hide the other
            values[int(metric.metricId)] = float(metric.value) if metric.nvmlReturn == 0 else None
        return GpmReading(values.get(wanted[0]), values.get(wanted[1]))


class NvmlProbe:
    """NVML counters of one GPU plus the host counters."""

    def __init__(self, api: NvmlApi, handle: Any, where: str, reason: str) -> None:
        self._api = api
        self._handle = handle
        self._host = _HostCounters()
        self._lock = threading.Lock()  # GPM samples are paired between calls
        self._warned = False
        gpm, gpm_note = self._check_gpm()
        self._prev_gpm: Any = None
        self._info = ProbeInfo(
            source="nvml",
            device=f"{api.name(self._handle)} ({where})",
            gpm=gpm,
            reason=f"{reason}; {gpm_note}",
        )

    def _check_gpm(self) -> tuple[bool, str]:
        try:
            if self._api.gpm_supported(self._handle):
                return True, "GPM metrics (SM occupancy, DRAM bandwidth) supported"
            return False, "GPM metrics not supported by this GPU (needs Hopper or newer)"
        except self._api.error_type as exc:  # an old driver lacks the GPM entry points
            return False, f"GPM metrics unavailable: {exc}"
        except AttributeError as exc:
            return False, f"GPM metrics unavailable in this pynvml: {exc}"

    @property
    def info(self) -> ProbeInfo:
        return self._info

    def _warn_once(self, exc: BaseException) -> None:
        if not self._warned:
            log.warning("NVML sampling failed (%s); GPU counters of this sample are empty", exc)
            self._warned = True

    def _gpm(self) -> GpmReading:
        if not self._info.gpm:
            return GpmReading(None, None)
        sample = self._api.gpm_sample(self._handle)
        prev, self._prev_gpm = self._prev_gpm, sample
        if prev is None:
            return GpmReading(None, None)  # GPM rates need two samples
        try:
            return self._api.gpm_metrics(prev, sample)
        finally:
            self._api.gpm_free(prev)

    def _gpm_or_off(self) -> GpmReading:
        """GPM's reading; if GPM fails, it is switched off for the rest of the run and ``info`` says why."""
        try:
            return self._gpm()
        except self._api.error_type as exc:
            log.warning("NVML GPM sampling failed (%s); SM occupancy and DRAM bandwidth stay empty", exc)
            self._info = replace(self._info, gpm=False, reason=f"{self._info.reason}; GPM sampling failed: {exc}")
            if self._prev_gpm is not None:
                self._api.gpm_free(self._prev_gpm)
                self._prev_gpm = None
            return GpmReading(None, None)

    def sample(self) -> DeviceSample:
        cpu, rss = self._host.read()
        with self._lock:
            try:
                util = self._api.sm_util(self._handle)
                used, total = self._api.memory(self._handle)
            except self._api.error_type as exc:
                self._warn_once(exc)
                return DeviceSample(None, None, None, None, None, cpu, rss)
            gpm = self._gpm_or_off()
        mem_util = 100.0 * used / total if total > 0 else None
        return DeviceSample(util, mem_util, used / MIB, gpm.sm_occupancy, gpm.dram_bw_util, cpu, rss)

    def close(self) -> None:
        with self._lock:
            try:
                if self._prev_gpm is not None:
                    self._api.gpm_free(self._prev_gpm)
                    self._prev_gpm = None
                self._api.shutdown()
            except self._api.error_type as exc:
                log.warning("NVML shutdown failed: %s", exc)


def _cuda_index(device: str) -> int | None:
    """The GPU index of a torch device string, or ``None`` when it is not a GPU."""
    if device == "cuda":
        return 0
    if device.startswith("cuda:") and device[5:].isdigit():
        return int(device[5:])
    return None


def open_probe(device: str, nvml: Any | None = None, pci_bus_id: str | None = None) -> DeviceProbe:
    """A probe for the device the models run on (``str(pair.device)``).

    ``pci_bus_id`` (``engine.devices.pci_bus_id``) finds the GPU in NVML by its
    PCI address. Without it the CUDA index is taken as NVML's, which holds only
    when ``CUDA_VISIBLE_DEVICES`` does not renumber the GPUs; ``info.reason``
    then says so. ``nvml`` is a pynvml-shaped module (tests pass a fake); by
    default pynvml is imported. Any reason GPU counters are unavailable ends up
    in ``info.reason``.
    """
    index = _cuda_index(device)
    if index is None:
        return HostProbe(f"models run on {device}: GPU counters do not apply")
    if nvml is None:
        try:
            import pynvml as nvml
        except ImportError as exc:
            return _fallback(f"pynvml is not installed ({exc})")
    api = NvmlApi(nvml)
    try:
        api.init()
    except api.error_type as exc:
        return _fallback(f"NVML could not start ({exc})")
    try:
        count = api.device_count()
        if index >= count:
            _shutdown_quietly(api)
            return _fallback(f"{device} requested but NVML sees {count} GPU(s)")
        if pci_bus_id is not None:
            return NvmlProbe(api, api.handle_by_pci(pci_bus_id), f"{device}, PCI {pci_bus_id}", f"NVML on {device}")
        reason = f"NVML on {device}, found by index (assumes CUDA_VISIBLE_DEVICES does not renumber GPUs)"
        return NvmlProbe(api, api.handle(index), device, reason)
    except api.error_type as exc:
        _shutdown_quietly(api)
        return _fallback(f"NVML failed on {device} ({exc})")


def _shutdown_quietly(api: NvmlApi) -> None:
    # the probe is being abandoned for the fallback; a failing shutdown changes nothing about that
    try:
        api.shutdown()
    except api.error_type as exc:
        log.debug("NVML shutdown failed: %s", exc)


def _fallback(why: str) -> HostProbe:
    reason = f"{why}; reporting CPU utilisation and RSS only"
    log.warning("device probe: %s", reason)
    return HostProbe(reason)
