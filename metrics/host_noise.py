"""What else the machine did during a run: load average, other processes' CPU time, CPU steal.

A comparison's ratios are only as good as the machine was quiet. Around each
run, ``read_host`` takes the kernel's CPU counters (``/proc/stat``: time every
CPU spent busy, idle and stolen by the hypervisor), this process's own CPU
time and the 1-minute load average; ``host_noise`` turns two readings into the
share of the machine's CPU that *other* processes took (busy time of all CPUs
minus this process's, over all CPUs' time) and the share stolen. An endpoint
server in another process counts as "other": its runs measure the machine it
shares. Where the kernel does not report a counter (no ``/proc/stat``, e.g.
macOS) the share is ``None``, never 0.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

PROC_STAT = Path("/proc/stat")
NOISY_SHARE = 0.10  # others took at least a tenth of the machine's CPU: enough to move a ratio by as much


@dataclass(frozen=True)
class CpuTimes:
    """Seconds summed over every CPU since boot (``/proc/stat``'s first line)."""

    busy_s: float  # user, nice, system, irq, softirq (guest time is inside user)
    steal_s: float  # taken by the hypervisor for other guests
    total_s: float  # busy + idle + iowait + steal


def parse_proc_stat(text: str, ticks_per_s: float) -> CpuTimes | None:
    """The aggregate ``cpu`` line of ``/proc/stat``; ``None`` if there is none."""
    for line in text.splitlines():
        fields = line.split()
        if fields[:1] == ["cpu"]:
            ticks = [int(v) for v in fields[1:9]] + [0] * max(0, 9 - len(fields))
            user, nice, system, idle, iowait, irq, softirq, steal = ticks[:8]
            busy = user + nice + system + irq + softirq
            return CpuTimes(busy / ticks_per_s, steal / ticks_per_s, (busy + idle + iowait + steal) / ticks_per_s)
    return None


@dataclass(frozen=True)
class HostReading:
    at_s: float  # time.monotonic()
    cpu: CpuTimes | None  # None where the kernel has no /proc/stat
    own_cpu_s: float  # this process's user + system time, every thread
    load_1m: float | None


def read_host(proc_stat: Path = PROC_STAT) -> HostReading:
    try:
        cpu = parse_proc_stat(proc_stat.read_text(), os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError):
        cpu = None
    try:
        load: float | None = os.getloadavg()[0]
    except OSError:
        load = None
    own = os.times()
    return HostReading(time.monotonic(), cpu, own.user + own.system, load)


@dataclass(frozen=True)
class HostNoise:
    """The machine's state over one run (one competitor's turn in one round)."""

    wall_s: float
    others_share: float | None  # of all CPUs' time, the share other processes were busy
    steal_share: float | None  # of all CPUs' time, the share the hypervisor took
    load_1m: float | None  # at the run's end

    @property
    def noisy(self) -> bool:
        return (self.others_share or 0.0) >= NOISY_SHARE or (self.steal_share or 0.0) >= NOISY_SHARE

    def describe(self) -> str:
        parts = []
        if self.others_share is not None:
            parts.append(f"other processes took {self.others_share:.0%} of the CPU")
        if self.steal_share is not None and self.steal_share > 0:
            parts.append(f"the hypervisor stole {self.steal_share:.0%}")
        if self.load_1m is not None:
            parts.append(f"load average {self.load_1m:.2f}")
        return ", ".join(parts) or "no host counters on this system"


def host_noise(start: HostReading, end: HostReading) -> HostNoise:
    """What happened on the machine between two readings."""
    others = steal = None
    if start.cpu is not None and end.cpu is not None:
        total = end.cpu.total_s - start.cpu.total_s
        if total > 0:
            busy = end.cpu.busy_s - start.cpu.busy_s
            own = end.own_cpu_s - start.own_cpu_s
            # counters tick at different moments: clamp what rounding pushes outside 0..1
            others = min(1.0, max(0.0, (busy - own) / total))
            steal = min(1.0, max(0.0, (end.cpu.steal_s - start.cpu.steal_s) / total))
    return HostNoise(max(0.0, end.at_s - start.at_s), others, steal, end.load_1m)


def noise_warning(noises: dict[str, HostNoise]) -> str | None:
    """One warning naming the runs during which others took a meaningful share of the CPU; ``None`` if none did.

    ``noises`` maps a run's name (e.g. "PDV, round 2") to its noise.
    """
    noisy = {name: n for name, n in noises.items() if n.noisy}
    if not noisy:
        return None
    worst = max(noisy.values(), key=lambda n: max(n.others_share or 0.0, n.steal_share or 0.0))
    return (
        f"The machine was busy with other work during {len(noisy)} of {len(noises)} runs "
        f"({', '.join(noisy)}; worst: {worst.describe()}): their figures measure that too."
    )
