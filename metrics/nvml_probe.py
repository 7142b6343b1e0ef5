"""GPU counters through NVML: utilisation, memory and, on Hopper and newer, GPM's SM occupancy and DRAM bandwidth.

Every NVML call goes through ``NvmlApi``, which wraps a pynvml-shaped module, so
the probe is tested against a fake module.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, replace
from typing import Any

from metrics.device_types import MIB, DeviceSample, ProbeInfo
from metrics.host_probe import HostCounters

log = logging.getLogger(__name__)


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
        self._host = HostCounters()
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
        # one counter at a time: under MIG utilisation is "not supported" while memory still reads, and one
        # failing counter must not blank the others
        util = used = total = None
        with self._lock:
            try:
                util = self._api.sm_util(self._handle)
            except self._api.error_type as exc:
                self._warn_once(exc)
            try:
                used, total = self._api.memory(self._handle)
            except self._api.error_type as exc:
                self._warn_once(exc)
            gpm = self._gpm_or_off() if used is not None or util is not None else GpmReading(None, None)
        mem_util = 100.0 * used / total if used is not None and total else None
        mem_mb = used / MIB if used is not None else None
        return DeviceSample(util, mem_util, mem_mb, gpm.sm_occupancy, gpm.dram_bw_util, cpu, rss)

    def close(self) -> None:
        with self._lock:
            try:
                if self._prev_gpm is not None:
                    self._api.gpm_free(self._prev_gpm)
                    self._prev_gpm = None
                self._api.shutdown()
            except self._api.error_type as exc:
                log.warning("NVML shutdown failed: %s", exc)
