"""CUDA streams and events per lane; no-ops on the CPU.

Each lane issues its kernels on its own stream. When a lane hands tensors to
another (prefill -> decode, draft block -> verify), the producer records an
event on its stream and the consumer makes its stream wait on that event
before touching them: ordering without a device-wide synchronize. On the CPU
kernels run synchronously on the calling thread, so every method here does
nothing. Every CUDA call the engine makes goes through a ``CudaBackend``:
``stream_backend(device)`` gives torch's for a CUDA device and ``None`` for
the CPU, and tests replace it with a fake (``tests/support/fake_cuda.py``)
that runs the same code on CPU tensors and reports every missing wait or
``record_stream``.

Verified on a GPU: not yet (see docs/architecture.md, "CPU and GPU").
"""

from __future__ import annotations

import gc
import platform
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from pathlib import Path
from typing import Any, NamedTuple

import torch


class CudaBackend:
    """torch.cuda as the engine uses it: streams, events, and the two tensor methods that touch the allocator.

    A fake with the same methods (``tests/support/fake_cuda.py``) runs the
    engine's CUDA paths on the CPU.
    """

    def Stream(self, device: torch.device, priority: int = 0) -> Any:  # noqa: N802 - mirrors torch.cuda.Stream
        return torch.cuda.Stream(device=device, priority=priority)

    def Event(self) -> Any:  # noqa: N802 - mirrors torch.cuda.Event
        return torch.cuda.Event()

    def stream(self, stream: Any) -> Any:
        return torch.cuda.stream(stream)

    def current_stream(self, device: torch.device) -> Any:
        return torch.cuda.current_stream(device)

    def synchronize(self, device: torch.device) -> None:
        torch.cuda.synchronize(device)

    def record_stream(self, tensor: torch.Tensor, stream: Any) -> None:
        tensor.record_stream(stream)

    def pin(self, tensor: torch.Tensor) -> torch.Tensor:
        return tensor.pin_memory()

    def fresh_memory(self, device: torch.device) -> None:
        gc.collect()  # an engine run before may still hold tensors only its reference cycles keep
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)

    def memory(self, device: torch.device) -> AllocatorMemory:
        return AllocatorMemory(
            allocated_mb=torch.cuda.memory_allocated(device) / MIB,
            reserved_mb=torch.cuda.memory_reserved(device) / MIB,
            peak_allocated_mb=torch.cuda.max_memory_allocated(device) / MIB,
            peak_reserved_mb=torch.cuda.max_memory_reserved(device) / MIB,
        )


class AllocatorMemory(NamedTuple):
    """PyTorch's CUDA caching allocator on one device, in MiB: what live tensors hold (allocated) and what the
    cache holds from the driver (reserved), now and at their peaks since the last ``fresh_memory``. NVML's
    "used" memory is reserved plus the CUDA context, and other processes' use."""

    allocated_mb: float
    reserved_mb: float
    peak_allocated_mb: float
    peak_reserved_mb: float


MIB = 2**20


CUDA = CudaBackend()


def stream_backend(device: torch.device | str) -> CudaBackend | None:
    """The backend of ``device``'s streams: torch's on CUDA, ``None`` (nothing to order) on the CPU."""
    return CUDA if torch.device(device).type == "cuda" else None


def fresh_memory(device: torch.device | str) -> None:
    """CUDA: empty PyTorch's cache and reset its peaks, so the next engine's figures are its own; CPU: nothing."""
    backend = stream_backend(device)
    if backend is not None:
        backend.fresh_memory(torch.device(device))


def allocator_memory(device: torch.device | str) -> AllocatorMemory | None:
    """PyTorch's allocated and reserved memory on a CUDA device; ``None`` on the CPU, where they do not apply."""
    backend = stream_backend(device)
    return None if backend is None else backend.memory(torch.device(device))


class DeviceFailure(RuntimeError):
    """The device failed (a CUDA error): the process's CUDA context is unusable, so the engine stops.

    CUDA errors are sticky: after an illegal address or a device-side assert
    every later call on the context fails too, so running a batch's rows again
    one by one would only fail every request more slowly, each with a
    misleading error of its own.
    """


def is_device_failure(exc: BaseException) -> bool:
    """Whether ``exc`` is the device failing (fatal for the process) rather than one batch's problem."""
    if isinstance(exc, torch.AcceleratorError | DeviceFailure):
        return True
    text = str(exc)
    return isinstance(exc, RuntimeError) and any(mark in text for mark in DEVICE_ERROR_MARKS)


