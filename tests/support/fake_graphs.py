"""A CUDA-graph backend for the CPU: capture checks the forward never reads the device from the host, replay reruns it.

A real capture records kernels without running them, and fails on any host
read of a device value (a ``.item()``, a ``bool()``, or an operator whose
output's shape depends on the data, such as ``nonzero``); a replay runs the
recorded kernels on the same buffers. The fake runs the captured function
once under a dispatch mode that raises on such reads, and replays by running
it again on the same buffers, so a forward that reads anything but its
buffers would show as a wrong output. What it cannot see: a copy to the host
(``.tolist()``, ``.cpu()``), since every tensor here is on the host already.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tests.support.fake_cuda import BLOCKING_READS


class HostReadDuringCapture(RuntimeError):
    """A captured forward read a device value on the host (CUDA: operation not permitted when stream is capturing)."""


# operators whose output's shape depends on the data: on CUDA they wait for the device to learn it
DATA_SHAPED = (
    torch.ops.aten.nonzero.default,
    torch.ops.aten.masked_select.default,
    torch.ops.aten._unique2.default,
)


class _NoHostReads(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in BLOCKING_READS or func in DATA_SHAPED or _data_shaped(func, args, kwargs):
            raise HostReadDuringCapture(f"{func} during capture")
        return func(*args, **kwargs)


def _data_shaped(func, args, kwargs) -> bool:
    """``repeat_interleave`` without ``output_size``, or indexing with a boolean mask."""
    if func in (torch.ops.aten.repeat_interleave.Tensor, torch.ops.aten.repeat_interleave.self_Tensor):
        return kwargs.get("output_size") is None
    if func is torch.ops.aten.index.Tensor:
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in args[1])
    return False


class FakeGraph:
    def __init__(self, run: Callable[[], None]) -> None:
        self.run = run
        self.replays = 0

    def replay(self) -> None:
        self.replays += 1
        self.run()


class FakeGraphs:
    """``engine.gpu.graph_runner.GraphBackend`` on CPU tensors; ``fail`` makes every capture raise."""

    def __init__(self, fail: bool = False) -> None:
        self.fail = fail
        self.captured: list[FakeGraph] = []

    def pool(self) -> object:
        return object()

    def capture(self, run: Callable[[], None], pool: object) -> FakeGraph:
        if self.fail:
            raise HostReadDuringCapture("capture refused (injected)")
        with torch.inference_mode(), _NoHostReads():
            run()
        graph = FakeGraph(run)
        self.captured.append(graph)
        return graph
