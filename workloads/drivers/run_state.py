"""``RunState``: the one state enum of a run's life, and of a launch that runs several.

A run goes WAITING -> STARTING -> WARMUP -> RUNNING -> STOPPING and ends DONE,
CANCELLED, TIMED_OUT or FAILED (its ``StopReason``), or SKIPPED when what ran it
ended before its turn. A dashboard launch goes LOADING (the model pair, the
trace) -> RUNNING and ends DONE, CANCELLED or FAILED.
"""

from __future__ import annotations

import enum

from workloads.drivers.run_result import StopReason


class RunState(enum.StrEnum):
    WAITING = "waiting"  # its turn has not come
    LOADING = "loading"  # a launch loads the model pair and samples the trace
    STARTING = "starting"  # building and starting the engine
    WARMUP = "warmup"  # warm-up requests: not part of the run, the clock has not started
    RUNNING = "running"  # the clock runs and the trace is being sent
    STOPPING = "stopping"  # every request ended (or the run was halted): the engine is stopping
    DONE = "done"  # it went to the end of its trace
    CANCELLED = "cancelled"  # Stop ended it: what finished is recorded
    TIMED_OUT = "timed out"
    FAILED = "failed"  # its engine crashed or did not stop; a launch: an exception (its error says which)
    SKIPPED = "skipped"  # what ran it ended before its turn

    @property
    def underway(self) -> bool:
        """Between its start and its end: what the device is busy with."""
        return self in (RunState.LOADING, RunState.STARTING, RunState.WARMUP, RunState.RUNNING, RunState.STOPPING)

    @property
    def ended(self) -> bool:
        return self in (RunState.DONE, RunState.CANCELLED, RunState.TIMED_OUT, RunState.FAILED, RunState.SKIPPED)

    @classmethod
    def ended_by(cls, reason: StopReason | None) -> RunState:
        """How a run that returned ended, from its ``RunResult.stop_reason`` (``None``: to the end of its trace)."""
        return _ENDED_BY[reason]


_ENDED_BY = {
    None: RunState.DONE,
    StopReason.CANCELLED: RunState.CANCELLED,
    StopReason.TIMEOUT: RunState.TIMED_OUT,
    StopReason.ENGINE_ERROR: RunState.FAILED,
    StopReason.ENGINE_DID_NOT_STOP: RunState.FAILED,
}
