"""Device probes against a fake NVML module: counters, GPM pairing, and visible fallbacks."""

from __future__ import annotations

import logging
import time
import types
from pathlib import Path

import pytest

from metrics.device import open_probe
from metrics.host_probe import HostProbe
from metrics.nvml_probe import NvmlProbe


class FakeNVMLError(Exception):
    pass


def fake_nvml(
    *,
    init_fails: bool = False,
    count: int = 1,
    gpm: bool | None = True,  # None: the driver lacks the GPM entry points
    util: float = 73.0,
    used: int = 3 * 1024**3,
    total: int = 12 * 1024**3,
) -> types.SimpleNamespace:
    """A pynvml-shaped module recording calls; GPM metric values grow with each sample."""
    m = types.SimpleNamespace(calls=[], samples_alive=set(), next_sample=0, fail_sampling=False)
    m.NVMLError = FakeNVMLError
    m.NVML_GPM_METRIC_SM_OCCUPANCY = 3
    m.NVML_GPM_METRIC_DRAM_BW_UTIL = 10
    m.NVML_GPM_METRICS_GET_VERSION = 1

    def init():
        m.calls.append("init")
        if init_fails:
            raise FakeNVMLError("Driver Not Loaded")

    def check():
        if m.fail_sampling:
            raise FakeNVMLError("GPU is lost")

    m.nvmlInit = init
    m.nvmlShutdown = lambda: m.calls.append("shutdown")
    m.nvmlDeviceGetCount = lambda: count
    m.nvmlDeviceGetHandleByIndex = lambda i: f"handle{i}"
    m.nvmlDeviceGetHandleByPciBusId = lambda bus: f"handle@{bus}"
    m.nvmlDeviceGetName = lambda h: b"Fake GPU 80GB"

    def utilization(h):
        check()
        return types.SimpleNamespace(gpu=util, memory=5)

    def memory(h):
        check()
        return types.SimpleNamespace(used=used, total=total, free=total - used)

    m.nvmlDeviceGetUtilizationRates = utilization
    m.nvmlDeviceGetMemoryInfo = memory
    if gpm is not None:
        m.nvmlGpmQueryDeviceSupport = lambda h: types.SimpleNamespace(isSupportedDevice=int(gpm))

        def alloc():
            m.next_sample += 1
            m.samples_alive.add(m.next_sample)
            return m.next_sample

        m.nvmlGpmSampleAlloc = alloc
        m.nvmlGpmSampleGet = lambda h, s: s
        m.nvmlGpmSampleFree = lambda s: m.samples_alive.discard(s)

        class MetricsGet:
            def __init__(self):
                self.metrics = [types.SimpleNamespace(metricId=0, nvmlReturn=0, value=0.0) for _ in range(4)]

        m.c_nvmlGpmMetricsGet_t = MetricsGet

        def metrics_get(req):
            assert req.version == 1 and req.sample2 == req.sample1 + 1  # consecutive samples are paired
            for slot in range(req.numMetrics):
                metric = req.metrics[slot]
                metric.value = {3: 40.0 + req.sample1, 10: 60.0 + req.sample1}[metric.metricId]
            return req

        m.nvmlGpmMetricsGet = metrics_get
    return m


def test_nvml_probe_reports_sm_and_memory_utilisation():
    nvml = fake_nvml(gpm=False)
    probe = open_probe("cuda:0", nvml=nvml)
    assert isinstance(probe, NvmlProbe)
    s = probe.sample()
    assert s.gpu_util == 73.0
    assert s.gpu_mem_util == pytest.approx(25.0)
    assert s.gpu_mem_used_mb == pytest.approx(3 * 1024)
    assert s.sm_occupancy is None and s.dram_bw_util is None
    assert s.rss_mb > 0
    info = probe.info
    assert info.source == "nvml" and info.device == "Fake GPU 80GB (cuda:0)"
    assert not info.gpm and "not supported" in info.reason and "found by index" in info.reason
    probe.close()
    assert nvml.calls[-1] == "shutdown"