# how CUDA, cuBLAS and cuDNN errors read when torch raises them as plain RuntimeErrors
DEVICE_ERROR_MARKS = ("CUDA error", "CUBLAS_STATUS_", "CUDNN_STATUS_", "cuDNN error")


def raise_if_device_failure(exc: BaseException) -> None:
    """Raise ``DeviceFailure`` from ``exc`` when the device itself failed; otherwise do nothing."""
    if is_device_failure(exc):
        if isinstance(exc, DeviceFailure):
            raise exc
        raise DeviceFailure(f"the device failed, which is fatal for the process: {type(exc).__name__}: {exc}") from exc


def pci_bus_id(device: torch.device | str, backend: Any = None) -> str | None:
    """The PCI address of a CUDA device, as NVML writes it (``00000000:3B:00.0``), or ``None``.

    NVML numbers GPUs in PCI order and ignores ``CUDA_VISIBLE_DEVICES``, so
    ``cuda:0`` is not necessarily NVML's device 0; its PCI address is the same
    for both. ``None`` off CUDA, or when this torch does not report it.
    """
    device = torch.device(device)
    if device.type != "cuda":
        return None
    backend = backend if backend is not None else torch.cuda
    props = backend.get_device_properties(device)
    parts = [getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if any(part is None for part in parts):
        return None
    domain, bus, dev = parts
    return f"{domain:08X}:{bus:02X}:{dev:02X}.0"


def keep_for_current_stream(*tensors: torch.Tensor | None) -> None:
    """Mark CUDA tensors as used by the current stream before their last reference is dropped.

    The caching allocator returns freed memory to the stream that allocated it
    and may hand it out again at once. A tensor another lane allocated and this
    lane's stream has queued kernels on must not be reused before they run;
    ``record_stream`` makes the allocator wait for this stream's work first.
    No-op for CPU tensors.
    """
    for tensor in tensors:
        if tensor is None:
            continue
        cuda = stream_backend(tensor.device)
        if cuda is not None:
            cuda.record_stream(tensor, cuda.current_stream(tensor.device))


# CUDA stream priorities (lower is more urgent): decoding and verification are what a waiting user's next token
# needs, so a 512-token prefill chunk queued on the prefill lane's stream does not hold their kernels back
HIGH_PRIORITY = -1
LANE_PRIORITY = {"prefill": 0, "decode": HIGH_PRIORITY, "verify": HIGH_PRIORITY, "loop": HIGH_PRIORITY}


def cuda_problem(device: str, backend: Any = None) -> str | None:
    """Why ``device`` (``cuda`` or ``cuda:N``) cannot be used here, or ``None`` when it can."""
    backend = backend if backend is not None else torch.cuda
    if torch.version.cuda is None and backend is torch.cuda:
        return f"this torch ({torch.__version__}) is built without CUDA"
    if not backend.is_available():
        return "torch sees no CUDA device (driver, CUDA_VISIBLE_DEVICES?)"
    index = torch.device(device).index
    count = backend.device_count()
    if index is not None and index >= count:
        return f"{device} asked for, {count} CUDA device(s) visible"
    return None


class LaneStream:
    """One lane's CUDA stream (at the lane's priority, ``LANE_PRIORITY``); nothing on the CPU."""

    def __init__(self, device: torch.device, backend: Any = None, lane: str = "") -> None:
        self.device = device
        self._backend = backend if backend is not None else stream_backend(device)
        self._cuda = self._backend is not None
        self.priority = LANE_PRIORITY.get(lane, 0)
        self.stream = self._backend.Stream(device=device, priority=self.priority) if self._cuda else None

    @contextmanager
    def activate(self) -> Iterator[None]:
        """Make this lane's stream current for the kernels launched inside."""
        ctx = self._backend.stream(self.stream) if self._cuda else nullcontext()
        with ctx:
            yield

    def record(self) -> Any | None:
        """An event marking everything issued so far on this stream."""
        if not self._cuda:
            return None
        event = self._backend.Event()
        event.record(self.stream)
        return event

    def wait(self, event: Any | None) -> None:
        """Order this stream after ``event`` (from another lane); the host does not block."""
        if self._cuda and event is not None:
            self.stream.wait_event(event)


def cpu_name() -> str:
    """The CPU's model name (Linux ``/proc/cpuinfo``), else what the platform reports."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"
