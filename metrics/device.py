"""Device utilisation probes: NVML on a GPU, psutil otherwise – and always saying which.

Counters (percentages are 0..100):

* **gpu_util** – NVML ``utilization.gpu``: share of the last sample period in
  which at least one kernel ran on the GPU ("SM utilisation" in nvidia-smi).
* **gpu_mem_util** – device memory used / total (NVML ``memory_info``).
* **sm_occupancy** – GPM ``SM_OCCUPANCY``: active warps / the theoretical
  maximum, between two consecutive samples (Hopper and newer only).
* **dram_bw_util** – GPM ``DRAM_BW_UTIL``: DRAM bandwidth used / peak, same window.
* **cpu_util** – CPU time of this process / (wall time x usable cores) since the
  previous sample, over at least 0.1 s and capped at 100 (CPU time moves in clock
  ticks): 100 means every core was busy running this process.
* **rss_mb** – resident memory of this process in MiB.

``open_probe`` picks the source. Models on the CPU, NVML missing or failing,
or GPM unsupported each leave the GPU counters ``None`` and are recorded in
``ProbeInfo.reason`` (and logged) – a fallback is never silent. The probes live in
``metrics.host_probe`` and ``metrics.nvml_probe``.
"""

from __future__ import annotations

import logging
from typing import Any

from metrics.device_types import DeviceProbe
from metrics.host_probe import HostProbe
from metrics.nvml_probe import NvmlApi, NvmlProbe

log = logging.getLogger(__name__)


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
