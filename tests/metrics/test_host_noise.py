"""Host noise: /proc/stat parsed by hand, others' share of the CPU, and a real busy neighbour's warning."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from metrics.host_noise import CpuTimes, HostNoise, HostReading, host_noise, noise_warning, parse_proc_stat, read_host

STAT = """cpu  100 10 40 500 20 5 5 20 0 0
cpu0 50 5 20 250 10 2 3 10 0 0
intr 12345
"""


def test_proc_stat_first_line_sums_every_cpu():
    cpu = parse_proc_stat(STAT, ticks_per_s=100)
    # busy = user 100 + nice 10 + system 40 + irq 5 + softirq 5 = 160 ticks; total adds idle 500, iowait 20, steal 20
    assert cpu == CpuTimes(busy_s=1.6, steal_s=0.2, total_s=7.0)
    assert parse_proc_stat("intr 1\n", 100) is None


def test_others_share_is_busy_time_not_ours_over_all_cpus_time():
    start = HostReading(10.0, CpuTimes(busy_s=100.0, steal_s=1.0, total_s=1000.0), own_cpu_s=5.0, load_1m=0.5)
    # 10 s on 2 CPUs = 20 CPU-seconds: 12 busy, of which 4 ours -> others 8 / 20 = 0.4; steal 1 / 20
    end = HostReading(20.0, CpuTimes(busy_s=112.0, steal_s=2.0, total_s=1020.0), own_cpu_s=9.0, load_1m=1.5)
    noise = host_noise(start, end)
    assert noise == HostNoise(
        wall_s=10.0, others_share=pytest.approx(0.4), steal_share=pytest.approx(0.05), load_1m=1.5
    )
    assert noise.noisy


def test_a_quiet_machine_gives_no_warning_and_missing_counters_are_none():
    start = HostReading(0.0, CpuTimes(0.0, 0.0, 0.0), 0.0, 0.1)
    quiet = host_noise(start, HostReading(5.0, CpuTimes(9.0, 0.0, 10.0), 8.9, 0.2))
    assert quiet.others_share == pytest.approx(0.01) and not quiet.noisy
    assert noise_warning({"AR, round 1": quiet}) is None
    blind = host_noise(HostReading(0.0, None, 0.0, None), HostReading(1.0, None, 1.0, None))
    assert (blind.others_share, blind.steal_share, blind.noisy) == (None, None, False)
    assert blind.describe() == "no host counters on this system"


def test_the_warning_names_the_noisy_runs():
    quiet = HostNoise(10.0, 0.02, 0.0, 0.3)
    busy = HostNoise(10.0, 0.45, 0.0, 2.1)
    text = noise_warning({"AR, round 1": quiet, "PDV, round 2": busy})
    assert text == (
        "The machine was busy with other work during 1 of 2 runs (PDV, round 2; worst: other processes took 45% "
        "of the CPU, load average 2.10): their figures measure that too."
    )


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="the kernel reports no /proc/stat (not Linux)")
def test_a_busy_neighbour_process_shows_as_noise():
    # another process spins for one second of CPU time: on this machine's few cores that is far more than a
    # tenth of the CPU time that passes meanwhile (it can take long only if yet more processes are busy)
    spin = "import time\nt = time.process_time()\nwhile time.process_time() - t < 1.0: pass"
    start = read_host()
    subprocess.run([sys.executable, "-c", spin], check=True)
    noise = host_noise(start, read_host())
    assert noise.noisy
    warning = noise_warning({"AR, round 1": noise})
    assert warning is not None and warning.startswith("The machine was busy with other work during 1 of 1 runs")
