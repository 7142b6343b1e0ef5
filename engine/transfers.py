"""The host's side of a step: what goes up to the device and the one read that comes back.

On a GPU the host queues kernels ahead of the device only until it needs a
value the device computes: every read-back (``.tolist()``, ``bool()``,
``.item()``) stops the queue until the device catches up. So a step uploads
its metadata in as few copies as possible (``upload``: one non-blocking
copy on CUDA, staged in the lane's pinned buffer) and reads back once: the verdicts, the sampled
tokens and the non-finite checks of every forward of the step travel in one
copy (``read_back``). ``FiniteChecks`` collects those checks as device flags
instead of waiting on each forward. The design's count per step is stated in
docs/architecture.md ("Host waits") and held by a test.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any

import torch

from engine import devices

INF = float("inf")
STAGING_BYTES = 1 << 16  # a lane's pinned buffer: many steps of metadata per lap (it doubles for a larger step)
ALIGN = 8  # bytes: every staged region starts aligned for int64 and float32


class StagingBuffer:
    """One lane's pinned host buffer that uploads are staged in: allocated once, reused for every step.

    A non-blocking copy reads its pinned source when the device gets to it, not
    when the host queues it, so a region must not be rewritten before its copy
    ran. Regions are handed out in a ring; each copy records an event on the
    stream that queued it, and a region about to be reused waits for the events
    of the copies it held. With one read-back per step, those copies finished
    long before the ring comes round: the wait is a check, not a stall.
    Mutates: the buffer and its ring of in-flight regions.
    """

    def __init__(self, backend: Any, device: torch.device, capacity: int = STAGING_BYTES) -> None:
        self.backend, self.device = backend, device
        self.buffer = backend.pin(torch.empty(capacity, dtype=torch.uint8))
        self.offset = 0
        self.in_flight: deque[tuple[int, int, Any]] = deque()  # (start, end, event of the copy reading it)

    def upload(self, values: list[int] | list[float], dtype: torch.dtype) -> torch.Tensor:
        """``values`` on the device, copied from a region of this buffer; the host does not wait for the copy."""
        size = len(values) * dtype.itemsize
        start = self._claim(size)
        region = self.buffer[start : start + size].view(dtype)
        region.numpy()[:] = values  # a host write: no operator, no device involved
        # copy=True: a copy on every device (a CPU stand-in for the device must not alias the buffer)
        out = region.to(self.device, non_blocking=True, copy=True)
        event = self.backend.Event()
        event.record(self.backend.current_stream(self.device))
        self.in_flight.append((start, start + size, event))
        return out

    def _claim(self, size: int) -> int:
        """The start of ``size`` free bytes, waiting for the copies still reading them."""
        if size > self.buffer.numel():
            self._drain()
            self.buffer = self.backend.pin(torch.empty(2 * size, dtype=torch.uint8))
            self.offset = 0
        start = self.offset if self.offset + size <= self.buffer.numel() else 0
        end = start + size
        while self.in_flight and self.in_flight[0][2].query():  # copies the device has done: forget them
            self.in_flight.popleft()
        still = deque()
        for region in self.in_flight:
            if region[0] < end and start < region[1]:
                region[2].synchronize()  # a copy queued a whole ring ago still reads here: let it finish
            else:
                still.append(region)
        self.in_flight = still
        self.offset = -(-end // ALIGN) * ALIGN
        return start

    def _drain(self) -> None:
        while self.in_flight:
            self.in_flight.popleft()[2].synchronize()


_lane_buffers = threading.local()  # each lane thread's StagingBuffer per device: a lane is a thread


def staging_buffer(backend: Any, device: torch.device) -> StagingBuffer:
    """The calling lane's staging buffer for ``device`` (made on its first upload, then reused)."""
    buffers = _lane_buffers.__dict__.setdefault("by_device", {})
    key = (backend, str(device))
    if key not in buffers:
        buffers[key] = StagingBuffer(backend, device)
    return buffers[key]


def upload(values: list[int] | list[float], device: torch.device, dtype: torch.dtype = torch.long) -> torch.Tensor:
    """One host-to-device copy of ``values``: on CUDA staged in the lane's pinned buffer, non-blocking."""
    backend = devices.stream_backend(device)
    if backend is not None:
        return staging_buffer(backend, device).upload(values, dtype)
    return torch.tensor(values, dtype=dtype, device=device)


def read_back(*tensors: torch.Tensor) -> list[list[int]]:
    """One device-to-host copy of several integer or bool tensors; each comes back as a flat list of ints.

    The copy is explicit (``copy=True``) so that it is one visible operator on every device.
    """
    if not tensors:
        return []
    flat = torch.cat([t.reshape(-1).long() for t in tensors])
    values = flat.to("cpu", copy=True).tolist()
    out, start = [], 0
    for t in tensors:
        out.append(values[start : start + t.numel()])
        start += t.numel()
    return out


class FiniteChecks:
    """Device flags saying which forwards of a step returned NaN or +inf logits, read with the step's verdicts.

    NaN or +inf logits would be sampled into garbage tokens without a word: the
    step fails its batch instead, before it emits anything. -inf is legitimate
    (a draft whose vocabulary is restricted masks the rest with -inf), so one
    reduction per forward suffices: a sum is NaN or +inf exactly when a logit
    is NaN or +inf (or +inf meets -inf), i.e. when it is not below +inf.
    """

    def __init__(self) -> None:
        self._flags: list[torch.Tensor] = []  # 0-d bool each: True = non-finite
        self._where: list[str] = []

    def add(self, logits: torch.Tensor, where: str) -> None:
        """Queue the check of one forward's logits ([K, V]); ``where`` names it in the error."""
        self._flags.append(~(logits.sum() < INF))
        self._where.append(where)

    def flags(self, device: torch.device) -> torch.Tensor:
        """[F] bool, one per added forward (empty when none was added)."""
        if not self._flags:
            return torch.zeros(0, dtype=torch.bool, device=device)
        return torch.stack(self._flags)

    def raise_if_any(self, host_flags: list[int]) -> None:
        """Raise ``FloatingPointError`` naming the first forward whose flag (as read back) is set."""
        for flag, where in zip(host_flags, self._where, strict=True):
            if flag:
                raise FloatingPointError(f"the {where} returned non-finite logits (NaN or +inf)")