def test_gpm_metrics_come_from_consecutive_sample_pairs_and_samples_are_freed():
    nvml = fake_nvml(gpm=True)
    probe = open_probe("cuda", nvml=nvml)
    assert probe.info.gpm
    first = probe.sample()
    assert first.sm_occupancy is None  # a rate needs two samples
    second = probe.sample()
    assert (second.sm_occupancy, second.dram_bw_util) == (41.0, 61.0)
    third = probe.sample()
    assert (third.sm_occupancy, third.dram_bw_util) == (42.0, 62.0)
    assert nvml.samples_alive == {3}
    probe.close()
    assert nvml.samples_alive == set()


def test_driver_without_gpm_entry_points_is_reported_not_fatal():
    probe = open_probe("cuda:0", nvml=fake_nvml(gpm=None))
    assert probe.info.source == "nvml" and not probe.info.gpm
    assert "GPM metrics unavailable" in probe.info.reason
    assert probe.sample().gpu_util == 73.0


def test_nvml_that_cannot_start_falls_back_to_psutil_and_says_why(caplog):
    with caplog.at_level(logging.WARNING, logger="metrics.device"):
        probe = open_probe("cuda:0", nvml=fake_nvml(init_fails=True))
    assert isinstance(probe, HostProbe)
    assert probe.info.source == "psutil"
    assert "Driver Not Loaded" in probe.info.reason
    assert "Driver Not Loaded" in caplog.text
    s = probe.sample()
    assert s.gpu_util is None and s.gpu_mem_util is None and s.rss_mb > 0


def test_missing_gpu_index_falls_back_with_the_count_in_the_reason():
    nvml = fake_nvml(count=1)
    probe = open_probe("cuda:3", nvml=nvml)
    assert probe.info.source == "psutil" and "sees 1 GPU" in probe.info.reason
    assert nvml.calls[-1] == "shutdown"


def test_cpu_models_use_the_host_probe_with_a_reason():
    probe = open_probe("cpu")
    assert probe.info.source == "psutil" and "cpu" in probe.info.reason
    first = probe.sample()
    assert first.cpu_util is None  # the first sample opens the first window
    deadline = time.monotonic() + 0.15  # busy past MIN_WINDOW_S
    while time.monotonic() < deadline:
        pass
    second = probe.sample()
    assert second.cpu_util is not None and 0.0 < second.cpu_util <= 100.0


def test_cpu_utilisation_waits_for_a_window_of_a_tenth_of_a_second_and_never_exceeds_100():
    from metrics import host_probe

    clock = [0.0]
    cpu = [5.0]
    counters = host_probe.HostCounters(clock=lambda: clock[0])
    counters._cores = 2
    counters._process = types.SimpleNamespace(
        cpu_times=lambda: types.SimpleNamespace(user=cpu[0], system=0.0),
        memory_info=lambda: types.SimpleNamespace(rss=64 * 2**20),
    )

    def read(at: float, busy: float) -> float | None:
        clock[0], cpu[0] = at, busy
        util, rss = counters.read()
        assert rss == 64.0
        return util

    assert read(0.0, 5.0) is None  # opens the window
    assert read(0.0002, 5.01) is None  # one 10 ms tick in 0.2 ms: 2,500 % per core were it read
    assert read(0.2, 5.2) == pytest.approx(50.0)  # 0.2 s of CPU in 0.2 s on 2 cores, the short read included
    assert read(0.2001, 5.21) == pytest.approx(50.0)  # too short again: the previous reading
    assert read(0.4, 5.65) == 100.0  # 0.45 s of CPU in 0.2 s x 2 cores is the ticks' rounding: capped
    assert read(0.6, 5.65) == 0.0


def test_a_failing_sample_leaves_gpu_cells_empty_and_warns_once(caplog):
    nvml = fake_nvml(gpm=False)
    probe = open_probe("cuda:0", nvml=nvml)
    nvml.fail_sampling = True
    with caplog.at_level(logging.WARNING, logger="metrics.device"):
        a, b = probe.sample(), probe.sample()
    assert a.gpu_util is None and b.gpu_mem_util is None and b.rss_mb > 0
    assert caplog.text.count("GPU is lost") == 1
    nvml.fail_sampling = False
    assert probe.sample().gpu_util == 73.0


