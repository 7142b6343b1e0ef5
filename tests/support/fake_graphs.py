"""A CUDA-graph backend for the CPU: capture checks the forward never reads the device from the host, replay reruns it.

A real capture records kernels without running them, and fails on any host
read of a device value (a ``.item()``, a ``.tolist()``); a replay runs the
recorded kernels on the same buffers. The fake runs the captured function
once under a dispatch mode that raises on such reads, and replays by running
it again on the same buffers, so a forward that reads anything but its
buffers would show as a wrong output.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from tests.support.fake_cuda import BLOCKING_READS


class HostReadDuringCapture(RuntimeError):
    """A captured forward read a device value on the host (CUDA: operation not permitted when stream is capturing)."""


class _NoHostReads(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if func in BLOCKING_READS:
            raise HostReadDuringCapture(f"{func} during capture")
        return func(*args, **(kwargs or {}))


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
