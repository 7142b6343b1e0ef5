"""Do the draft and verify kernels overlap on the GPU? Read from a ``torch.profiler`` trace.

PDV pays off on a GPU only if the decode lane's draft kernels run while the
verify lane's kernels do. A profiler trace (Chrome trace JSON, as
``torch.profiler.profile.export_chrome_trace`` writes it) says when each kernel
ran, but not which lane queued it: a kernel event carries a ``correlation``
id, and so does the runtime call that launched it (``cudaLaunchKernel`` and
the like), whose ``tid`` is the launching CPU thread. Each lane is one thread,
so the lane of a kernel is the lane of the thread that launched it.

``overlap`` merges each lane's kernel intervals and measures how long both
lanes had a kernel running at once.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, NamedTuple

KERNEL_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")  # device work in a Kineto trace
LAUNCH_CATEGORIES = ("cuda_runtime", "cuda_driver")  # the host calls that queue it


class Overlap(NamedTuple):
    """Device time of two lanes' kernels in one trace, in microseconds."""

    first_us: float  # time with at least one of the first lane's kernels running
    second_us: float
    both_us: float  # time with kernels of both lanes running at once
    kernels: dict[str, int]  # lane -> kernels attributed to it

    @property
    def share(self) -> float | None:
        """Overlap as a share of the shorter lane's busy time (1.0: it always ran beside the other); None if idle."""
        shorter = min(self.first_us, self.second_us)
        return self.both_us / shorter if shorter > 0 else None


def _union(spans: Iterable[tuple[float, float]]) -> list[tuple[float, float]]:
    merged: list[tuple[float, float]] = []
    for start, end in sorted(spans):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def _length(spans: list[tuple[float, float]]) -> float:
    return sum(end - start for start, end in spans)


def _intersection(a: list[tuple[float, float]], b: list[tuple[float, float]]) -> float:
    total, i, j = 0.0, 0, 0
    while i < len(a) and j < len(b):
        total += max(0.0, min(a[i][1], b[j][1]) - max(a[i][0], b[j][0]))
        if a[i][1] < b[j][1]:
            i += 1
        else:
            j += 1
    return total


def lane_spans(events: list[dict[str, Any]], lane_of_thread: dict[int, str]) -> dict[str, list[tuple[float, float]]]:
    """Each lane's kernel intervals (start, end) in µs; kernels launched by other threads are left out."""
    launcher = {
        e["args"]["correlation"]: e.get("tid")
        for e in events
        if e.get("cat") in LAUNCH_CATEGORIES and "correlation" in e.get("args", {})
    }
    spans: dict[str, list[tuple[float, float]]] = defaultdict(list)
    for e in events:
        if e.get("cat") not in KERNEL_CATEGORIES or e.get("ph") != "X":
            continue
        lane = lane_of_thread.get(launcher.get(e.get("args", {}).get("correlation")))
        if lane is not None:
            spans[lane].append((float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0.0))))
    return dict(spans)


def overlap(events: list[dict[str, Any]], lane_of_thread: dict[int, str], first: str, second: str) -> Overlap:
    """How long lanes ``first`` and ``second`` (names in ``lane_of_thread``'s values) had kernels running at once."""
    spans = lane_spans(events, lane_of_thread)
    a, b = _union(spans.get(first, [])), _union(spans.get(second, []))
    kernels = {lane: len(spans.get(lane, [])) for lane in (first, second)}
    return Overlap(_length(a), _length(b), _intersection(a, b), kernels)