def test_nvml_finds_the_gpu_by_its_pci_address_when_it_is_known():
    nvml = fake_nvml(gpm=False)
    probe = open_probe("cuda:0", nvml=nvml, pci_bus_id="00000000:3B:00.0")
    assert probe._handle == "handle@00000000:3B:00.0"  # not NVML's device 0, which may be another GPU
    assert probe.info.device == "Fake GPU 80GB (cuda:0, PCI 00000000:3B:00.0)"
    assert "found by index" not in probe.info.reason
    probe.close()


def test_pci_bus_id_is_written_as_nvml_writes_it():
    import types

    import torch

    from engine.devices import pci_bus_id

    props = types.SimpleNamespace(pci_domain_id=0, pci_bus_id=0x3B, pci_device_id=0)
    backend = types.SimpleNamespace(get_device_properties=lambda device: props)
    assert pci_bus_id(torch.device("cuda:1"), backend) == "00000000:3B:00.0"
    assert pci_bus_id("cpu") is None
    older = types.SimpleNamespace(get_device_properties=lambda device: types.SimpleNamespace())
    assert pci_bus_id("cuda:0", older) is None  # a torch that does not report it: found by index instead


def test_a_failing_gpm_sample_switches_gpm_off_but_keeps_utilisation_and_memory(caplog):
    nvml = fake_nvml(gpm=True)
    probe = open_probe("cuda", nvml=nvml)
    probe.sample()

    def lost(handle, sample):
        raise FakeNVMLError("GPM sample failed (MIG)")

    nvml.nvmlGpmSampleGet = lost
    with caplog.at_level(logging.WARNING, logger="metrics.device"):
        s = probe.sample()
    assert s.gpu_util == 73.0 and s.gpu_mem_util == pytest.approx(25.0)  # the other counters stay
    assert s.sm_occupancy is None
    assert not probe.info.gpm and "GPM sampling failed" in probe.info.reason
    assert probe.sample().gpu_util == 73.0
    probe.close()
    assert nvml.samples_alive == set()


def test_cpu_utilisation_is_a_share_of_the_cores_this_process_may_use(monkeypatch):
    from metrics import host_probe

    monkeypatch.setattr(host_probe.psutil.Process, "cpu_affinity", lambda self: [0, 1])
    monkeypatch.setattr(host_probe.psutil, "cpu_count", lambda: 64)
    assert host_probe._usable_cores(Path("/no/cgroup/cpu.max")) == 2  # a 2-CPU cpuset on a 64-core host


def test_a_cgroup_cpu_quota_caps_the_cores_this_process_may_use(monkeypatch, tmp_path):
    from metrics import host_probe

    monkeypatch.setattr(host_probe.psutil.Process, "cpu_affinity", lambda self: list(range(64)))
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text("150000 100000\n")  # docker --cpus=1.5 on a 64-core host
    assert host_probe._usable_cores(cpu_max) == 1.5
    cpu_max.write_text("max 100000\n")  # no quota
    assert host_probe._usable_cores(cpu_max) == 64
    cpu_max.write_text("garbage")
    assert host_probe._usable_cores(cpu_max) == 64


def test_utilisation_not_supported_under_mig_leaves_memory_read(caplog):
    nvml = fake_nvml(gpm=False)
    probe = open_probe("cuda:0", nvml=nvml)

    def not_supported(handle):
        raise nvml.NVMLError("Not Supported")

    nvml.nvmlDeviceGetUtilizationRates = not_supported
    with caplog.at_level(logging.WARNING, logger="metrics.device"):
        s = probe.sample()
    assert s.gpu_util is None
    assert s.gpu_mem_used_mb == pytest.approx(3 * 1024) and s.gpu_mem_util == pytest.approx(25.0)
    probe.close()
