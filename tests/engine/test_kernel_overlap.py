"""gpu-check's overlap profile from a made-up profiler trace: a kernel belongs to the lane whose thread launched it."""

import pytest

from engine.kernel_overlap import overlap

DECODE, VERIFY, OTHER = 101, 202, 303  # launching threads' ids


def launch(tid: int, correlation: int) -> dict:
    return {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "tid": tid, "ts": 0, "dur": 1,
            "args": {"correlation": correlation}}  # fmt: skip


def kernel(correlation: int, start: float, end: float, stream: int = 7) -> dict:
    return {"ph": "X", "cat": "kernel", "name": "gemm", "tid": stream, "ts": start, "dur": end - start,
            "args": {"correlation": correlation, "stream": stream}}  # fmt: skip


def trace(*kernels: tuple[int, float, float]) -> list[dict]:
    events = []
    for correlation, (tid, start, end) in enumerate(kernels):
        events += [launch(tid, correlation), kernel(correlation, start, end)]
    return events


LANES = {DECODE: "decode", VERIFY: "verify"}


def test_kernels_running_at_once_on_two_lanes_count_as_overlap():
    # decode busy 0-10 and 12-20 (18 us), verify 5-15 (10 us): together 5-10 and 12-15
    found = overlap(trace((DECODE, 0, 10), (DECODE, 12, 20), (VERIFY, 5, 15)), LANES, "decode", "verify")
    assert (found.first_us, found.second_us, found.both_us) == (18, 10, 8)
    assert found.share == pytest.approx(0.8)
    assert found.kernels == {"decode": 2, "verify": 1}


def test_a_lanes_own_overlapping_kernels_are_counted_once_and_other_threads_not_at_all():
    events = trace((DECODE, 0, 10), (DECODE, 5, 12), (OTHER, 0, 100), (VERIFY, 20, 30))
    found = overlap(events, LANES, "decode", "verify")
    assert (found.first_us, found.second_us, found.both_us) == (12, 10, 0)
    assert found.share == 0


def test_lanes_that_ran_one_after_the_other_do_not_overlap_and_an_idle_lane_has_no_share():
    assert overlap(trace((DECODE, 0, 10), (VERIFY, 10, 20)), LANES, "decode", "verify").both_us == 0
    assert overlap(trace((DECODE, 0, 10)), LANES, "decode", "verify").share is None
